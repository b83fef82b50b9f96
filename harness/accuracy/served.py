"""Served models as accuracy candidates: each model's layout (harness.repository.layouts: all its inputs
and outputs, and what its owner declared) says which are raw detectors (tensors in, [4 + nc, anchors] out)
and which are end-to-end (images in any form, detections in any layout out), and the client speaks to
each accordingly (harness.vision.served.EndToEndClient for every end-to-end layout)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.checks.model import completed_config
from harness.repository.layouts import ROLE_E2E as E2E
from harness.repository.layouts import ROLE_RAW as RAW
from harness.repository.config import ModelConfig
from harness.repository.layouts import Layout, read_layout


def served_models(repository: Path, manifest=None) -> list[tuple[str, str]]:
    """(name, raw|e2e) of every model in the repository whose layout has a role; a role the owner declared
    (harness.repository.manifest) wins, and models declared skip are left out."""
    out = []
    for model_dir in sorted(p for p in Path(repository).iterdir() if (p / "config.pbtxt").exists()):
        declared = manifest.role(model_dir.name) if manifest is not None else None
        kind = declared if declared in (RAW, E2E) else None if declared == "skip" else \
            model_layout(completed_config(model_dir), manifest, model_dir.name).role
        if kind:
            out.append((model_dir.name, kind))
    return out


def model_layout(config, manifest=None, name: str | None = None) -> Layout:
    """The model's layout, with the owner's [layout.NAME] declaration when the manifest has one."""
    name = name or config.name
    return read_layout(config, manifest.layout(name) if manifest is not None else None, name)


def model_kind(config, manifest=None) -> str | None:
    """raw | e2e | None: the role of the model's layout."""
    return model_layout(config, manifest).role


def version_artifacts(repository: Path, name: str) -> dict[int, Path]:
    """version -> the ONNX file of that version folder, for every version that has one; for an ensemble
    without files of its own, those of the step that takes the image tensor (the raw model it schedules)."""
    model_dir = Path(repository) / name
    versions = sorted((int(d.name), d) for d in model_dir.iterdir() if d.is_dir() and d.name.isdigit()) \
        if model_dir.is_dir() else []
    own = {number: found[0] for number, folder in versions if (found := sorted(folder.glob("*.onnx")))}
    if own or not (model_dir / "config.pbtxt").is_file():
        return own
    for step in completed_config(model_dir).ensemble_scheduling.step:
        found = version_artifacts(repository, step.model_name)
        if found:
            return found
    return {}


def model_artifact(repository: Path, name: str) -> Path | None:
    """The ONNX file a served model runs: its highest version's (Triton's default policy: latest, one
    version), or for an ensemble the one of the step that takes the image tensor (the raw model it schedules)."""
    found = version_artifacts(repository, name)
    return found[max(found)] if found else None


def served_precision(config, manifest, name: str, from_artifact: str, repository: Path | None = None) -> str:
    """What a served model computes in, so the gates for that precision judge it: the owner's
    declaration (manifest `[precision]`, `--precision NAME=fp16`), else the config's `precision`
    parameter (the reference GPU build runs FP16 from an FP32 ONNX file) — for an ensemble, the lowest
    its steps declare — else its ONNX file's weights."""
    declared = manifest.precision(name) if manifest is not None else None
    if declared:
        return declared
    parameter = _precision_parameter(config, repository)
    return parameter or from_artifact


def model_precision(repository: Path, name: str, manifest, config=None, artifact: Path | None = None) -> str:
    """served_precision of the model `name` of `repository`, its ONNX file's weights last (FP32 without one)."""
    from harness.engines.ort import precision_of

    config = config if config is not None else completed_config(Path(repository) / name)
    artifact = artifact if artifact is not None else model_artifact(Path(repository), name)
    return served_precision(config, manifest, name, precision_of(artifact) if artifact else "fp32", repository)


