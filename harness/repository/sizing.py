"""How big a request a model can take: the -1 dims of its inputs filled from what the model says, never
with a guess that can take the host down (issue #22: a postprocess input [-1,-1,-1] filled with 640
became a 1 GiB request, sent as JSON, and the kernel killed pytest at 14 GB).

A -1 dim is filled, first source first:
1. the model's ONNX graph, where it has one (its platform's model file, or an .onnx beside a Python
   model.py) and the graph fixes that dim;
2. the step that feeds it in an ensemble: the producing step's output dims (themselves from its config,
   then its ONNX graph), or the ensemble input's own size;
3. the leading dim of a model without max_batch_size (its batch, written into the dims): 1;
4. the height and width of an image-shaped input ([C, -1, -1] or [-1, -1, C], C of 1, 3 or 4): the
   declared imgsz (manifest / --imgsz), the model's `imgsz` config parameter, else YOLO's 640;
5. anything else: DEFAULT_DIM (16).

Every request the suites build is held to a byte bound, MAX_REQUEST_BYTES (64 MiB, $YTS_MAX_REQUEST_BYTES);
JSON-encoded tensors count JSON_BYTES_PER_VALUE per element (what a float costs as text). A case whose
request would exceed it is "not applicable", with the size, instead of being sent."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

MAX_REQUEST_BYTES = 64 * 2**20
BUDGET_ENV = "YTS_MAX_REQUEST_BYTES"
DEFAULT_DIM = 16
YOLO_IMGSZ = 640
JSON_BYTES_PER_VALUE = 20  # "0.12345678901234567," - and the client holds a Python float per value too
IMAGE_CHANNELS = (1, 3, 4)
ITEMSIZE = {"BOOL": 1, "UINT8": 1, "INT8": 1, "UINT16": 2, "INT16": 2, "FP16": 2, "BF16": 2, "UINT32": 4,
            "INT32": 4, "FP32": 4, "UINT64": 8, "INT64": 8, "FP64": 8}
BYTES_ELEMENT_ESTIMATE = 64 * 1024  # an encoded test image, generously


def request_budget() -> int:
    """The bound on one request's bytes: $YTS_MAX_REQUEST_BYTES, else MAX_REQUEST_BYTES."""
    value = os.environ.get(BUDGET_ENV)
    if not value:
        return MAX_REQUEST_BYTES
    try:
        budget = int(float(value))
    except ValueError:
        raise ValueError(f"${BUDGET_ENV}={value!r}: expected a number of bytes, e.g. {MAX_REQUEST_BYTES}") from None
    if budget <= 0:
        raise ValueError(f"${BUDGET_ENV}={value!r}: must be positive")
    return budget


def human(nbytes: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} B"


def request_bytes(shape, datatype: str, json: bool = False) -> int:
    """What a tensor of this shape costs on the wire (binary), or as JSON text."""
    elements = int(np.prod([max(int(d), 0) for d in shape], dtype=np.float64)) if len(shape) else 1
    if json:
        return elements * JSON_BYTES_PER_VALUE
    return elements * ITEMSIZE.get(datatype, BYTES_ELEMENT_ESTIMATE if datatype == "BYTES" else 8)


class RequestTooLarge(pytest.skip.Exception):
    """A request the byte bound forbids. It is a pytest skip: uncaught, the check is "not applicable",
    with the size; a check that loops over models catches it and judges the others."""

    def __init__(self, model: str, shape, datatype: str, nbytes: int, budget: int, how: str = "", json: bool = False,
                 tensors: int = 1, kind: str = "request"):
        from harness.verdicts import NOT_APPLICABLE

        self.model, self.shape, self.nbytes, self.budget = model, tuple(shape), nbytes, budget
        what = f"{list(shape)} {datatype}" if tensors == 1 else f"{tensors} x {list(shape)} {datatype}"
        self.line = (f"{model}: a {kind} of {what}{' as JSON' if json else ''} would be {human(nbytes)}, over the "
                     f"{human(budget)} request bound (${BUDGET_ENV})" + (f"; input sized {how}" if how else ""))
        super().__init__(msg=NOT_APPLICABLE + self.line, pytrace=False)


