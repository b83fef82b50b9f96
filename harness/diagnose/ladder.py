"""The ablation ladder, as the deployment guides say to debug: "switch off dynamic batching and INT8, confirm
the plain configuration, then turn the optimisations back on one by one".

On a scratch copy of the repository (never the user's files), the raw model (tensor in, [4 + nc, anchors]
out) is served first plain — its FP32 version, no dynamic batching, one instance — then each optimisation
the repository uses is switched back on, cumulatively: dynamic batching (requests sent together so they
batch), the FP16 and INT8 versions, the served pre/post-processing (every end-to-end model and ensemble),
more instances. Configs are edited through model_config_pb2. At every rung the detections are judged
against the FP32 ONNX run locally (the reference pipeline); the first rung that diverges is named."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Matched share of the reference's boxes (IoU 0.5) each precision must keep, and the extra share it may add.
TOLERANCE = {"fp32": (0.99, 0.01), "fp16": (0.97, 0.03), "int8": (0.85, 0.15)}
PLAIN, BATCHING, FP16, INT8, SERVED, INSTANCES = ("plain", "dynamic batching", "fp16", "int8",
                                                   "served pre/post-processing", "more instances")


@dataclass
class Rung:
    name: str
    change: str                       # what this rung switched on
    precision: str = "fp32"
    matched: float | None = None      # share of the reference's boxes found again
    extra: float | None = None        # extra boxes, as a share of the reference's
    skipped: str | None = None        # why this rung did not run
    per_model: dict = field(default_factory=dict)

    @property
    def diverges(self) -> bool:
        need, allowed = TOLERANCE[self.precision]
        return self.skipped is None and (self.matched < need or self.extra > allowed)

    def line(self) -> str:
        if self.skipped:
            return f"{self.name:28s} not run: {self.skipped}"
        need, allowed = TOLERANCE[self.precision]
        verdict = "DIVERGES" if self.diverges else "agrees"
        parts = "; ".join(f"{m}: {v['matched']:.0%} matched, {v['extra']:.0%} extra" for m, v in self.per_model.items())
        return (f"{self.name:28s} {verdict:8s} {self.change} — {parts} "
                f"(need >= {need:.0%} matched, <= {allowed:.0%} extra)")


@dataclass
class Ladder:
    repository: Path
    raw_model: str
    rungs: list[Rung]

    @property
    def first_divergent(self) -> Rung | None:
        return next((r for r in self.rungs if r.diverges), None)

    def verdict(self) -> str:
        bad = self.first_divergent
        if bad is None:
            return f"every rung agrees with the FP32 reference ({self.raw_model})"
        return (f"detections first diverge at rung '{bad.name}' ({bad.change}): the defect is in what that rung "
                f"switched on; the rungs before it agree")

    def as_dict(self) -> dict:
        return {"repository": str(self.repository), "raw_model": self.raw_model, "verdict": self.verdict(),
                "first_divergent": self.first_divergent.name if self.first_divergent else None,
                "tolerance": {p: {"matched_at_least": need, "extra_at_most": allowed} for p, (need, allowed) in TOLERANCE.items()},
                "rungs": [{k: v for k, v in vars(r).items()} | {"diverges": r.diverges} for r in self.rungs]}


def images(count: int = 8, seed: int = 7) -> list[bytes]:
    """Encoded evaluation images from the synthetic generator, day and night."""
    from harness.dataset.generate import render_one

    return [render_one(seed, ("day", "night")[i % 2], i // 2, "mixed")[3] for i in range(count)]


def _score(reference: list[np.ndarray], candidate: list[np.ndarray]) -> dict:
    from harness.accuracy.boxes import BoxReport

    report = BoxReport()
    for i, (ref, cand) in enumerate(zip(reference, candidate)):
        report.add(i, ref, cand, 0.5)
    total = max(sum(c.reference for c in report.images), 1)
    return {"matched": sum(c.matched for c in report.images) / total, "extra": sum(c.extra for c in report.images) / total}


def _versions_by_precision(model_dir: Path, filename: str) -> dict[str, int]:
    from harness.engines.ort import precision_of

    found: dict[str, int] = {}
    for version in sorted((p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)):
        onnx = version / filename
        if onnx.suffix == ".onnx" and onnx.is_file():
            found.setdefault(precision_of(onnx), int(version.name))
    return found


def _raw_model(repository: Path, configs: dict, loadable: tuple[str, ...]) -> str:
    from harness.accuracy.served import model_layout

    for name in loadable:
        if name in configs and model_layout(configs[name]).role == "raw":
            return name
    raise ValueError(f"no raw model (tensor in, [4 + nc, anchors] out) this server can load in {repository}: "
                     f"the ladder starts from one")


class _Server:
    """The embedded server on the scratch copy, models loaded explicitly per rung."""

    def __init__(self, repository: Path):
        import tritonclient.http as httpclient

        from harness.servers import ServerSettings, create_server

        self.server = create_server("process", ServerSettings(repository=repository, load_models=())).start()
        self.client = httpclient.InferenceServerClient(self.server.endpoints.http, concurrency=8, network_timeout=300)

    def load(self, name: str) -> None:
        self.client.load_model(name)

    def stop(self) -> None:
        self.client.close()
        self.server.stop()


def run_ladder(repo: Path, count: int = 8, log=print) -> Ladder:
    """The ladder on a scratch copy of `repo`; `log` gets one line per rung as it finishes."""
    from harness.accuracy.served import ServedEndToEndModel, model_layout
    from harness.reference import loadable_models, server_backends
    from harness.repository.config import read_config, write_config
    from harness.repository.scratch import scratch_copy
    from harness.repository.sizing import read_configs
    from harness.vision.pipeline import LocalPipeline

    scratch = scratch_copy(Path(repo))
    configs = read_configs(scratch)
    loadable = loadable_models(scratch, server_backends("process"))
    raw = _raw_model(Path(repo), configs, loadable)
    original = read_config(scratch / raw)
    layout = model_layout(original)
    filename = original.parameters["model_file"].string_value if "model_file" in original.parameters else "model.onnx"
    by_precision = _versions_by_precision(scratch / raw, filename)
    if "fp32" not in by_precision:
        raise ValueError(f"{raw} has no FP32 ONNX version ({filename}) to start the ladder from: {by_precision}")
    fp32_file = scratch / raw / str(by_precision["fp32"]) / filename
    imgsz = layout.input.imgsz or (640, 640)
    local = LocalPipeline(fp32_file, imgsz=imgsz)
    encoded = images(count)
    dets, nums = local(encoded)
    reference = [d[:n] for d, n in zip(dets, nums)]
    pipeline = local  # the same letterbox and decode, the served raw model in place of ONNX Runtime

    def serve_raw(concurrent: bool) -> list[np.ndarray]:
        import tritonclient.http as httpclient

        batch, metas = pipeline.preprocess(encoded)

        def send(image):
            tensor = image[None] if original.max_batch_size > 0 else image
            item = httpclient.InferInput(original.input[0].name, list(tensor.shape), "FP32")
            item.set_data_from_numpy(np.ascontiguousarray(tensor, dtype=np.float32))
            return server.client.async_infer(raw, [item])

        def read(pending):
            out = pending.get_result().as_numpy(original.output[0].name)
            return out if original.max_batch_size > 0 else out[None]

        if concurrent:  # all in flight together, so the scheduler can batch them
            outs = [read(p) for p in [send(image) for image in batch]]
        else:
            outs = [read(send(image)) for image in batch]
        d, n = pipeline.postprocess(np.concatenate(outs), metas)
        return [x[:k] for x, k in zip(d, n)]

    plain = copy.deepcopy(original)
    plain.ClearField("dynamic_batching")
    for group in plain.instance_group:
        group.count = 1
    plain.version_policy.Clear()
    plain.version_policy.specific.versions.append(by_precision["fp32"])

    steps: list[tuple[Rung, object]] = [(Rung(PLAIN, f"{raw}: FP32 version {by_precision['fp32']}, no dynamic batching, "
                                                     "one instance"), lambda c: c)]
    if original.HasField("dynamic_batching"):
        steps.append((Rung(BATCHING, f"{raw}: dynamic_batching as configured, {count} requests at once"),
                      lambda c: c.dynamic_batching.CopyFrom(original.dynamic_batching)))
    else:
        steps.append((Rung(BATCHING, "", skipped=f"{raw} does not use dynamic batching"), None))
    for precision, name in (("fp16", FP16), ("int8", INT8)):
        if precision in by_precision:
            version = by_precision[precision]
            steps.append((Rung(name, f"{raw}: {precision.upper()} version {version}", precision=precision),
                          lambda c, v=version: (c.version_policy.specific.ClearField("versions"),
                                                c.version_policy.specific.versions.append(v))))
        else:
            steps.append((Rung(name, "", skipped=f"{raw} has no {precision.upper()} version"), None))
    served = [n for n in loadable if n != raw and model_layout(configs[n]).role == "e2e"]
    steps.append((Rung(SERVED, f"end-to-end models {served}") if served else
                  Rung(SERVED, "", skipped="no end-to-end model or ensemble this server can load"), "served" if served else None))
    counts = [g.count for g in original.instance_group]
    if any(c > 1 for c in counts):
        steps.append((Rung(INSTANCES, f"{raw}: instance counts {counts}"),
                      lambda c: (c.ClearField("instance_group"), c.instance_group.extend(original.instance_group))))
    else:
        steps.append((Rung(INSTANCES, "", skipped=f"{raw} runs one instance"), None))

    server = _Server(scratch)
    rungs, current = [], plain
    try:
        for rung, change in steps:
            if rungs and rung.precision == "fp32":  # later rungs keep the lowest precision switched on
                rung.precision = next((r.precision for r in reversed(rungs) if r.skipped is None), "fp32")
            rungs.append(rung)
            if change is None:
                log(rung.line())
                continue
            if change == "served":
                for name in served:
                    server.load(name)
                    model = ServedEndToEndModel(server.client, configs[name])
                    rung.per_model[name] = _score(reference, [model.detect(blob) for blob in encoded])
            else:
                change(current)
                write_config(scratch / raw, current)
                server.load(raw)
                rung.per_model[raw] = _score(reference, serve_raw(concurrent=rung.name != PLAIN))
            rung.matched = min(v["matched"] for v in rung.per_model.values())
            rung.extra = max(v["extra"] for v in rung.per_model.values())
            log(rung.line())
    finally:
        server.stop()
    return Ladder(Path(repo), raw, rungs)
