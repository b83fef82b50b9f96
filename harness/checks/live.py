"""Live: after load, the server serves what the files say. The model is READY in the repository
index, its metadata and config over HTTP and gRPC equal config.pbtxt (fields Triton's auto-complete
filled in are returned separately, not as failures), and one minimal request of the declared shapes
succeeds over both protocols."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import numpy as np
from google.protobuf import json_format

from harness.checks.findings import Finding, NotApplicable
from harness.checks.model import ModelEntry, list_models, load_entry
from harness.repository.config import ModelConfig, dtype_name, from_json

CHECK = "live"
MISSING_BACKEND = re.compile(r"unable to find backend library for backend '([^']+)'")
# A variable spatial dim of an image input gets this size: a multiple of every YOLO stride.
IMAGE_SIDE = 64


@dataclass
class LiveResult:
    findings: list[Finding] = field(default_factory=list)
    additions: dict[str, object] = field(default_factory=dict)  # Triton's auto-complete, by field path
    notes: list[str] = field(default_factory=list)  # what was not exercised here, and where it is


def ensure_loaded(entry: ModelEntry, http_client, *, can_load: bool, log_tail=None) -> None:
    """Load the model through the repository API unless it is READY already. A server without the
    model's backend is a reason not to test (NotApplicable), not a failure."""
    from tritonclient.utils import InferenceServerException

    if http_client.is_model_ready(entry.name):
        return
    reason = _index_reason(http_client, entry.name)
    if can_load:
        try:
            http_client.load_model(entry.name)
            return
        except InferenceServerException as error:
            reason = error.message() if hasattr(error, "message") else str(error)
    missing = MISSING_BACKEND.search(reason or "")
    if missing:
        raise NotApplicable(f"not tested, because the server has no {missing.group(1)} backend")
    message = f"Triton did not load {entry.name}: {reason or 'not READY and this server does not allow loading'}"
    logged = server_log_errors(log_tail(400), entry.name) if log_tail else []
    if logged:  # "failed to poll from model repository" says nothing; the log says why
        message += "\nTriton's log:\n" + "\n".join(f"  {line}" for line in logged)
    raise LoadFailed(message)


def server_log_errors(log: str, model: str) -> list[str]:
    """Error lines (Triton's `E` level) of the server log that name the model."""
    return [line.strip() for line in log.splitlines() if line.startswith("E") and f"'{model}'" in line]


class LoadFailed(RuntimeError):
    """Triton refused the model; the message is Triton's own reason."""


def _index_reason(http_client, name: str) -> str:
    for row in http_client.get_model_repository_index():
        if row.get("name") == name and row.get("reason"):
            return row["reason"]
    return ""


def check_live(entry: ModelEntry, http_client, grpc_client) -> LiveResult:
    result = LiveResult()
    file = f"{entry.name}/config.pbtxt"

    def add(message: str) -> None:
        result.findings.append(Finding(CHECK, entry.name, file, message))

    config = entry.config
    _ready_in_index(entry, http_client, add)
    served_http = from_json(http_client.get_model_config(entry.name))
    served_grpc = grpc_client.get_model_config(entry.name).config
    for protocol, served in (("HTTP", served_http), ("gRPC", served_grpc)):
        differences, additions = compare_configs(config, served)
        for path, (want, got) in differences.items():
            add(f"{protocol} model config: {path} is {got!r} on the server, {want!r} in config.pbtxt")
        if protocol == "HTTP":
            result.additions = additions
    for protocol, metadata in (("HTTP", http_client.get_model_metadata(entry.name)),
                               ("gRPC", grpc_client.get_model_metadata(entry.name, as_json=True))):
        _metadata(entry, protocol, metadata, add)
    fed_by = internal_step_of(entry)
    if fed_by:
        result.notes.append(f"no standalone request: every input comes from another step of ensemble {fed_by!r}, "
                            "whose live test sends it real ones")
        return result
    for protocol, client in (("HTTP", http_client), ("gRPC", grpc_client)):
        _infer(entry, protocol, client, add)
    return result


def internal_step_of(entry: ModelEntry) -> str | None:
    """The ensemble that feeds every input of this model from other steps' outputs, if any: such a
    model (a postprocess reading raw output and letterbox metadata) gets meaningful inputs only there,
    and a request of zeros would test the content of made-up data, not the declared shapes."""
    for name in list_models(entry.repository):
        other = load_entry(entry.repository, name)
        if not other.is_ensemble or other.config is None:
            continue
        ensemble_inputs = {t.name for t in other.config.input}
        for step in other.config.ensemble_scheduling.step:
            if step.model_name == entry.name and step.input_map and not set(step.input_map.values()) & ensemble_inputs:
                return name
    return None


def _ready_in_index(entry: ModelEntry, http_client, add) -> None:
    rows = [r for r in http_client.get_model_repository_index() if r.get("name") == entry.name]
    ready = sorted(int(r["version"]) for r in rows if r.get("state") == "READY" and r.get("version"))
    expected = entry.served_versions()
    if ready != expected:
        add(f"repository index: READY versions {ready}, expected {expected} from the version directories and "
            f"version_policy ({[(r.get('version'), r.get('state'), r.get('reason', '')) for r in rows]})")