def check_request(model: str, shape, datatype: str, how: str = "", json: bool = False, tensors: int = 1) -> int:
    """The bytes of a request of `tensors` tensors of this shape; RequestTooLarge over the bound."""
    nbytes = tensors * request_bytes(shape, datatype, json=json)
    budget = request_budget()
    if nbytes > budget:
        raise RequestTooLarge(model, shape, datatype, nbytes, budget, how, json, tensors)
    return nbytes


@dataclass(frozen=True)
class InputSize:
    """One input's dims without the batch dim: as declared, and concrete, with where each fill came from."""

    model: str
    name: str
    declared: tuple[int, ...]
    dims: tuple[int, ...]
    sources: tuple[str, ...] = ()  # one line per source used, e.g. "[10, 8400] from yolo_raw.output0 (ensemble ...)"

    def describe(self) -> str:
        if self.declared == self.dims:
            return f"{list(self.dims)}"
        return f"{_dims(self.declared)} -> {list(self.dims)} ({'; '.join(self.sources)})"


def _dims(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _fill(current: list[int], candidate, positions: list[int] | None = None) -> bool:
    """Fill current's -1s from candidate's known dims (same rank); True when any was filled."""
    if candidate is None or len(candidate) != len(current):
        return False
    used = False
    for i, (have, offer) in enumerate(zip(current, candidate)):
        if have < 0 and offer is not None and offer > 0 and (positions is None or i in positions):
            current[i] = int(offer)
            used = True
    return used


def image_positions(dims) -> list[int]:
    """The height and width positions of an image-shaped (trailing 3 dims) input, or []."""
    if len(dims) < 3:
        return []
    base = len(dims) - 3
    a, b, c = dims[-3:]
    if a in IMAGE_CHANNELS and b < 0 and c < 0:
        return [base + 1, base + 2]
    if c in IMAGE_CHANNELS and a < 0 and b < 0:
        return [base, base + 1]
    return []


def fallback_dims(declared, batched: bool, imgsz: int | None = None, image_size_source: str = "") -> tuple[tuple[int, ...], list[str]]:
    """Rules 3-5 (no graph, no ensemble): leading batch dim 1, image height/width, DEFAULT_DIM."""
    dims, sources = list(declared), []
    positions = image_positions(dims)  # before the batch rule: a filled batch 1 is no channel count
    if not batched and len(dims) >= 2 and dims[0] < 0 and 0 not in positions:
        dims[0] = 1
        sources.append("the leading dim of a model without max_batch_size is its batch: 1")
    if positions and any(dims[i] < 0 for i in positions):
        size = imgsz or YOLO_IMGSZ
        for i in positions:
            if dims[i] < 0:
                dims[i] = size
        sources.append(f"image height/width {size} ({image_size_source or ('declared imgsz' if imgsz else 'YOLO default: no imgsz declared')})")
    if any(d < 0 for d in dims):
        dims = [DEFAULT_DIM if d < 0 else d for d in dims]
        sources.append(f"other dims the small default {DEFAULT_DIM}")
    return tuple(dims), sources


class Sizer:
    """Input sizes for the models of one repository, from their configs (the server's or the files'),
    the ONNX graphs in `repository` when given, and a declared imgsz."""

    def __init__(self, configs: dict, repository: Path | None = None, imgsz: int | None = None):
        self.configs = configs  # name -> ModelConfig (tritonclient's model_config_pb2)
        self.repository = Path(repository) if repository else None
        self.imgsz = imgsz
        self._graphs: dict[str, object] = {}

    # -- what the configs declare --
    def _port(self, model: str, name: str, kind: str):
        config = self.configs.get(model)
        if config is None:
            return None
        return next((p for p in getattr(config, kind) if p.name == name), None)

    def declared(self, model: str, name: str, kind: str = "input") -> tuple[int, ...] | None:
        port = self._port(model, name, kind)
        return None if port is None else tuple(int(d) for d in port.dims)

    def batched(self, model: str) -> bool:
        config = self.configs.get(model)
        return bool(config is not None and config.max_batch_size > 0)

    # -- 1. the ONNX graph --
    def _graph(self, model: str):
        if self.repository is None or model in self._graphs:
            return self._graphs.get(model)
        self._graphs[model] = None
        config = self.configs.get(model)
        folder = self.repository / model
        versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)) \
            if folder.is_dir() else []
        if not versions:
            return None
        version = versions[-1]
        named = config.default_model_filename if config is not None and config.default_model_filename else "model.onnx"
        candidates = [version / named] if named.endswith(".onnx") else []
        candidates += sorted(p for p in version.glob("*.onnx") if p not in candidates)
        for path in candidates:
            if path.is_file():
                try:
                    from harness.engines.onnx_signature import onnx_signature

                    self._graphs[model] = (onnx_signature(path), path)
                except Exception:  # not a graph we can read: the other sources decide
                    continue
                break
        return self._graphs[model]

    def graph_dims(self, model: str, name: str, kind: str = "input") -> tuple[tuple[int, ...], str] | None:
        graph = self._graph(model)
        declared = self.declared(model, name, kind)
        if graph is None or declared is None:
            return None
        signature, path = graph
        spec = next((t for t in (signature.inputs if kind == "input" else signature.outputs) if t.name == name), None)
        if spec is None:
            return None
        shape = tuple(spec.shape)
        if self.batched(model) and len(shape) == len(declared) + 1:
            shape = shape[1:]
        if len(shape) != len(declared):
            return None
        return shape, f"{_dims(shape)} from the ONNX graph {path.relative_to(self.repository)}"

    def output_dims(self, model: str, name: str) -> tuple[tuple[int, ...], str] | None:
        declared = self.declared(model, name, "output")
        if declared is None:
            return None
        dims, how = list(declared), f"{model}.{name} {_dims(declared)}"
        graph = self.graph_dims(model, name, "output")
        if graph and _fill(dims, graph[0]):
            how += f", {graph[1]}"
        return tuple(dims), how

    # -- 2. the ensemble step that feeds it --
    def fed_dims(self, model: str, name: str, _seen: frozenset = frozenset()) -> tuple[tuple[int, ...], str] | None:
        if (model, name) in _seen:
            return None
        seen = _seen | {(model, name)}
        for ensemble, config in sorted(self.configs.items()):
            if config.platform != "ensemble" and config.backend != "ensemble":
                continue
            steps = list(config.ensemble_scheduling.step)
            for step in steps:
                if step.model_name != model or name not in step.input_map:
                    continue
                tensor = step.input_map[name]
                for producer in steps:
                    for key, value in producer.output_map.items():
                        if value == tensor:
                            found = self.output_dims(producer.model_name, key)
                            if found:
                                return found[0], f"{found[1]}, the step that feeds it in {ensemble}"
                if any(p.name == tensor for p in config.input):
                    outer = self.input_size(ensemble, tensor, seen)
                    return outer.dims, f"{ensemble}'s input {tensor} {outer.describe()}, which feeds it"
        return None

    # -- all of it --
    def input_size(self, model: str, name: str, _seen: frozenset = frozenset()) -> InputSize:
        declared = self.declared(model, name, "input")
        if declared is None:
            raise KeyError(f"{model} has no input {name!r} in its config")
        dims, sources = list(declared), []
        if any(d < 0 for d in dims):
            graph = self.graph_dims(model, name)
            if graph and _fill(dims, graph[0]):
                sources.append(graph[1])
        if any(d < 0 for d in dims):
            fed = self.fed_dims(model, name, _seen)
            if fed and _fill(dims, fed[0]):
                sources.append(fed[1])
        if any(d < 0 for d in dims):
            config = self.configs.get(model)
            parameter = config.parameters["imgsz"].string_value if config is not None and "imgsz" in config.parameters else ""
            imgsz, origin = self.imgsz, "declared imgsz"
            if imgsz is None and parameter.strip().isdigit():
                imgsz, origin = int(parameter), f"{model}'s imgsz parameter"
            filled, more = fallback_dims(dims, self.batched(model), imgsz, origin if imgsz else "")
            dims, sources = list(filled), sources + more
        return InputSize(model, name, declared, tuple(dims), tuple(sources))


def read_configs(repository: Path) -> dict:
    """Every model config of a repository folder as Triton completes it (harness.checks.model.completed_config),
    by name (one that does not parse is left out)."""
    from harness.checks.model import completed_config
    from harness.repository.config import CONFIG_NAME, ConfigError

    configs = {}
    for folder in sorted(Path(repository).iterdir()) if Path(repository).is_dir() else []:
        if (folder / CONFIG_NAME).is_file():
            try:
                config = completed_config(folder)
            except (ConfigError, OSError):
                continue
            configs[config.name or folder.name] = config
    return configs
