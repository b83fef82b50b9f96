"""Bindings: config.pbtxt against what the model file really takes and gives — names, dtypes, ranks,
every dim, the batch dim and, for TensorRT plans, the optimization profiles. Triton reports these only
as a load error; here each mismatch names the file, the tensor, the expected and the found value.

Python-backend models have no signature to read: the tensor names model.py asks for
(`get_input_tensor_by_name(request, "NAME")`) and produces (`pb_utils.Tensor("NAME", ...)`) are
compared with the declared ones instead."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.checks.findings import Finding, NotApplicable, triton_says
from harness.checks.model import ModelEntry
from harness.engines.signature import Signature, TensorSpec
from harness.repository.config import ModelConfig, dtype_name

CHECK = "bindings"


def check_bindings(entry: ModelEntry) -> list[Finding]:
    if entry.config is None:
        raise NotApplicable("config.pbtxt missing or unreadable (the layout/schema checks report it)")
    if entry.is_ensemble:
        raise NotApplicable("an ensemble has no model file; its wiring is the schema check's")
    if entry.completion.errors:
        raise NotApplicable("Triton cannot complete this config (the schema check reports why)")
    files = entry.model_files()
    if not files:
        from harness.checks.layout import check_layout

        where = ("the layout check reports it" if check_layout(entry)
                 else f"served versions {entry.served_versions()}")
        raise NotApplicable(f"no {entry.model_filename or 'model file'} in a served version directory ({where})")
    findings: list[Finding] = []
    for path in files:
        rel = str(path.relative_to(entry.repository))
        if entry.backend == "python":
            findings += python_names(entry.config, path, entry.name, rel)
            continue
        if path.suffix == ".plan":
            from harness.checks.plan_compat import plan_problems, serving_host

            problems, _ = plan_problems(path, *serving_host())
            findings += [Finding(CHECK, entry.name, rel, problem) for problem in problems]
            if problems:
                continue
        try:
            signature = read_model_signature(path)
        except ValueError as error:
            findings.append(Finding(CHECK, entry.name, rel, f"cannot be read as a model: {error}; Triton's "
                                    f"{entry.backend} backend will refuse to load it"))
            continue
        findings += compare_signature(entry.config, signature, entry.name, rel)
    return findings


def read_model_signature(path: Path) -> Signature:
    from harness.engines import read_signature
    from harness.engines.base import EngineUnavailable

    if path.suffix not in (".onnx", ".plan", ".engine"):
        raise NotApplicable(f"not tested, because {path.name} has no signature reader (ONNX and TensorRT plans only)")
    try:
        return read_signature(path)
    except EngineUnavailable as error:
        raise NotApplicable(f"not tested, because {path.name} could not be read: {error}") from error


def config_shape(config: ModelConfig, tensor) -> tuple[int, ...]:
    """The shape the model file must have: Triton prepends the batch dim when max_batch_size > 0,
    and hands the backend `reshape.shape` instead of dims when a reshape is given."""
    dims = tuple(tensor.reshape.shape) if tensor.HasField("reshape") else tuple(tensor.dims)
    return ((-1,) if config.max_batch_size > 0 else ()) + dims


def compare_signature(config: ModelConfig, signature: Signature, model: str, file: str) -> list[Finding]:
    """Triton's onnxruntime backend (CompareDimsSupported) compares an ONNX model's OUTPUT dims exactly, -1
    included, and needs a -1 batch dim on every tensor when max_batch_size > 0; other dims, and every dim of a
    TensorRT plan, only where the model's dim is fixed."""
    findings: list[Finding] = []
    onnx = Path(file).suffix == ".onnx"

    def add(message: str) -> None:
        findings.append(Finding(CHECK, model, file, message))

    if len(config.input) != len(signature.inputs):
        add(f"config.pbtxt declares {len(config.input)} inputs {[t.name for t in config.input]}, the model has "
            f"{len(signature.inputs)} {[t.name for t in signature.inputs]}; "
            + triton_says(f"unable to load model '{config.name}', configuration expects {len(config.input)} inputs, "
                          f"model provides {len(signature.inputs)}"))
    for role, declared, actual in (("input", config.input, signature.inputs), ("output", config.output, signature.outputs)):
        by_name = {spec.name: spec for spec in actual}
        declared_names = {t.name for t in declared}
        for tensor in declared:
            spec = by_name.get(tensor.name)
            if spec is None:
                others = sorted(set(by_name) - declared_names)
                add(f"{role} {tensor.name!r} of config.pbtxt is not an {role} of the model; the model's {role}s "
                    f"are {sorted(by_name)}" + (f" (did you mean {others[0]!r}?)" if len(others) == 1 else "")
                    + "; " + triton_says(f"unexpected inference {role} '{tensor.name}', allowed {role}s are: "
                                         + ", ".join(sorted(by_name))))
                continue
            _compare_tensor(config, role, tensor, spec, add, exact=onnx and role == "output", batch_dim=onnx)
        for name in sorted(set(by_name) - declared_names):
            if role == "input":
                add(f"model input {name!r} is not declared in config.pbtxt: Triton cannot feed it")
    _profiles(config, signature, add)
    return findings


