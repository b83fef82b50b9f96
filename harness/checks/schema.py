"""Schema: the completed config (harness.checks.autocomplete) against the rules Triton applies when it
loads a model — stated before any server runs, in plain words, with Triton's own wording of the
refusal so a vendor can match it to the server log — plus a few Triton does not apply
(dynamic_batching with max_batch_size 0, an absurd queue delay: Triton loads both).

The rules follow Triton's core (model_config_utils.cc: ValidateModelConfig, ValidateModelIOConfig,
ValidateBatchIO, ValidateInstanceGroup); ensembles are harness.checks.ensemble's."""

from __future__ import annotations

import math
import os

from harness.checks.findings import Finding, triton_says
from harness.checks.model import ModelEntry
from harness.repository.config import CONFIG_NAME, DataType, ModelConfig

CHECK = "schema"
# A queue delay this long is a unit mistake (ms written as µs, or seconds): detection needs ~ms.
MAX_SANE_QUEUE_DELAY_US = 1_000_000
KIND = {0: "KIND_AUTO", 1: "KIND_GPU", 2: "KIND_CPU", 3: "KIND_MODEL"}
GPU_ONLY_BACKENDS = ("tensorrt",)
# Triton's BackendType of a platform and of a backend name (GetBackendTypeFromPlatform, GetBackendType).
PLATFORM_TYPE = {"tensorflow_graphdef": "tensorflow", "tensorflow_savedmodel": "tensorflow",
                 "tensorrt_plan": "tensorrt", "onnxruntime_onnx": "onnxruntime", "pytorch_libtorch": "pytorch",
                 "torch_aoti": "torch_aoti"}
BACKEND_TYPE = {"tensorflow": "tensorflow", "tensorrt": "tensorrt", "onnxruntime": "onnxruntime", "pytorch": "pytorch"}
# Backends whose implementation refuses batch_input / batch_output (only TensorRT and custom ones take them).
NO_BATCH_IO_BACKENDS = ("onnxruntime", "pytorch", "tensorflow", "openvino", "python")
# The backends an NGC tritonserver image ships; a name outside it must come with its own library.
STOCK_BACKENDS = ("tensorrt", "onnxruntime", "pytorch", "tensorflow", "python", "openvino", "dali", "fil",
                  "identity", "repeat", "square")
WILDCARD = -1


def check_schema(entry: ModelEntry, *, gpus: frozenset[int] | None = None) -> list[Finding]:
    """`gpus`: the GPU ids of the host that will serve the model (default: this host's, when it has
    an NVIDIA driver; None leaves gpu ids unjudged except negative ones)."""
    if entry.completion is None:
        return [Finding(CHECK, entry.name, f"{entry.name}/{CONFIG_NAME}", entry.config_error)]
    findings: list[Finding] = []
    file = f"{entry.name}/{CONFIG_NAME}"

    def add(message: str) -> None:
        findings.append(Finding(CHECK, entry.name, file, message))

    for error in entry.completion.errors:
        add(f"Triton cannot complete this config: {triton_says(error)}")
    if entry.completion.errors:
        return findings
    config = entry.config
    _platform(config, add)
    _runtime(config, add)
    _batching(config, add)
    _tensors(config, add)
    _batch_io(entry, add)
    if entry.is_ensemble or config.HasField("ensemble_scheduling"):
        from harness.checks.ensemble import check_ensemble

        check_ensemble(entry, add)
    else:
        from harness.hostinfo import gpu_ids

        _instances(entry, add, gpu_ids() if gpus is None else gpus)
    _version_policy(entry, add)
    return findings


