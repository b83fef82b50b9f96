"""Schema: config.pbtxt as a ModelConfig, and the rules Triton applies at load — stated before any
server runs and in plain words — plus a few it does not apply (dynamic_batching with max_batch_size 0,
an absurd queue delay: Triton 2.51 loads both)."""

from __future__ import annotations

import math

from harness.checks.findings import Finding, NotApplicable
from harness.checks.model import PLATFORM_BACKEND, ModelEntry, load_entry
from harness.repository.config import CONFIG_NAME, DataType, ModelConfig, dtype_name

CHECK = "schema"
# A queue delay this long is a unit mistake (ms written as µs, or seconds): detection needs ~ms.
MAX_SANE_QUEUE_DELAY_US = 1_000_000
KIND = {0: "KIND_AUTO", 1: "KIND_GPU", 2: "KIND_CPU", 3: "KIND_MODEL"}
GPU_ONLY_BACKENDS = ("tensorrt",)


def check_schema(entry: ModelEntry) -> list[Finding]:
    if entry.config is None:
        if not entry.config_path.is_file():
            raise NotApplicable(f"no {CONFIG_NAME} (the layout check reports it)")
        return [Finding(CHECK, entry.name, f"{entry.name}/{CONFIG_NAME}", entry.config_error)]
    findings: list[Finding] = []
    file = f"{entry.name}/{CONFIG_NAME}"

    def add(message: str) -> None:
        findings.append(Finding(CHECK, entry.name, file, message))

    config = entry.config
    _platform(entry, add)
    _tensors(config, add)
    _batching(config, add)
    _instances(entry, add)
    _version_policy(entry, add)
    if entry.is_ensemble:
        _ensemble(entry, add)
    return findings


def _platform(entry: ModelEntry, add) -> None:
    config = entry.config
    if config.platform and config.platform not in PLATFORM_BACKEND:
        add(f"platform {config.platform!r} is not a Triton platform (expected one of {sorted(PLATFORM_BACKEND)}, "
            "or set backend instead)")
    implied = PLATFORM_BACKEND.get(config.platform)
    if config.backend and implied is not None and implied and config.backend != implied:
        add(f"platform {config.platform!r} runs on backend {implied!r}, but backend is {config.backend!r}")
    if not config.platform and not config.backend:
        add("neither platform nor backend is set: expected e.g. platform: \"onnxruntime_onnx\" or backend: \"python\"")


def _tensors(config: ModelConfig, add) -> None:
    for role, tensors in (("input", config.input), ("output", config.output)):
        seen = set()
        if not tensors and config.platform != "ensemble":
            add(f"no {role} declared")
        for tensor in tensors:
            where = f"{role} {tensor.name!r}"
            if tensor.name in seen:
                add(f"{where} declared twice")
            seen.add(tensor.name)
            if tensor.data_type not in DataType.values():
                add(f"{where}: data_type {tensor.data_type} is not a DataType enum value")
            elif tensor.data_type == DataType.Value("TYPE_INVALID"):
                add(f"{where}: data_type missing (TYPE_INVALID); expected e.g. TYPE_FP32")
            if not tensor.dims and not tensor.HasField("reshape"):
                add(f"{where}: no dims (Triton: \"must specify 'dims'\")")
            bad = [d for d in tensor.dims if d == 0 or d < -1]
            if bad:
                add(f"{where}: dims {list(tensor.dims)} contain {bad}; each dim must be >= 1, or -1 for a variable size")
            if tensor.HasField("reshape"):
                _reshape(where, list(tensor.dims), list(tensor.reshape.shape), add)


def _reshape(where: str, dims: list[int], shape: list[int], add) -> None:
    if -1 in dims or -1 in shape:
        if (-1 in dims) != (-1 in shape):
            add(f"{where}: reshape {shape} and dims {dims} disagree on which size is variable")
        return
    if math.prod(dims) != math.prod(shape):
        add(f"{where}: reshape {shape} holds {math.prod(shape)} elements, dims {dims} hold {math.prod(dims)}")


def _batching(config: ModelConfig, add) -> None:
    mbs = config.max_batch_size
    if mbs < 0:
        add(f"max_batch_size {mbs} is negative; expected 0 (no batching) or a positive batch limit")
    if not config.HasField("dynamic_batching"):
        return
    batching = config.dynamic_batching
    if mbs == 0:
        add("dynamic_batching is set but max_batch_size is 0: nothing can be batched "
            "(Triton 2.51 loads it anyway); set max_batch_size or drop dynamic_batching")
    for size in batching.preferred_batch_size:
        if size < 1:
            add(f"preferred_batch_size {size} is not a batch size; expected 1..{mbs}")
        elif mbs > 0 and size > mbs:
            add(f"preferred_batch_size {size} is above max_batch_size {mbs}: the scheduler can never form that "
                f"batch; expected every preferred size <= {mbs} (Triton 2.51 refuses the load with only "
                "\"dynamic batching preferred size must be <= max batch size\" in its log)")
    delay = batching.max_queue_delay_microseconds
    if delay > MAX_SANE_QUEUE_DELAY_US:
        add(f"max_queue_delay_microseconds {delay} holds each request up to {delay / 1e6:g} s: expected at most "
            f"{MAX_SANE_QUEUE_DELAY_US} (a unit mistake? the value is in microseconds)")