def _compare_tensor(config: ModelConfig, role: str, tensor, spec: TensorSpec, add, exact: bool,
                    batch_dim: bool) -> None:
    where = f"{role} {tensor.name!r}"
    declared_dtype = dtype_name(tensor.data_type)
    # TYPE_STRING in config is BYTES in the model and on the wire.
    if {declared_dtype, spec.dtype} != {"STRING", "BYTES"} and declared_dtype != spec.dtype:
        add(f"{where}: config.pbtxt says TYPE_{declared_dtype}, the model's tensor is {spec.dtype} "
            f"(expected data_type: TYPE_{spec.dtype}); "
            + triton_says(f"unable to load model '{config.name}', configuration expects datatype "
                          f"TYPE_{declared_dtype} for {role} '{tensor.name}', model provides TYPE_{spec.dtype}"))
    expected = config_shape(config, tensor)
    found = spec.shape
    mbs = config.max_batch_size
    refusal = "; " + _dims_refusal(config, tensor, found)
    if len(expected) != len(found):
        if mbs > 0 and len(tensor.dims) == len(found):
            add(f"{where}: dims {list(tensor.dims)} include the batch dim; with max_batch_size {mbs} Triton "
                f"prepends it itself, so the model would get rank {len(expected)} instead of {len(found)}: "
                f"expected dims {list(tensor.dims[1:])}" + refusal)
        elif mbs == 0 and len(tensor.dims) + 1 == len(found):
            add(f"{where}: dims {list(tensor.dims)} have rank {len(tensor.dims)} but the model's shape "
                f"{list(found)} has rank {len(found)}: with max_batch_size 0 the batch dim must be written "
                "into dims (or set max_batch_size)" + refusal)
        else:
            add(f"{where}: rank {len(expected)} (shape {list(expected)}) in config.pbtxt, rank {len(found)} "
                f"(shape {list(found)}) in the model" + refusal)
        return
    start = 1 if mbs > 0 else 0
    if mbs > 0 and found[0] != -1 and batch_dim:
        add(f"{where}: the model's batch dim is fixed at {found[0]} (shape {list(found)}), but max_batch_size {mbs} "
            "makes Triton batch it: expected a dynamic batch dim (-1) in the ONNX model, or max_batch_size 0 with "
            "the batch dim written into dims; " + triton_says(
                f"model '{config.name}', tensor '{tensor.name}': for the model to support batching the shape should "
                f"have at least 1 dimension and the first dimension must be -1; but shape expected by the model is "
                + "[" + ",".join(str(d) for d in found) + "]"))
        return
    if role == "input" and mbs > 0 and found[0] != -1 and mbs > found[0]:
        add(f"{where}: max_batch_size {mbs} is above the model's fixed batch dim {found[0]}: batches larger than "
            f"{found[0]} fail; expected max_batch_size <= {found[0]} (or a dynamic-batch model)")
    for index in range(start, len(found)):
        want, have = expected[index], found[index]
        if have == -1 and want != -1 and exact:
            add(f"{where}: dim {index} is {want} in config.pbtxt (shape {list(expected)}) but variable (-1) in the "
                f"model (shape {list(found)}); Triton's onnxruntime backend compares output dims exactly: expected "
                f"-1 in config.pbtxt" + refusal)
            refusal = ""
        elif have != -1 and want != have:
            shown = "-1 (variable)" if want == -1 else str(want)
            add(f"{where}: dim {index} is {shown} in config.pbtxt (shape {list(expected)}) but {have} in the "
                f"model (shape {list(found)}); the model is built for {have}" + refusal)
            refusal = ""


