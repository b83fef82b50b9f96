"""What every request carries: one tensor per model input, built once from the ModelConfig so a load
run never spends client time making data. Picklable, so worker processes get the same bytes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.repository.config import ModelConfig, dtype_name

_NUMPY = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # tritonclient's spelling: FP32, BYTES, ...
    array: np.ndarray

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)


@dataclass(frozen=True)
class Payload:
    model: str
    tensors: tuple[Tensor, ...]
    outputs: tuple[str, ...] = ()  # empty: the server returns every output

    @property
    def nbytes(self) -> int:
        return sum(t.array.nbytes if t.datatype != "BYTES" else sum(len(b) for b in t.array.flat) for t in self.tensors)


ENCODED_SIZE = (480, 640)  # (h, w) of encoded_image()'s image


def _extra_values(config: ModelConfig, layout, sizer) -> dict[str, np.ndarray]:
    """The declared [inputs.NAME] values (harness.repository.extra_inputs) for the payload's one image."""
    if layout is None or not layout.extras or layout.input is None:
        return {}
    from harness.repository.layouts import PIXELS, TENSOR
    from harness.vision.served import DEFAULT_IMGSZ, model_imgsz

    imgsz = model_imgsz(config, {}) or DEFAULT_IMGSZ
    source = ENCODED_SIZE  # the size encoded_image() draws
    if layout.input.kind in (PIXELS, TENSOR):
        dims = [d for d in layout.input.port.dims]
        if min(dims) < 0 and sizer is not None and config.name in sizer.configs:
            dims = list(sizer.input_size(config.name, layout.input.name).dims)[-len(dims):]
        source = tuple(dims[:2]) if layout.input.kind == PIXELS else tuple(dims[1:3])
    return layout.extra_values(source, imgsz)


def encoded_image(width: int = ENCODED_SIZE[1], height: int = ENCODED_SIZE[0], seed: int = 0) -> bytes:
    """A JPEG with structure (gradients and blocks), for TYPE_STRING image inputs."""
    import cv2

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([(x * 255 // width), (y * 255 // height), ((x + y) * 127 // (width + height))], -1).astype(np.uint8)
    for _ in range(6):
        x0, y0 = rng.integers(0, width - 80), rng.integers(0, height - 80)
        image[y0:y0 + 80, x0:x0 + 80] = rng.integers(0, 255, 3)
    ok, data = cv2.imencode(".jpg", image)
    assert ok
    return data.tobytes()


def payload_from_config(config: ModelConfig, batch: int = 1, shapes: dict[str, list[int]] | None = None,
                        dynamic_size: int | None = None, seed: int = 0, sizer=None, layout=None) -> Payload:
    """One request of `batch` rows (no batch dimension when max_batch_size is 0). Variable dims (-1)
    take `dynamic_size` when given, else what harness.repository.sizing finds (`sizer`: one over the
    whole repository, for ONNX graphs and ensemble steps; by default this config alone), unless
    `shapes` names the input; BYTES inputs carry an encoded image. A request over the byte bound
    raises sizing.RequestTooLarge (a "not applicable" skip naming the size). With the model's `layout`
    (harness.repository.layouts), the inputs its owner declared ([inputs.NAME]) carry the values of the
    payload's image (ENCODED_SIZE for encoded inputs, the sized pixels otherwise), fixed for the run."""
    extras = _extra_values(config, layout, sizer)
    from harness.repository import sizing

    if sizer is None or config.name not in sizer.configs:
        sizer = sizing.Sizer({config.name: config})
    rng = np.random.default_rng(seed)
    tensors, total, how = [], 0, []
    for spec in config.input:
        datatype = "BYTES" if dtype_name(spec.data_type) == "STRING" else dtype_name(spec.data_type)
        given = (shapes or {}).get(spec.name)
        if given:
            dims = list(given)
        elif datatype == "BYTES":
            dims = [d if d >= 0 else 1 for d in spec.dims]
        elif dynamic_size is not None:
            dims = [d if d >= 0 else dynamic_size for d in spec.dims]
        else:
            size = sizer.input_size(config.name, spec.name)
            dims = list(size.dims)
            if size.sources:
                how.append(f"{spec.name} {size.describe()}")
        shape = ([batch] if config.max_batch_size > 0 else []) + dims
        if datatype != "BYTES":
            total += sizing.request_bytes(shape, datatype)
            if total > sizing.request_budget():  # (all inputs so far counted)
                raise sizing.RequestTooLarge(config.name, shape, datatype, total, sizing.request_budget(), "; ".join(how))
        if spec.name in extras:
            array = np.broadcast_to(extras[spec.name], shape).copy()
        elif datatype == "BYTES":
            array = np.full(shape, encoded_image(seed=seed), dtype=np.object_)
        elif datatype.startswith("FP"):
            array = rng.random(shape, dtype=np.float32).astype(_NUMPY[datatype])
        else:
            array = rng.integers(0, 2 if datatype == "BOOL" else 100, shape).astype(_NUMPY[datatype])
        tensors.append(Tensor(spec.name, datatype, array))
    return Payload(config.name, tuple(tensors))


class RepositoryPayloads:
    """A good request for any model of a repository, as the checks that drive its models send it: sized over
    the whole repository (ONNX graphs, ensemble steps) and carrying the inputs its owner declared in
    [inputs.NAME] (`layouts`: model -> harness.repository.layouts.Layout, as the suites read them)."""

    def __init__(self, repository, layouts: dict | None = None):
        from harness.repository.sizing import Sizer, read_configs

        self.configs = read_configs(repository)
        self.sizer = Sizer(self.configs, repository)
        self.layouts = layouts or {}

    def __call__(self, model: str, batch: int = 1) -> Payload:
        return payload_from_config(self.configs[model], batch=batch, sizer=self.sizer, layout=self.layouts.get(model))
