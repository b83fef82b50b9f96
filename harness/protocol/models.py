"""Which served model plays which part, read from the server's own metadata and config: a tensor
model (a numeric image input: yolo_raw [N,3,640,640] FP32, UINT8 [H,W,3] pixels) or an image model (an
input of encoded images: TYPE_STRING bytes or their base64, UINT8 [-1] file bytes; yolo_e2e,
yolo_ensemble). Which input that is, and whether the model returns detections, is its layout
(harness.repository.layouts: all inputs and outputs of the served config, and the owner's [layout.NAME]);
a model without a config to read falls back to its one input's datatype. Inputs beside the image that the
owner declared ([inputs.NAME], harness.repository.extra_inputs) travel in every request built here that
carries an image, with that image's values (ModelView.with_extras for requests built elsewhere). Checks are written against
these views, so they run on any repository, and good inputs of the right shape and encoding come from here too.

A tensor input's -1 dims are filled by harness.repository.sizing (the ONNX graph, the ensemble step
that feeds it, declared imgsz, a small default), and every request built here is held to its byte
bound: one that would exceed it raises RequestTooLarge, a "not applicable" skip naming the size."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field, replace

import numpy as np
import requests

from harness.protocol.wire import Request, Tensor, bytes_tensor
from harness.repository import sizing
from harness.repository.extra_inputs import batch_of
from harness.repository.layouts import BASE64, DETECTIONS, ENCODED, Layout, read_layout
from harness.repository.sizing import RequestTooLarge

__all__ = ["ModelView", "Port", "RequestTooLarge", "discover", "good_array", "image_request", "sample_image"]


@dataclass(frozen=True)
class Port:
    name: str
    datatype: str
    shape: tuple[int, ...]  # as the metadata says: with the batch dim (-1) when max_batch_size > 0


@dataclass(frozen=True)
class ModelView:
    name: str
    versions: tuple[str, ...]
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    max_batch_size: int
    platform: str
    size: sizing.InputSize | None = None  # the input's concrete dims (batch excluded), where they came from
    layout: Layout | None = None  # from the served config (and the manifest): which input, which outputs
    config: object = field(default=None, compare=False, repr=False)  # the served ModelConfig, when readable
    imgsz: tuple[int, int] | None = None  # the model input canvas (h, w), where its configs state it

    @property
    def role(self) -> str | None:
        """"image" (encoded images in), "tensor" (numbers in: tensors, pixels) or None (several inputs)."""
        if self.layout is not None and self.layout.input is not None:
            return "image" if self.layout.input.kind in (ENCODED, BASE64) else "tensor"
        if len(self.inputs) != 1:
            return None
        if self.inputs[0].datatype == "BYTES":
            return "image"
        if self.inputs[0].datatype in ("FP32", "FP16", "UINT8"):
            return "tensor"
        return None

    @property
    def detects(self) -> bool:
        """Returns detections (rows [.., max_det, 6], NMS-inside outputs, declared JSON): the model the
        detection thresholds are for (not a preprocessing step that also takes image bytes)."""
        if self.layout is not None and self.layout.output is not None:
            return self.layout.output.kind in DETECTIONS
        return any(len(p.shape) >= 2 and p.shape[-1] == 6 for p in self.outputs)

    @property
    def input(self) -> Port:
        if self.layout is not None and self.layout.input is not None:
            return next((p for p in self.inputs if p.name == self.layout.input.name), self.inputs[0])
        return self.inputs[0]

    def encode(self, item: bytes):
        """One encoded image as this model's input takes it: the bytes, their base64, or (UINT8) the bytes as numbers."""
        if self.layout is not None and self.layout.input is not None and self.layout.input.kind == BASE64:
            return base64.b64encode(item)
        if self.input.datatype == "UINT8":
            return np.frombuffer(item, dtype=np.uint8)
        return item

    @property
    def batched(self) -> bool:
        return self.max_batch_size > 0

    def concrete_shape(self, batch: int = 1) -> tuple[int, ...]:
        dims = list(self.input.shape[1:] if self.batched else self.input.shape)
        if self.input.datatype == "BYTES":
            dims = [1 if d < 0 else d for d in dims]
        elif self.size is not None and len(self.size.dims) == len(dims):
            dims = [s if d < 0 else d for d, s in zip(dims, self.size.dims)]
        else:  # no configs to read: the rules that need none (batch 1, image sides, a small default)
            dims = list(sizing.fallback_dims(dims, self.batched)[0])
        return tuple(([batch] if self.batched else []) + dims)

    def sized_how(self) -> str:
        if self.size is not None:
            return self.size.describe()
        declared = self.input.shape[1:] if self.batched else self.input.shape
        dims, sources = sizing.fallback_dims(declared, self.batched)
        return f"{list(declared)} -> {list(dims)} ({'; '.join(sources)})" if sources else ""

    def check_size(self, shape, datatype: str | None = None, json: bool = False, tensors: int = 1) -> int:
        """The bytes of a request of `tensors` tensors of this shape; RequestTooLarge over the bound."""
        return sizing.check_request(self.name, shape, datatype or self.input.datatype, self.sized_how(), json, tensors)

    def good_request(self, batch: int = 1, seed: int = 0, **parameters) -> Request:
        items = [sample_image(seed + i) for i in range(batch)] if self.role == "image" else None
        return Request(self.name, (Tensor.of(self.input.name, good_array(self, batch, seed)),
                                   *self.extra_tensors(batch, items)), parameters=parameters)

    def extra_arrays(self, batch: int = 1, items: list[bytes] | None = None) -> dict[str, np.ndarray]:
        """The inputs beside the image its owner declared ([inputs.NAME], harness.repository.extra_inputs) for a
        request of `batch` images: each of `items`' own values (encoded images), else the sample image's; an
        image that cannot be decoded (a bad-input case) gets those of an image the size of the model input."""
        if self.layout is None or not self.layout.extras:
            return {}
        from harness.vision.image import decode_image_bytes

        size = self.imgsz or (640, 640)
        per_image = []
        for item in items or [sample_image()] * batch:
            try:
                source = decode_image_bytes(item).shape[:2]
            except Exception:  # not an image: the request is about that, the extras only need to be well-formed
                source = size
            per_image.append(self.layout.extra_values(source, size))
        if len(per_image) < batch:
            per_image += per_image[-1:] * (batch - len(per_image))
        return batch_of(per_image, self.batched)

    def extra_tensors(self, batch: int = 1, items: list[bytes] | None = None) -> tuple[Tensor, ...]:
        return tuple(Tensor.of(name, array) for name, array in self.extra_arrays(batch, items).items())

    def with_extras(self, request: Request | None) -> Request | None:
        """`request` with the declared extra inputs added where it carries this model's image input and not them
        (one value set per row of the image tensor)."""
        if request is None or not self.layout or not self.layout.extras:
            return request
        names = {t.name for t in request.inputs}
        image = next((t for t in request.inputs if t.name == self.input.name), None)
        if image is None or names & {e.name for e in self.layout.extras}:
            return request
        batch = max(1, int(image.shape[0])) if self.batched and image.shape else 1
        return replace(request, inputs=request.inputs + self.extra_tensors(batch))