def _platform(config: ModelConfig, add) -> None:
    name = config.name
    if not config.backend and config.platform != "ensemble":
        add(f"platform {config.platform!r} is not a platform Triton knows and no backend is set (expected e.g. "
            f"platform: \"onnxruntime_onnx\" or backend: \"python\"); "
            + triton_says(f"unexpected platform type '{config.platform}' for {name}"))
    elif config.backend and config.platform == "ensemble":
        add(f"an ensemble has no backend, but backend is {config.backend!r}; "
            + triton_says(f"Ensemble model '{name}' must have platform type 'ensemble' and empty backend type"))
    backend_type = BACKEND_TYPE.get(config.backend)
    if backend_type is not None and backend_type != PLATFORM_TYPE.get(config.platform):
        add(f"platform {config.platform!r} does not run on backend {config.backend!r}; "
            + triton_says(f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}"))
    if config.HasField("ensemble_scheduling") and config.platform != "ensemble":
        add("ensemble_scheduling is set on a model that is not an ensemble; "
            + triton_says(f"ensemble scheduling cannot be set for model '{name}' whose platform is not ensemble"))
    if config.platform == "ensemble" and not config.HasField("ensemble_scheduling"):
        add("platform ensemble without ensemble_scheduling steps; "
            + triton_says(f"ensemble scheduling must be set for ensemble {name} whose platform is ensemble"))


def _runtime(config: ModelConfig, add) -> None:
    """`runtime` names the backend's shared library (or model.py for a Python-based backend) inside
    the backend's directory; the core refuses one that leaves it or that is not there."""
    runtime, backend = config.runtime, config.backend
    if runtime:
        normalized = os.path.normpath(os.path.join("backend_dir", runtime))
        if os.path.isabs(runtime) or not normalized.startswith("backend_dir" + os.sep):
            add(f"runtime {runtime!r} points outside the backend's directory; "
                + triton_says(f"backend library name '{runtime}' escapes backend directory"))
        elif runtime not in ("model.py", f"libtriton_{backend}.so"):
            add(f"runtime {runtime!r} is neither libtriton_{backend}.so nor model.py; "
                + triton_says(f"unable to find backend library '{runtime}' for model '{config.name}'"))
    elif backend and backend not in STOCK_BACKENDS and config.platform != "ensemble":
        add(f"backend {backend!r} is not one a Triton image ships ({', '.join(STOCK_BACKENDS)}): install it on the "
            "server or set runtime; "
            + triton_says(f"Invalid argument: unable to find backend library for backend '{backend}', try "
                          "specifying runtime on the model configuration."))


def _batching(config: ModelConfig, add) -> None:
    mbs, name = config.max_batch_size, config.name
    if mbs < 0:
        add(f"max_batch_size {mbs} is negative; expected 0 (no batching) or a positive batch limit; "
            + triton_says(f"'max_batch_size' must be non-negative value for {name}"))
    if not config.HasField("dynamic_batching"):
        return
    batching = config.dynamic_batching
    if mbs == 0:
        add("dynamic_batching is set but max_batch_size is 0: nothing can be batched "
            "(Triton 2.51 loads it anyway); set max_batch_size or drop dynamic_batching")
    for size in batching.preferred_batch_size:
        if size < 1:
            add(f"preferred_batch_size {size} is not a batch size; expected 1..{mbs}; "
                + triton_says(f"dynamic batching preferred size must be positive for {name}"))
        elif size > mbs:
            add(f"preferred_batch_size {size} is above max_batch_size {mbs}: the scheduler can never form that "
                f"batch; expected every preferred size <= {mbs}; "
                + triton_says(f"dynamic batching preferred size must be <= max batch size for {name}"))
    delay = batching.max_queue_delay_microseconds
    if delay > MAX_SANE_QUEUE_DELAY_US:
        add(f"max_queue_delay_microseconds {delay} holds each request up to {delay / 1e6:g} s: expected at most "
            f"{MAX_SANE_QUEUE_DELAY_US} (a unit mistake? the value is in microseconds)")
    levels = batching.priority_levels
    if levels:
        if not 1 <= batching.default_priority_level <= levels:
            add(f"default_priority_level {batching.default_priority_level} is not one of the {levels} priority "
                f"levels; " + triton_says(f"default priority level must be in range [1, {levels}] for {name}"))
        for level in batching.priority_queue_policy:
            if not 1 <= level <= levels:
                add(f"priority_queue_policy for level {level}, outside the {levels} priority levels; "
                    + triton_says(f"priority queue policy must have priority level in range [1, {levels}] for {name}"))
    if batching.preserve_ordering:
        if levels > 1:
            add(f"preserve_ordering with {levels} priority levels; "
                + triton_says(f"Only one priority level is allowed when 'preserve_ordering' is true for {name}"))
        policies = [batching.default_queue_policy, *batching.priority_queue_policy.values()]
        if any(p.default_timeout_microseconds and p.timeout_action == p.DELAY for p in policies):
            add("preserve_ordering with a queue policy that DELAYs timed-out requests (it would reorder them); "
                + triton_says("Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true "
                              f"for {name}"))


def _tensors(config: ModelConfig, add) -> None:
    seen: dict[str, set] = {"input": set(), "output": set()}
    for role, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            if tensor.name in seen[role]:
                add(f"{role} {tensor.name!r} declared twice")
            seen[role].add(tensor.name)
            problem = io_problem(role, tensor, config.max_batch_size, config.platform)
            if problem:
                plain, text = problem
                add(f"{role} {tensor.name!r}: {plain}; " + triton_says(f"{text} for {config.name}"))


def io_problem(role: str, tensor, max_batch_size: int, platform: str) -> tuple[str, str] | None:
    """(plain words, Triton's words) of the first rule of ValidateIOShape / ValidateModelInput /
    ValidateModelOutput the tensor breaks, or None."""
    prefix = f"model {role} "
    if not tensor.name:
        return "no name", prefix + "must specify 'name'"
    named = f"{prefix}'{tensor.name}' "
    dims, shape = list(tensor.dims), list(tensor.reshape.shape)
    if tensor.data_type == DataType.Value("TYPE_INVALID"):
        return "data_type missing; expected e.g. TYPE_FP32", named + "must specify 'data_type'"
    if not dims:
        return "no dims", named + "must specify 'dims'"
    if tensor.HasField("reshape") and not shape and max_batch_size == 0:
        return ("an empty reshape on a model without batching would make it a scalar",
                named + "cannot have empty reshape for non-batching model as scalar tensors are not supported")
    if any(d < 1 and d != WILDCARD for d in dims):
        return (f"dims {dims}: each dim must be >= 1, or -1 for a variable size",
                named + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension")
    if tensor.HasField("reshape"):
        if any(d < 1 and d != WILDCARD for d in shape):
            return (f"reshape {shape}: each dim must be >= 1, or -1 for a variable size",
                    named + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension")
        problem = _reshape_problem(dims, shape)
        if problem:
            return problem, named + problem.split(": ")[0]
    if role == "input" and tensor.format in (1, 2) and len(dims) != 3:
        return f"format {('', 'FORMAT_NHWC', 'FORMAT_NCHW')[tensor.format]} with {len(dims)} dims", \
            "model input NHWC/NCHW require 3 dims"
    if tensor.is_shape_tensor and platform != "tensorrt_plan":
        return "is_shape_tensor on a model that is not TensorRT", "shape tensors are only supported for TensorRT platform"
    if tensor.is_non_linear_format_io:
        if platform != "tensorrt_plan":
            return ("is_non_linear_format_io on a model that is not TensorRT",
                    "Non-linear IO format is only supported for the TensorRT platform")
        if len(dims) != 3:
            return f"a non-linear IO format with {len(dims)} dims", f"Non-linear IO format {role} requires 3 dims"
    return None


def _reshape_problem(dims: list[int], shape: list[int]) -> str | None:
    """Triton's rule: the same element count (an empty reshape counts 0 and needs dims of one
    element), or — with variable dims — the same number of variable dims and the same element count
    between them ([2, 4, -1, 6] -> [8, -1, 1, 6] is fine)."""
    dims_size = WILDCARD if WILDCARD in dims else math.prod(dims)
    shape_size = WILDCARD if WILDCARD in shape else (math.prod(shape) if shape else 0)
    if dims_size != shape_size and (shape_size != 0 or dims_size != 1):
        return f"has different size for dims and reshape: dims {dims}, reshape {shape}"
    if dims_size != WILDCARD:
        return None

    def runs(values):
        counts, current = [], 1
        for value in values:
            if value == WILDCARD:
                counts.append(current)
                current = 1
            else:
                current *= value
        return counts + [current]

    dim_runs, shape_runs = runs(dims), runs(shape)
    if len(dim_runs) != len(shape_runs):
        return f"has different number of variable-size dimensions for dims and reshape: dims {dims}, reshape {shape}"
    if dim_runs != shape_runs:
        return (f"has different size for dims and reshape: the fixed parts between variable dims hold {dim_runs} "
                f"elements in dims {dims}, {shape_runs} in reshape {shape}")
    return None


def _batch_io(entry: ModelEntry, add) -> None:
    """batch_input / batch_output (ValidateBatchIO), and the backends that take none."""
    config = entry.config
    if not config.batch_input and not config.batch_output:
        return
    name = config.name
    if config.backend in NO_BATCH_IO_BACKENDS:
        add(f"batch_input/batch_output on a {config.backend} model; "
            + triton_says("batch inputs and batch outputs are only supported for custom platform and TensorRT "
                          "platform"))
    inputs, outputs = {t.name for t in config.input}, {t.name for t in config.output}
    for kind_name, items in (("input", config.batch_input), ("output", config.batch_output)):
        for item in items:
            kind = item.Kind.Name(item.kind)
            if len(item.source_input) != 1:
                add(f"batch_{kind_name} {kind} needs exactly one source_input, has {list(item.source_input)}; "
                    + triton_says(f"batch {kind_name} kind '{kind}' expects 1 source input, got "
                                  f"{len(item.source_input)} for {name}"))
            if kind_name == "input" and item.data_type not in (DataType.Value("TYPE_INT32"), DataType.Value("TYPE_FP32")):
                add(triton_says(f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {name}"))
            for source in item.source_input:
                if source not in inputs:
                    add(f"batch_{kind_name} source_input {source!r} is not an input (inputs: {sorted(inputs)}); "
                        + triton_says(f"unknown source input name '{source}' for {name}"))
            if kind_name == "output":
                seen = set()
                for target in item.target_name:
                    if target not in outputs:
                        add(f"batch_output target {target!r} is not an output (outputs: {sorted(outputs)}); "
                            + triton_says(f"unknown target output name '{target}' for {name}"))
                    elif target in seen:
                        add(f"batch_output target {target!r} listed twice; "
                            + triton_says(f"target output name '{target}' can only be specified once for {name}"))
                    seen.add(target)


def _instances(entry: ModelEntry, add, gpus: frozenset[int] | None) -> None:
    """ValidateInstanceGroup on the groups as Triton names them (`<model>_<index>` when unnamed)."""
    config = entry.config
    for index, group in enumerate(config.instance_group):
        name = group.name or f"{config.name}_{index}"
        where = f"instance_group {name}"
        kind = KIND.get(group.kind, str(group.kind))
        prefix = f"instance group {name} of model {config.name}"
        if group.count < 0:
            add(f"{where}: count {group.count}; expected >= 1")
        if group.gpus and group.kind == 2:
            add(f"{where}: kind KIND_CPU with gpus {list(group.gpus)}: use KIND_GPU or drop gpus; "
                + triton_says(f"{prefix} has kind KIND_CPU but specifies one or more GPUs"))
        if group.gpus and group.kind == 3:
            add(f"{where}: kind KIND_MODEL with gpus {list(group.gpus)}; "
                + triton_says(f"{prefix} has kind KIND_MODEL but specifies one or more GPUs"))
        if group.kind in (0, 1):
            for gpu in group.gpus:
                if gpu < 0 or (gpus is not None and gpu not in gpus):
                    host = "no GPU" if gpus is not None and not gpus else f"GPUs {sorted(gpus)}" if gpus is not None else ""
                    add(f"{where}: gpu id {gpu} does not exist{' (this host has ' + host + ')' if host else ''}; "
                        + triton_says(f"{prefix} specifies invalid or unsupported gpu id {gpu}. GPUs with at least "
                                      "the minimum required CUDA compute compatibility"))
        if entry.backend in GPU_ONLY_BACKENDS and group.kind == 2:
            add(f"{where}: kind {kind} for a {entry.platform or entry.backend} model; TensorRT runs only on GPUs "
                "(expected KIND_GPU)")
        if group.profile and config.platform != "tensorrt_plan":
            add(f"{where}: profile {list(group.profile)} on a model that is not TensorRT; "
                + triton_says(f"{prefix} and platform {config.platform}specifies profile field which is only "
                              "supported for TensorRT models"))


def _version_policy(entry: ModelEntry, add) -> None:
    policy = entry.config.version_policy
    present = [int(p.name) for p in entry.version_dirs]
    if policy.HasField("specific"):
        missing = [v for v in policy.specific.versions if v not in present]
        if missing:
            add(f"version_policy specific {list(policy.specific.versions)} names versions with no directory: "
                f"{missing} (present: {present})")
    if policy.HasField("latest") and policy.latest.num_versions == 0:
        add("version_policy latest { num_versions: 0 } serves no version; expected num_versions >= 1")

