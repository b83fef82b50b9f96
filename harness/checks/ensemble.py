"""Ensembles as Triton judges them, in the three places it does: the ensemble's own config
(ValidateEnsembleSchedulingConfig: no instances, optimization or warm-up, every step complete, the data
flow from the ensemble inputs reaches every output and leaves no tensor unused), its dependencies (every
step model present, a pinned step version served, no cycle through other ensembles), and the steps'
completed configs once loaded (ValidateEnsembleConfig: batch sizes, every mapping names a real tensor,
every required step input mapped, each tensor's dtype and shape agree wherever it is read or written,
no step fed by two different decoupled branches). Messages carry Triton's own wording."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from harness.checks.findings import triton_says
from harness.checks.model import ModelEntry, load_entry
from harness.repository.config import DataType, ModelConfig


def check_ensemble(entry: ModelEntry, add) -> None:
    config = entry.config
    if config.platform != "ensemble" or not config.HasField("ensemble_scheduling"):
        return  # the schema check reports the platform / scheduling mismatch
    steps = list(config.ensemble_scheduling.step)
    _wired(config, steps, add)
    if not _own_config(config, add):
        return
    step_entries = _dependencies(entry, steps, add)
    if step_entries is not None:
        _with_step_configs(entry, steps, step_entries, add)


def _own_config(config: ModelConfig, add) -> bool:
    name = config.name
    for present, what, text in (
            (bool(config.instance_group), "instance_group", f"instance group should not be specified for ensemble '{name}'"),
            (config.HasField("optimization"), "optimization", f"optimization should not be specified for ensemble '{name}'"),
            (bool(config.model_warmup), "model_warmup", f"model_warmup can not be specified for ensemble '{name}'")):
        if present:
            add(f"{what} on an ensemble: an ensemble has no instances of its own (its steps do); drop {what}; "
                + triton_says(text))
    if not config.ensemble_scheduling.step:
        add("ensemble without steps; " + triton_says(f"must specify 'step' for ensemble '{name}'"))
        return False
    complete = True
    for index, step in enumerate(config.ensemble_scheduling.step):
        for present, field_name in ((step.model_name, "model_name"), (step.input_map, "input_map"),
                                    (step.output_map, "output_map")):
            if not present:
                add(f"step {index} has no {field_name}; "
                    + triton_says(f"must specify '{field_name}' in step {index} of ensemble '{name}'"))
                complete = False
                break
    return complete and _data_flow(config, add)


@dataclass
class _Tensor:
    name: str
    is_output: bool = False
    ready: bool = False
    prev: list = field(default_factory=list)
    next: list = field(default_factory=list)


def _data_flow(config: ModelConfig, add) -> bool:
    """Triton's ensemble graph: tensors written by step output maps, read by input maps; from the
    ensemble inputs, a tensor is ready once every tensor its step reads is."""
    name = config.name
    tensors: dict[str, _Tensor] = {}
    for index, step in enumerate(config.ensemble_scheduling.step):
        written = []
        for ensemble_tensor in step.output_map.values():
            node = tensors.get(ensemble_tensor)
            if node is not None and node.is_output:
                add(f"step {index} writes {ensemble_tensor!r}, which another step already writes; "
                    + triton_says(f"ensemble tensor '{ensemble_tensor}' can appear in an output map only once for "
                                  f"ensemble '{name}'"))
                return False
            node = tensors.setdefault(ensemble_tensor, _Tensor(ensemble_tensor))
            node.is_output = True
            written.append(node)
        for ensemble_tensor in step.input_map.values():
            node = tensors.setdefault(ensemble_tensor, _Tensor(ensemble_tensor))
            for output in written:
                output.prev.append(node)
                node.next.append(output)
    ready = deque()
    for tensor in config.input:
        node = tensors.get(tensor.name)
        if node is None:
            add(f"ensemble input {tensor.name!r} is read by no step; "
                + triton_says(f"ensemble input '{tensor.name}' for ensemble {name}' is not used"))
            return False
        node.ready = True
        ready.append(node)
    while ready:
        for follower in ready.popleft().next:
            if not follower.ready and all(p.ready for p in follower.prev):
                follower.ready = True
                ready.append(follower)
    outputs = set()
    for tensor in config.output:
        node = tensors.get(tensor.name)
        if node is None:
            add(f"ensemble output {tensor.name!r} is produced by no step (step outputs: "
                f"{sorted(t.name for t in tensors.values() if t.is_output)}); "
                + triton_says(f"ensemble output '{tensor.name}' for ensemble {name}' is not used"))
            return False
        if not node.ready:
            text = f"output '{tensor.name}' for ensemble '{name}' is not written"
            source = _unconnected_source(node)
            if source is not node:
                text += f": at least one of its depending tensors, '{source.name}', is not connected"
            add(f"ensemble output {tensor.name!r} cannot be computed from the ensemble inputs; " + triton_says(text))
            return False
        outputs.add(tensor.name)
    for node in tensors.values():
        if node.name not in outputs and (not node.ready or not node.next):
            why = "is read by no step" if node.ready else "cannot be computed from the ensemble inputs"
            add(f"ensemble tensor {node.name!r} {why}; "
                + triton_says(f"ensemble tensor '{node.name}' is unused in ensemble '{name}'"))
            return False
    return True


def _unconnected_source(node: _Tensor) -> _Tensor:
    last, prev, seen = node, node.prev, set()
    while prev:
        candidates, prev = prev, []
        for candidate in candidates:
            if not candidate.ready and candidate.name not in seen:
                seen.add(candidate.name)
                last, prev = candidate, candidate.prev
                break
    return last


def _wired(config: ModelConfig, steps, add) -> None:
    """The plain-words version of a broken wire: a step input reading a tensor nothing provides."""
    provided = {t.name for t in config.input} | {t for step in steps for t in step.output_map.values()}
    for index, step in enumerate(steps):
        for model_tensor, ensemble_tensor in step.input_map.items():
            if ensemble_tensor not in provided:
                add(f"step {index} ({step.model_name}) input {model_tensor!r} is wired to {ensemble_tensor!r}, which "
                    f"no ensemble input and no step output provides (available: {sorted(provided)}); Triton refuses "
                    "the ensemble (the load API says only \"failed to poll from model repository\")")


def _dependencies(entry: ModelEntry, steps, add) -> dict[str, ModelEntry] | None:
    """Step models present and loadable as pinned; no cycle through ensembles. None when a step model
    is missing (the step-config rules cannot run)."""
    name = entry.name
    missing = sorted({s.model_name for s in steps if s.model_name and not _is_model(entry, s.model_name)})
    if missing:
        add(f"step model(s) {missing} are not in the repository; "
            + triton_says(f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}"))
        return None
    cycle = _cycle(entry, name, [name])
    if cycle:
        add(f"ensembles depend on each other in a cycle ({' -> '.join(cycle)}); "
            + triton_says(f"circular dependency between ensembles: {name} -> ... -> {cycle[-2]} -> {name}"))
        return None
    entries = {s.model_name: load_entry(entry.repository, s.model_name, autocomplete=entry.autocomplete)
               for s in steps}
    for step in steps:
        step_entry = entries[step.model_name]
        if step.model_version > 0 and step_entry.config is not None \
                and step.model_version not in step_entry.served_versions():
            add(f"step {step.model_name!r} is pinned to version {step.model_version}, which its version policy does "
                f"not serve (served: {step_entry.served_versions()}); "
                + triton_says(f"ensemble '{name}' depends on '{step.model_name}' whose required version "
                              f"{step.model_version} is not loaded"))
    if any(e.config is None for e in entries.values()):
        return None
    return entries


def _is_model(entry: ModelEntry, model: str) -> bool:
    path = entry.repository / model
    return bool(model) and "/" not in model and model not in (".", "..") and path.is_dir()


def _cycle(entry: ModelEntry, start: str, path: list[str]) -> list[str] | None:
    config = load_entry(entry.repository, path[-1]).declared  # the platform is declared: no completion needed
    if config is None or config.platform != "ensemble":
        return None
    for step in config.ensemble_scheduling.step:
        model = step.model_name
        if model == start:
            return path + [start]
        if model in path or not _is_model(entry, model):
            continue
        found = _cycle(entry, start, path + [model])
        if found:
            return found
    return None


@dataclass
class _Node:
    """An ensemble tensor as inferred from one model (TensorNode in Triton's ensemble_utils)."""
    model: str
    data_type: int
    dims: tuple
    full: tuple
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list = field(default_factory=list)
    next: list = field(default_factory=list)
    sibling: object = None


def _node(model: str, batching: bool, data_type: int, dims) -> _Node:
    dims = tuple(dims)
    return _Node(model, data_type, dims, ((-1,) if batching else ()) + dims)


def _with_step_configs(entry: ModelEntry, steps, entries: dict[str, ModelEntry], add) -> None:
    config, name = entry.config, entry.name
    batching = config.max_batch_size > 0
    nodes: dict[str, _Node] = {}
    for tensor in config.input:
        nodes[tensor.name] = _node(name, batching, tensor.data_type,
                                   tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims)
    sink = _Node(name, 0, (), ())
    for tensor in config.output:
        node = nodes.setdefault(tensor.name, _node(name, batching, tensor.data_type,
                                                   tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims))
        sink.prev.append(node)
        node.next.append(sink)
    for step in steps:
        step_config = entries[step.model_name].config
        if step_config.max_batch_size != 0 and step_config.max_batch_size < config.max_batch_size:
            add(f"step {step.model_name!r} takes batches up to {step_config.max_batch_size}, below the ensemble's "
                f"max_batch_size {config.max_batch_size}; "
                + triton_says(f"ensemble {name} allows maximum batch size {config.max_batch_size}, but it contains "
                              f"model {step.model_name} which only allows maximum batch size to be "
                              f"{step_config.max_batch_size}"))
            return
        if not _mapping(name, step, step_config, nodes, add):
            return
    _decoupled(name, config, nodes, add)


def _mapping(name: str, step, step_config: ModelConfig, nodes: dict[str, _Node], add) -> bool:
    model = step.model_name
    batching = step_config.max_batch_size > 0
    inputs = {t.name: t for t in step_config.input}
    prefix = f"in ensemble {name}, "
    for model_tensor, ensemble_tensor in step.input_map.items():
        if model_tensor not in inputs:
            add(f"step {model!r} input_map key {model_tensor!r} is not an input of {model} (its inputs: "
                f"{sorted(inputs)}); " + triton_says(f"{prefix}ensemble tensor {ensemble_tensor} is mapping to "
                                                      f"non-existing input {model_tensor} in model {model}"))
            return False
    for tensor in step_config.input:
        mapped = [e for m, e in step.input_map.items() if m == tensor.name]
        if not mapped:
            if tensor.optional:
                continue
            add(f"input {tensor.name!r} of step {model!r} is fed by nothing; "
                + triton_says(f"{prefix}input {tensor.name} in model {model} is not mapped to any ensemble tensors"))
            return False
        if not _consistent(prefix, mapped[0], nodes, _node(model, batching, tensor.data_type, tensor.dims), add):
            return False
    outputs = {t.name: t for t in step_config.output}
    for model_tensor, ensemble_tensor in step.output_map.items():
        if model_tensor not in outputs:
            add(f"step {model!r} output_map key {model_tensor!r} is not an output of {model} (its outputs: "
                f"{sorted(outputs)}); " + triton_says(f"{prefix}ensemble tensor {ensemble_tensor} is mapped from "
                                                       f"non-existing output {model_tensor} in model {model}"))
            return False
    sibling = _Node(model, 0, (), ())
    for model_tensor, ensemble_tensor in step.output_map.items():
        tensor = outputs[model_tensor]
        if not _consistent(prefix, ensemble_tensor, nodes, _node(model, batching, tensor.data_type, tensor.dims), add):
            return False
        nodes[ensemble_tensor].sibling = sibling
    decoupled = step_config.model_transaction_policy.decoupled
    for ensemble_tensor in step.output_map.values():
        node = nodes[ensemble_tensor]
        node.decoupled = decoupled
        for source in step.input_map.values():
            node.prev.append(nodes[source])
            nodes[source].next.append(node)
    return True


def _consistent(prefix: str, ensemble_tensor: str, nodes: dict[str, _Node], node: _Node, add) -> bool:
    known = nodes.setdefault(ensemble_tensor, node)
    if known is node:
        return True
    where = f"{prefix}ensemble tensor {ensemble_tensor}: "
    if known.data_type != node.data_type:
        first, second = DataType.Name(known.data_type), DataType.Name(node.data_type)
        add(f"ensemble tensor {ensemble_tensor!r} is {first} for {known.model} and {second} for {node.model}; "
            + triton_says(f"{where}inconsistent data type: {first} is inferred from model {known.model} while "
                          f"{second} is inferred from model {node.model}"))
        return False
    if not (_match(known.dims, node.dims) or _match(known.full, node.full)):
        first, second = _dims(known.full), _dims(node.full)
        add(f"ensemble tensor {ensemble_tensor!r} has shape {first} for {known.model} and {second} for {node.model}; "
            + triton_says(f"{where}inconsistent shape: {first} is inferred from model {known.model} while "
                          f"{second} is inferred from model {node.model}"))
        return False
    return True


def _match(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def _dims(dims: tuple) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _decoupled(name: str, config: ModelConfig, nodes: dict[str, _Node], add) -> None:
    """Every step's inputs must come from one decoupled branch (Triton labels each decoupled step's
    outputs and refuses a step that mixes labels)."""
    label = 0
    queue = deque()
    for tensor in config.input:
        node = nodes[tensor.name]
        node.visited = True
        queue.append(node)
    while queue:
        for follower in queue.popleft().next:
            if follower.visited or not all(p.visited for p in follower.prev):
                continue
            if not follower.prev:
                continue
            first = follower.prev[0].label
            if any(p.label != first for p in follower.prev):
                add(f"step {follower.model!r} reads tensors from different decoupled branches; "
                    + triton_says(f"in ensemble {name}, step of model '{follower.model}' receives inputs originated "
                                  "from different decoupled models"))
                return
            if follower.sibling is not None and follower.sibling.visited:
                follower.label = follower.sibling.label
            else:
                if follower.decoupled:
                    label += 1
                    follower.label = label
                else:
                    follower.label = first
                if follower.sibling is not None:
                    follower.sibling.label = follower.label
                    follower.sibling.visited = True
            follower.visited = True
            queue.append(follower)