def check_json_response(view: ModelView, batch: int = 1) -> int:
    """The JSON text of the outputs the metadata fixes (a -1 dim counted as 1): RequestTooLarge (as a
    response) when an answer asked for in JSON would exceed the bound, e.g. 8 MiB feature maps."""
    total, largest = 0, None
    for port in view.outputs:
        dims = list(port.shape[1:] if view.batched else port.shape)
        shape = ([batch] if view.batched else []) + [max(d, 1) for d in dims]
        nbytes = sizing.request_bytes(shape, port.datatype, json=port.datatype != "BYTES")
        total += nbytes
        if largest is None or nbytes > largest[0]:
            largest = (nbytes, shape, port)
    budget = sizing.request_budget()
    if total > budget and largest is not None:
        raise RequestTooLarge(view.name, largest[1], f"{largest[2].datatype} {largest[2].name}", total, budget,
                              json=True, kind="response")
    return total


def sample_image(seed: int = 0, size: tuple[int, int] = (96, 128), fmt: str = "JPEG", mode: str = "RGB") -> bytes:
    """A small encoded test image (noise with a bright block, so a detector has something to see)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    h, w = size
    pixels = (rng.random((h, w, 3)) * 80).astype(np.uint8)
    pixels[h // 4: h // 2, w // 4: w // 2] = (250, 30, 30)
    image = Image.fromarray(pixels).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def good_array(view: ModelView, batch: int = 1, seed: int = 0, json: bool = False) -> np.ndarray:
    """A good input of `batch` items (within the request bound, else RequestTooLarge); `json`: it will
    be sent as JSON, which costs more per value than its binary bytes."""
    shape = view.concrete_shape(batch)
    if view.input.datatype != "BYTES":
        view.check_size(shape, json=json)
    if view.role == "image":
        if view.input.datatype == "UINT8":  # file bytes as numbers: every item the same length, so one image
            data = view.encode(sample_image(seed))
            return np.broadcast_to(data, tuple(shape[:-1]) + (len(data),)).copy()
        items = [view.encode(sample_image(seed + i)) for i in range(int(np.prod(shape)))]
        return np.array(items, dtype=np.object_).reshape(shape)
    rng = np.random.default_rng(seed)
    dtype = {"FP32": np.float32, "FP16": np.float16, "UINT8": np.uint8}[view.input.datatype]
    if dtype is np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape).astype(dtype)


def discover(http_endpoint: str, timeout: float = 10.0, repository=None, imgsz: int | None = None,
             manifest=None) -> list[ModelView]:
    """Every READY model version the server serves, as views (metadata + max_batch_size from config, the
    layout from the served config and `manifest`'s [layout.NAME]), each tensor input sized by
    harness.repository.sizing from the served configs (ensembles included), the ONNX graphs in
    `repository` when given, and a declared `imgsz`."""
    from harness.repository.config import from_json
    from harness.vision.served import model_imgsz

    base = f"http://{http_endpoint}"
    index = requests.post(f"{base}/v2/repository/index", json={"ready": True}, timeout=timeout).json()
    metas, configs = {}, {}
    for name in sorted({entry["name"] for entry in index}):
        metas[name] = requests.get(f"{base}/v2/models/{name}", timeout=timeout).json()
        configs[name] = requests.get(f"{base}/v2/models/{name}/config", timeout=timeout).json()
    parsed = {}
    for name, config in configs.items():
        try:
            parsed[name] = from_json(config)
        except Exception:  # a config the protobuf cannot read: sized by the rules that need none
            pass
    sizer = sizing.Sizer(parsed, repository, imgsz)
    views = []
    for name, meta in metas.items():
        ports = lambda items: tuple(Port(p["name"], p["datatype"], tuple(int(d) for d in p["shape"])) for p in items)
        inputs = ports(meta.get("inputs", []))
        layout = read_layout(parsed[name], manifest.layout(name) if manifest is not None else None, name) \
            if name in parsed else None
        image = layout.input.name if layout is not None and layout.input is not None else (inputs[0].name if inputs else None)
        datatype = next((p.datatype for p in inputs if p.name == image), "BYTES")
        size = None
        if image is not None and datatype != "BYTES" and name in parsed:
            try:
                size = sizer.input_size(name, image)
            except Exception:  # sizing is advice: the fallback rules still bound the request
                size = None
        imgsz = model_imgsz(parsed[name], parsed) if layout is not None and layout.extras else None
        views.append(ModelView(name, tuple(meta.get("versions", ())), inputs,
                               ports(meta.get("outputs", [])), int(configs[name].get("max_batch_size", 0)),
                               meta.get("platform", ""), size, layout, parsed.get(name), imgsz))
    return views


def image_request(view: ModelView, items: list[bytes], **parameters) -> Request:
    """One request carrying these encoded images in the image model's input (as it takes them: bytes,
    base64, or UINT8 file bytes, where the items must be one image or of one length)."""
    if view.input.datatype == "UINT8":
        rows = [view.encode(item) for item in items]
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"{view.name}: UINT8 file bytes of different lengths cannot share one request")
        array = np.stack(rows) if view.batched else rows[0]
        return Request(view.name, (Tensor.of(view.input.name, array), *view.extra_tensors(len(items), items)),
                       parameters=parameters)
    tensor = bytes_tensor(view.input.name, [view.encode(item) for item in items])
    if not view.batched:
        tensor = Tensor(tensor.name, tensor.datatype, (len(items),), tensor.data)
    return Request(view.name, (tensor, *view.extra_tensors(len(items), items)), parameters=parameters)
