"""Auto-complete: the config Triton will load, from the config.pbtxt a vendor wrote (or none at all).

Triton completes a model's config before it validates it: the core fills `name`, `platform`,
`backend` and `default_model_filename` from the model file it finds in the first version directory
(or from a directory named `model.<backend>`), and, unless the server runs with
`--disable-auto-complete-config`, the backend fills what its model file says: the ONNX Runtime
backend takes inputs, outputs and max_batch_size from the graph, the Python backend runs the model's
`auto_complete_config`. A minimal config relying on this is a correct config; judging the declared
file alone would fail it. So the checks judge the completed config, and what Triton will fill in is
reported as information (`Completion.filled`), not as a failure.

What cannot be completed offline (a TensorRT plan without TensorRT, a model.py's
`auto_complete_config` that does not run here) is left as declared and said in `Completion.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.repository.config import DataType, ModelConfig

# Files the core recognises in a version directory, in the order it tries them
# (model_config_utils.cc AutoCompleteBackendFields).
TENSORFLOW_FILES = {"model.savedmodel": "tensorflow_savedmodel", "model.graphdef": "tensorflow_graphdef"}
# The ONNX Runtime backend's default when a batching-capable graph comes with max_batch_size 0
# (its `default-max-batch-size` backend setting).
ORT_DEFAULT_MAX_BATCH_SIZE = 4


class CompletionError(ValueError):
    """Triton cannot complete the config; the message is Triton's own wording."""


@dataclass
class Completion:
    config: ModelConfig
    filled: dict[str, object] = field(default_factory=dict)  # field -> value Triton will fill in
    notes: list[str] = field(default_factory=list)  # what could not be completed offline, and why
    errors: list[str] = field(default_factory=list)  # Triton's refusal while completing (its wording)


def complete(declared: ModelConfig | None, model_dir: Path, *, autocomplete: bool = True) -> Completion:
    """The config Triton would validate for the model in `model_dir`. `declared` is config.pbtxt as
    parsed (None when there is none); `autocomplete` False is a server started with
    `--disable-auto-complete-config` (the core's backend-field completion still runs)."""
    config = ModelConfig()
    if declared is not None:
        config.CopyFrom(declared)
    completion = Completion(config)
    try:
        _backend_fields(config, Path(model_dir), completion.filled)
    except CompletionError as error:
        completion.errors.append(str(error))
        return completion
    if not autocomplete or config.platform == "ensemble":
        return completion
    version = _first_version(Path(model_dir))
    if config.backend == "onnxruntime":
        _onnxruntime(config, version, completion)
    elif config.backend == "python":
        from harness.checks.python_autocomplete import complete_python

        complete_python(config, version, completion)
    elif config.backend == "tensorrt":
        _tensorrt(config, version, completion)
    return completion


def _first_version(model_dir: Path) -> Path | None:
    """Triton inspects the first subdirectory by name (any name, not only numeric ones)."""
    subdirs = sorted(p.name for p in model_dir.iterdir() if p.is_dir()) if model_dir.is_dir() else []
    return model_dir / subdirs[0] if subdirs else None


def _backend_fields(config: ModelConfig, model_dir: Path, filled: dict) -> None:
    """Name, platform, backend and default_model_filename, as the core completes them."""
    def fill(name: str, value: str) -> None:
        setattr(config, name, value)
        filled[name] = value

    if not config.name:
        fill("name", model_dir.name)
    version = _first_version(model_dir)
    content = {p.name: p for p in version.iterdir()} if version is not None else {}

    def has_file(name: str) -> bool:
        return name in content and not content[name].is_dir()

    if not config.platform and config.backend in ("", "tensorflow"):
        if config.default_model_filename in TENSORFLOW_FILES:
            fill("platform", TENSORFLOW_FILES[config.default_model_filename])
        elif not config.default_model_filename:
            if "model.savedmodel" in content and content["model.savedmodel"].is_dir():
                fill("platform", "tensorflow_savedmodel")
            if has_file("model.graphdef"):
                fill("platform", "tensorflow_graphdef")
    if config.platform in TENSORFLOW_FILES.values():
        _defaults(config, fill, "tensorflow", None, {v: k for k, v in TENSORFLOW_FILES.items()}[config.platform])
        return
    bare = not config.platform and not config.default_model_filename and version is not None
    for backend, platform, filename, found in (
            ("tensorrt", "tensorrt_plan", "model.plan", bare and has_file("model.plan")),
            ("onnxruntime", "onnxruntime_onnx", "model.onnx", bare and "model.onnx" in content)):
        if not config.backend and (config.platform == platform or config.default_model_filename == filename or found):
            fill("backend", backend)
        if config.backend == backend:
            _defaults(config, fill, backend, platform, filename)
            return
    if not config.backend and config.default_model_filename == "model.xml" or (bare and not config.backend
                                                                              and "model.xml" in content):
        fill("backend", "openvino")
    if config.backend == "openvino":
        _defaults(config, fill, "openvino", None, "model.xml")
        return
    if not config.backend:
        if config.platform in ("pytorch_libtorch", "libtorch", "torch_aoti") or \
                config.default_model_filename in ("model.pt", "model.pt2"):
            fill("backend", "pytorch")
        elif bare and has_file("model.pt"):
            fill("backend", "pytorch")
            fill("platform", "pytorch_libtorch")
        elif bare and has_file("model.pt2"):
            fill("backend", "pytorch")
            fill("platform", "torch_aoti")
    if config.backend == "pytorch":
        if not config.platform:
            fill("platform", "pytorch_libtorch")
            if not config.default_model_filename:
                fill("default_model_filename", "model.pt")
        elif config.platform == "torch_aoti" and not config.default_model_filename:
            fill("default_model_filename", "model.pt2")
        return
    if not config.backend and (config.default_model_filename == "model.py" or (bare and "model.py" in content)):
        fill("backend", "python")
    if config.backend == "python":
        _defaults(config, fill, "python", None, "model.py")
        return
    if not config.backend and not config.platform and not config.default_model_filename:
        # A custom backend: the directory is named model.<backend>.
        name = model_dir.name
        if "." not in name:
            raise CompletionError(
                f"Invalid model name: Could not determine backend for model '{name}' with no backend in model "
                "configuration. Expected model name of the form 'model.<backend_name>'.")
        backend = name.split(".", 1)[1]
        fill("backend", backend)
        fill("default_model_filename", f"model.{backend}")