def _instances(entry: ModelEntry, add) -> None:
    for group in entry.config.instance_group:
        where = f"instance_group {group.name or '#'}".rstrip()
        kind = KIND.get(group.kind, str(group.kind))
        if group.count < 0:
            add(f"{where}: count {group.count}; expected >= 1")
        if group.gpus and group.kind == 2:
            add(f"{where}: kind KIND_CPU with gpus {list(group.gpus)}; Triton refuses it "
                "(\"has kind KIND_CPU but specifies one or more GPUs\"): use KIND_GPU or drop gpus")
        if entry.backend in GPU_ONLY_BACKENDS and group.kind == 2:
            add(f"{where}: kind {kind} for a {entry.platform or entry.backend} model; TensorRT runs only on GPUs "
                "(expected KIND_GPU)")
        if entry.is_ensemble:
            add(f"{where}: an ensemble has no instances of its own (its steps do); drop instance_group")


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


def _ensemble(entry: ModelEntry, add) -> None:
    """Every step input comes from an ensemble input or another step's output, every ensemble
    output is produced, step tensors exist in the step model with compatible dtype and shape, and
    the steps form no cycle."""
    config = entry.config
    if not config.HasField("ensemble_scheduling") or not config.ensemble_scheduling.step:
        add("platform ensemble without ensemble_scheduling steps")
        return
    steps = list(config.ensemble_scheduling.step)
    # tensor name -> (producer label, dtype, full shape); ensemble inputs first.
    produced: dict[str, tuple[str, int, tuple[int, ...] | None]] = {
        t.name: ("ensemble input", t.data_type, _full(config, t)) for t in config.input}
    producer_step: dict[str, int] = {}
    step_configs = [_step_config(entry, step, add) for step in steps]
    for index, (step, step_config) in enumerate(zip(steps, step_configs)):
        outputs = {t.name: t for t in step_config.output} if step_config else {}
        for model_tensor, ensemble_tensor in step.output_map.items():
            label = f"step {index} ({step.model_name})"
            if step_config is not None and model_tensor not in outputs:
                add(f"{label} output_map key {model_tensor!r} is not an output of {step.model_name} "
                    f"(its outputs: {sorted(outputs)})")
            if ensemble_tensor in produced:
                add(f"{label} produces {ensemble_tensor!r}, already produced by {produced[ensemble_tensor][0]}")
                continue
            tensor = outputs.get(model_tensor)
            produced[ensemble_tensor] = (label, tensor.data_type if tensor else 0,
                                         _full(step_config, tensor) if tensor else None)
            producer_step[ensemble_tensor] = index
    for index, (step, step_config) in enumerate(zip(steps, step_configs)):
        label = f"step {index} ({step.model_name})"
        inputs = {t.name: t for t in step_config.input} if step_config else {}
        for model_tensor, ensemble_tensor in step.input_map.items():
            if step_config is not None and model_tensor not in inputs:
                add(f"{label} input_map key {model_tensor!r} is not an input of {step.model_name} "
                    f"(its inputs: {sorted(inputs)})")
            if ensemble_tensor not in produced:
                add(f"{label} input {model_tensor!r} is wired to {ensemble_tensor!r}, which no ensemble input and "
                    f"no step output provides (available: {sorted(produced)}); Triton refuses the ensemble "
                    "with only \"failed to poll from model repository\"")
                continue
            if model_tensor in inputs:
                _compatible(f"{label} input {model_tensor!r} <- {ensemble_tensor!r}", produced[ensemble_tensor],
                            inputs[model_tensor].data_type, _full(step_config, inputs[model_tensor]), add)
        if step_config is not None and config.max_batch_size > step_config.max_batch_size:
            add(f"{label}: {step.model_name} has max_batch_size {step_config.max_batch_size}, below the "
                f"ensemble's {config.max_batch_size}")
    for tensor in config.output:
        if tensor.name not in produced:
            add(f"ensemble output {tensor.name!r} is produced by no step (step outputs: "
                f"{sorted(n for n in produced if n in producer_step)})")
        else:
            _compatible(f"ensemble output {tensor.name!r}", produced[tensor.name], tensor.data_type,
                        _full(config, tensor), add)
    _cycles(steps, producer_step, add)


def _step_config(entry: ModelEntry, step, add) -> ModelConfig | None:
    if not (entry.repository / step.model_name).is_dir():
        add(f"step model {step.model_name!r} is not in the repository")
        return None
    if step.model_name == entry.name:
        add("the ensemble lists itself as a step")
        return None
    return load_entry(entry.repository, step.model_name).config


def _full(config: ModelConfig | None, tensor) -> tuple[int, ...] | None:
    if config is None or tensor is None:
        return None
    return ((-1,) if config.max_batch_size > 0 else ()) + tuple(tensor.dims)


def _compatible(where: str, source, dtype: int, shape, add) -> None:
    label, source_dtype, source_shape = source
    if source_dtype and dtype and source_dtype != dtype:
        add(f"{where}: {label} gives {dtype_name(source_dtype)}, expected {dtype_name(dtype)}")
    if source_shape is None or shape is None:
        return
    if len(source_shape) != len(shape) or any(a != b and -1 not in (a, b) for a, b in zip(source_shape, shape)):
        add(f"{where}: {label} gives shape {list(source_shape)}, expected {list(shape)} (-1 matches any size)")


def _cycles(steps, producer_step: dict[str, int], add) -> None:
    edges = {i: {producer_step[t] for t in step.input_map.values() if t in producer_step} for i, step in enumerate(steps)}
    state: dict[int, int] = {}

    def visit(node: int, path: list[int]) -> bool:
        state[node] = 1
        for nxt in edges[node]:
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                add("ensemble steps form a cycle: " + " -> ".join(f"step {i} ({steps[i].model_name})" for i in cycle))
                return True
            if nxt not in state and visit(nxt, path + [nxt]):
                return True
        state[node] = 2
        return False

    for node in edges:
        if node not in state and visit(node, [node]):
            return