def _dims_refusal(config: ModelConfig, tensor, found: tuple[int, ...]) -> str:
    """The backend's wording (CompareDimsSupported) of a shape the model does not have."""
    dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
    model = "[" + ",".join(str(d) for d in found) + "]"
    if config.max_batch_size > 0:
        complete = "[" + ",".join(str(d) for d in [-1, *dims]) + "]"
        specified = (f"{len(dims) + 1} dimensions (an initial batch dimension because max_batch_size > 0 followed by "
                     f"the explicit tensor shape, making complete shape {complete})")
    else:
        specified = f"{len(dims)} dimensions (shape [" + ",".join(str(d) for d in dims) + "])"
    return triton_says(f"model '{config.name}', tensor '{tensor.name}': the model expects {len(found)} dimensions "
                       f"(shape {model}) but the model configuration specifies {specified}")


def _profiles(config: ModelConfig, signature: Signature, add) -> None:
    mbs = config.max_batch_size
    declared = {t.name: t for t in config.input}
    for number, profile in enumerate(signature.profiles):
        tensor = declared.get(profile.input)
        if tensor is None:
            continue
        where = f"input {profile.input!r}, optimization profile {number}"
        if mbs > 0:
            if profile.max[0] < mbs:
                add(f"{where}: max_batch_size {mbs} is above the profile's max batch {profile.max[0]} "
                    f"(profile min {list(profile.min)}, max {list(profile.max)}); expected max_batch_size <= {profile.max[0]}")
            if profile.min[0] > 1:
                add(f"{where}: the profile's min batch is {profile.min[0]}, but Triton sends batches from 1")
        expected = config_shape(config, tensor)
        if len(expected) != len(profile.max):
            continue
        for index in range(1 if mbs > 0 else 0, len(expected)):
            value = expected[index]
            if value != -1 and not profile.min[index] <= value <= profile.max[index]:
                add(f"{where}: dim {index} is {value} in config.pbtxt, outside the profile's "
                    f"{profile.min[index]}..{profile.max[index]}")


def python_names(config: ModelConfig, path: Path, model: str, file: str) -> list[Finding]:
    """Tensor names used as string literals in model.py against the declared inputs and outputs."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError as error:
        return [Finding(CHECK, model, file, f"does not parse as Python: {error}")]
    inputs, outputs = set(), set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        literals = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if name == "get_input_tensor_by_name" and literals:
            inputs.add(literals[0])
        elif name in ("Tensor", "get_output_config_by_name") and literals:
            outputs.add(literals[0])
    if not inputs and not outputs:
        raise NotApplicable(f"{file} names no tensors as literals; its I/O is what config.pbtxt declares")
    declared_in = {t.name for t in config.input}
    declared_out = {t.name for t in config.output}
    findings = []
    for role, used, declared in (("input", inputs, declared_in), ("output", outputs, declared_out)):
        for name in sorted(used - declared):
            findings.append(Finding(CHECK, model, file, f"model.py uses {role} {name!r}, which config.pbtxt does "
                                    f"not declare (declared {role}s: {sorted(declared)})"))
    return findings