def _defaults(config: ModelConfig, fill, backend: str, platform: str | None, filename: str) -> None:
    if not config.backend:
        fill("backend", backend)
    if platform and not config.platform:
        fill("platform", platform)
    if not config.default_model_filename:
        fill("default_model_filename", filename)


def _onnxruntime(config: ModelConfig, version: Path | None, completion: Completion) -> None:
    """The ONNX Runtime backend's completion: only when inputs or outputs are missing; then
    max_batch_size from whether every tensor's first dim is variable, and the missing tensors from the
    graph (batch dim dropped when batching)."""
    if (len(config.input) + len(config.batch_input)) > 0 and len(config.output) > 0:
        return
    path = version / config.default_model_filename if version is not None else None
    if path is None or not path.exists():
        completion.notes.append("inputs/outputs not declared and no ONNX file to complete them from")
        return
    from harness.engines.onnx_signature import onnx_signature

    try:
        signature = onnx_signature(path)
    except ValueError as error:
        completion.notes.append(f"inputs/outputs not declared; {path.name} cannot be read: {error}")
        return
    complete_from_signature(config, signature, completion)


def complete_from_signature(config: ModelConfig, signature, completion: Completion) -> None:
    """What a backend fills in from its model file's signature (the ONNX Runtime backend's rules; the
    TensorRT backend's are the same for batching and missing tensors): max_batch_size from whether every
    tensor's first dim is variable — the backend's default when the config says 0, a refusal when the
    config asks for batching the model cannot do — and the missing tensors, batch dim dropped."""
    tensors = signature.inputs + signature.outputs
    batching = bool(tensors) and all(t.shape and t.shape[0] == -1 for t in tensors)
    if batching and config.max_batch_size == 0:
        config.max_batch_size = ORT_DEFAULT_MAX_BATCH_SIZE
        completion.filled["max_batch_size"] = ORT_DEFAULT_MAX_BATCH_SIZE
        if not config.HasField("sequence_batching") and not config.HasField("dynamic_batching"):
            config.dynamic_batching.SetInParent()
            completion.filled["dynamic_batching"] = {}
    elif not batching and config.max_batch_size != 0:
        completion.errors.append(f"autofill failed for model '{config.name}': model does not support batching "
                                 "while non-zero max_batch_size is specified")
        return
    for role, specs, tensors_of in (("input", signature.inputs, config.input),
                                    ("output", signature.outputs, config.output)):
        if role == "input" and len(config.input) + len(config.batch_input) > 0 or role == "output" and config.output:
            continue
        for spec in specs:
            tensor = tensors_of.add(name=spec.name, data_type=DataType.Value(f"TYPE_{_config_dtype(spec.dtype)}"))
            dims = list(spec.shape[1:] if config.max_batch_size > 0 else spec.shape)
            tensor.dims.extend(dims or [1])
            if not dims and config.max_batch_size > 0:
                tensor.reshape.SetInParent()
        completion.filled[role] = [spec.name for spec in specs]


def _config_dtype(dtype: str) -> str:
    return "STRING" if dtype == "BYTES" else dtype


def _tensorrt(config: ModelConfig, version: Path | None, completion: Completion) -> None:
    """The TensorRT backend completes a config from the plan, which only TensorRT can read: where it is
    installed, from the plan's signature (harness.engines.tensorrt_runtime); elsewhere it is said."""
    if config.input and config.output:
        return
    path = version / config.default_model_filename if version is not None else None
    if path is None or not path.is_file():
        completion.notes.append("inputs/outputs not declared and no plan to complete them from")
        return
    from harness.engines import read_signature
    from harness.engines.base import EngineUnavailable

    try:
        signature = read_signature(path)
    except EngineUnavailable as error:
        completion.notes.append(f"inputs/outputs not declared: the TensorRT backend completes them from the plan, "
                                f"which is not read here ({error})")
        return
    except Exception as error:  # a plan this TensorRT cannot deserialize: the bindings check says why
        completion.notes.append(f"inputs/outputs not declared; {path.name} cannot be read: {error}")
        return
    complete_from_signature(config, signature, completion)