def _precision_parameter(config, repository: Path | None, seen: frozenset = frozenset()) -> str | None:
    order = ("int8", "fp16", "fp32")
    found = []
    value = config.parameters["precision"].string_value.lower() if "precision" in config.parameters else ""
    if value in order:
        found.append(value)
    if repository is not None:
        for step in config.ensemble_scheduling.step:
            step_dir = Path(repository) / step.model_name
            if step.model_name in seen or not (step_dir / "config.pbtxt").is_file():
                continue
            step_value = _precision_parameter(completed_config(step_dir), repository, seen | {config.name})
            if step_value:
                found.append(step_value)
    return min(found, key=order.index) if found else None


def e2e_thresholds(config, defaults: dict, layout: Layout | None = None, repository: Path | None = None) -> dict:
    """conf / iou / max_det as the model's config parameters state them — for an ensemble, as its steps'
    configs do (the post-processing step holds them), given the repository — else the defaults; max_det
    is the detections output's rows (or NMS boxes) when the config fixes them."""
    out = dict(defaults)
    aliases = {"conf": ("conf", "conf_threshold", "score_threshold"), "iou": ("iou", "iou_threshold", "nms_iou"),
               "max_det": ("max_det", "max_detections")}
    for key, names in aliases.items():
        for parameters in _parameter_sets(config, repository):
            name = next((n for n in names if n in parameters), None)
            if name is not None:
                value = parameters[name].string_value
                out[key] = int(value) if key == "max_det" else float(value)
                break
    layout = layout or read_layout(config)
    if layout.output is not None and layout.output.max_det:
        out["max_det"] = int(layout.output.max_det)
    return out


@dataclass(frozen=True)
class ServedSettings:
    """What judging one served model's detections needs, from its completed config: the gates of `precision`
    hold it, and the reference runs with its `thresholds` (conf / iou / max_det)."""

    config: ModelConfig
    layout: Layout
    artifact: Path | None
    precision: str
    thresholds: dict


def served_settings(repository: Path, name: str, manifest, eval_defaults: dict) -> ServedSettings:
    """The model `name` of `repository` as Triton completes its config: its layout (with the manifest's
    declarations), the ONNX file it runs, its precision (served_precision, the file's weights last) and its
    conf / iou / max_det (e2e_thresholds over `eval_defaults`, a profile's [eval]). The accuracy suite's served
    candidates and the letterbox suite's client inputs both read a model through this."""
    repository = Path(repository)
    config = completed_config(repository / name)
    config.name = config.name or name  # Triton names a model by its directory when the config does not
    layout = model_layout(config, manifest, name)
    artifact = model_artifact(repository, name)
    precision = model_precision(repository, name, manifest, config, artifact)
    defaults = {key: eval_defaults[key] for key in ("conf", "iou", "max_det")}
    return ServedSettings(config, layout, artifact, precision, e2e_thresholds(config, defaults, layout, repository))


def _parameter_sets(config, repository: Path | None) -> list:
    """The model's own parameters, then each ensemble step's (in step order) when the repository holds it."""
    found = [config.parameters]
    if repository is not None:
        for step in config.ensemble_scheduling.step:
            step_dir = Path(repository) / step.model_name
            if (step_dir / "config.pbtxt").is_file():
                found.append(completed_config(step_dir).parameters)
    return found


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


def ServedEndToEndModel(client, config, manifest=None):  # noqa: N802 (kept: the accuracy suite's name for it)
    """detect(encoded) -> rows [k, 6] in source pixels, for an end-to-end model of any layout: the one
    client of harness.vision.served, built from the model's layout."""
    from harness.vision.served import EndToEndClient, end_to_end_model

    model = end_to_end_model(config, manifest=manifest)
    if model is None:
        layout = model_layout(config, manifest)
        raise ValueError(f"{config.name} is not an end-to-end model: {layout.why_no_role()}")
    return EndToEndClient(client, model)
