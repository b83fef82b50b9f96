"""Served models as accuracy candidates: the repository's config.pbtxt says which models take tensors
(FP32 [3, H, W]) and which take encoded images (TYPE_STRING), and the client speaks to each accordingly."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.repository.config import read_config

RAW, E2E = "raw", "e2e"


def served_models(repository: Path, manifest=None) -> list[tuple[str, str]]:
    """(name, raw|e2e) of every model in the repository with an image or image-tensor input; a role the
    owner declared (harness.repository.manifest) wins, and models declared skip are left out."""
    out = []
    for model_dir in sorted(p for p in Path(repository).iterdir() if (p / "config.pbtxt").exists()):
        declared = manifest.role(model_dir.name) if manifest is not None else None
        kind = declared if declared in (RAW, E2E) else None if declared == "skip" else model_kind(read_config(model_dir))
        if kind:
            out.append((model_dir.name, kind))
    return out


def model_kind(config) -> str | None:
    from tritonclient.grpc import model_config_pb2 as pb  # noqa: PLC0415

    if not config.input:
        return None
    first = config.input[0]
    if first.data_type == pb.TYPE_STRING and any(o.name == "detections" for o in config.output):
        return E2E
    if first.data_type == pb.TYPE_FP32 and len(first.dims) >= 3 and first.dims[-3] == 3:
        return RAW
    return None


def _latest_onnx(model_dir: Path) -> Path | None:
    """The ONNX file of the highest version (Triton's default policy: latest, one version)."""
    versions = sorted((int(d.name), d) for d in model_dir.iterdir() if d.is_dir() and d.name.isdigit()) if model_dir.is_dir() else []
    for _, version in reversed(versions):
        found = sorted(version.glob("*.onnx"))
        if found:
            return found[0]
    return None


def model_artifact(repository: Path, name: str) -> Path | None:
    """The ONNX file a served model runs: its own latest version's, or for an ensemble the one of the
    step that takes the image tensor (the raw model it schedules)."""
    model_dir = Path(repository) / name
    own = _latest_onnx(model_dir)
    if own is not None:
        return own
    config = read_config(model_dir)
    for step in config.ensemble_scheduling.step:
        found = model_artifact(repository, step.model_name)
        if found is not None:
            return found
    return None


def served_precision(config, manifest, name: str, from_artifact: str) -> str:
    """What a served model computes in, so the gates for that precision judge it: the owner's
    declaration (manifest `[precision]`, `--precision NAME=fp16`), else the config's `precision`
    parameter (the reference GPU build runs FP16 from an FP32 ONNX file), else its ONNX file's weights."""
    declared = manifest.precision(name) if manifest is not None else None
    if declared:
        return declared
    parameter = config.parameters["precision"].string_value.lower() if "precision" in config.parameters else ""
    if parameter in ("fp32", "fp16", "int8"):
        return parameter
    return from_artifact


def e2e_thresholds(config, defaults: dict) -> dict:
    """conf / iou / max_det as the model's config parameters state them, else the defaults."""
    out = dict(defaults)
    aliases = {"conf": ("conf", "conf_threshold", "score_threshold"), "iou": ("iou", "iou_threshold", "nms_iou"),
               "max_det": ("max_det", "max_detections")}
    for key, names in aliases.items():
        for name in names:
            if name in config.parameters:
                value = config.parameters[name].string_value
                out[key] = int(value) if key == "max_det" else float(value)
                break
    if config.output:
        for output in config.output:
            if output.name == "detections" and len(output.dims) >= 2 and output.dims[-2] > 0:
                out["max_det"] = int(output.dims[-2])
    return out


class ServedRawModel:
    """infer({input: batch}) over HTTP, one request per image (the model's max_batch_size may be 0)."""

    def __init__(self, client, config):
        self.client, self.config = client, config
        self.name = config.name
        self.input_name = config.input[0].name
        self.outputs = [o.name for o in config.output]

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import tritonclient.http as httpclient  # noqa: PLC0415

        batch = inputs[self.input_name]
        results: dict[str, list] = {name: [] for name in self.outputs}
        for image in batch:
            tensor = image[None] if self.config.max_batch_size > 0 else image
            infer_input = httpclient.InferInput(self.input_name, list(tensor.shape), "FP32")
            infer_input.set_data_from_numpy(np.ascontiguousarray(tensor, dtype=np.float32), binary_data=True)
            response = self.client.infer(self.name, [infer_input],
                                         outputs=[httpclient.InferRequestedOutput(n, binary_data=True) for n in self.outputs])
            for name in self.outputs:
                value = response.as_numpy(name)
                results[name].append(value if self.config.max_batch_size > 0 else value[None])
        return {name: np.concatenate(values) for name, values in results.items()}


class ServedEndToEndModel:
    """detect(encoded) -> rows [k, 6] from `detections` [max_det, 6] + `num_detections`."""

    def __init__(self, client, config):
        self.client, self.config = client, config
        self.name = config.name
        self.input_name = config.input[0].name
        names = [o.name for o in config.output]
        self.detections = "detections" if "detections" in names else names[0]
        self.count = "num_detections" if "num_detections" in names else (names[1] if len(names) > 1 else None)

    def detect(self, encoded: bytes) -> np.ndarray:
        import tritonclient.http as httpclient  # noqa: PLC0415

        dims = [int(d) for d in self.config.input[0].dims] or [1]
        shape = ([1] if self.config.max_batch_size > 0 else []) + [1 if d < 0 else d for d in dims]
        data = np.array([encoded], dtype=np.object_).reshape(shape)
        infer_input = httpclient.InferInput(self.input_name, shape, "BYTES")
        infer_input.set_data_from_numpy(data, binary_data=True)
        response = self.client.infer(self.name, [infer_input])
        rows = np.asarray(response.as_numpy(self.detections), dtype=np.float32).reshape(-1, 6)
        if self.count is not None:
            rows = rows[: int(np.asarray(response.as_numpy(self.count)).reshape(-1)[0])]
        return rows[rows[:, 5] >= 0]