def compare_configs(file_config: ModelConfig, served: ModelConfig) -> tuple[dict, dict]:
    """Every field set in the file must hold the same value on the server (differences); fields the
    server has and the file does not are Triton's auto-complete (additions)."""
    want = json_format.MessageToDict(file_config, preserving_proto_field_name=True)
    got = json_format.MessageToDict(served, preserving_proto_field_name=True)
    differences: dict[str, tuple] = {}
    additions: dict[str, object] = {}
    _walk("", want, got, differences, additions)
    return differences, additions


def _walk(path: str, want, got, differences: dict, additions: dict) -> None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in want:
            _walk(f"{path}.{key}" if path else key, want[key], got.get(key), differences, additions)
        for key in got.keys() - want.keys():
            additions[f"{path}.{key}" if path else key] = got[key]
    elif isinstance(want, list) and isinstance(got, list) and want and isinstance(want[0], dict):
        for index, item in enumerate(want):
            _walk(f"{path}[{index}]", item, got[index] if index < len(got) else None, differences, additions)
        for index in range(len(want), len(got)):
            additions[f"{path}[{index}]"] = got[index]
    elif want != got:
        differences[path] = (want, got)


def _metadata(entry: ModelEntry, protocol: str, metadata: dict, add) -> None:
    config = entry.config
    versions = sorted(int(v) for v in metadata.get("versions", []))
    if versions != entry.served_versions():
        add(f"{protocol} model metadata: versions {versions}, expected {entry.served_versions()}")
    for role, key, tensors in (("input", "inputs", config.input), ("output", "outputs", config.output)):
        served = {t["name"]: t for t in metadata.get(key, [])}
        for tensor in tensors:
            meta = served.get(tensor.name)
            if meta is None:
                add(f"{protocol} model metadata: {role} {tensor.name!r} missing (served: {sorted(served)})")
                continue
            shape = ([-1] if config.max_batch_size > 0 else []) + list(tensor.dims)
            if meta.get("datatype") != _wire_dtype(tensor.data_type):
                add(f"{protocol} model metadata: {role} {tensor.name!r} datatype {meta.get('datatype')}, "
                    f"expected {_wire_dtype(tensor.data_type)}")
            if [int(d) for d in meta.get("shape", [])] != shape:
                add(f"{protocol} model metadata: {role} {tensor.name!r} shape {meta.get('shape')}, expected {shape}")


def _wire_dtype(data_type: int) -> str:
    name = dtype_name(data_type)
    return "BYTES" if name == "STRING" else name


def request_shape(config: ModelConfig, tensor) -> list[int]:
    """Batch 1 (when batching), the declared dims, variable image sides IMAGE_SIDE, other variable dims 1."""
    dims = list(tensor.dims)
    image_like = len(dims) == 3 and (dims[0] in (1, 3) or dims[-1] in (1, 3))
    filled = [d if d != -1 else (IMAGE_SIDE if image_like else 1) for d in dims]
    return ([1] if config.max_batch_size > 0 else []) + filled


def png_bytes(side: int = IMAGE_SIDE) -> bytes:
    """A small encoded image, for TYPE_STRING image inputs."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (114, 114, 114)).save(buffer, format="PNG")
    return buffer.getvalue()


def request_arrays(config: ModelConfig) -> dict[str, tuple[np.ndarray, str]]:
    arrays = {}
    for tensor in config.input:
        if tensor.optional:
            continue
        shape = request_shape(config, tensor)
        wire = _wire_dtype(tensor.data_type)
        if wire == "BYTES":
            array = np.full(shape, png_bytes(), dtype=np.object_)
        else:
            from tritonclient.utils import triton_to_np_dtype

            array = np.zeros(shape, dtype=triton_to_np_dtype(wire))
        arrays[tensor.name] = (array, wire)
    return arrays


def _infer(entry: ModelEntry, protocol: str, client, add) -> None:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    module = httpclient if protocol == "HTTP" else grpcclient
    config = entry.config
    inputs = []
    for name, (array, wire) in request_arrays(config).items():
        tensor = module.InferInput(name, list(array.shape), wire)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    outputs = [module.InferRequestedOutput(t.name) for t in config.output]
    described = {name: list(a.shape) for name, (a, _) in request_arrays(config).items()}
    try:
        response = client.infer(entry.name, inputs, outputs=outputs)
    except InferenceServerException as error:
        add(f"{protocol} inference with the declared shapes {described} failed: {error}")
        return
    for tensor in config.output:
        array = response.as_numpy(tensor.name)
        if array is None:
            add(f"{protocol} inference: output {tensor.name!r} missing from the response")
            continue
        expected = ([1] if config.max_batch_size > 0 else []) + list(tensor.dims)
        if len(array.shape) != len(expected) or any(e not in (-1, a) for e, a in zip(expected, array.shape)):
            add(f"{protocol} inference: output {tensor.name!r} has shape {list(array.shape)}, declared {expected}")
