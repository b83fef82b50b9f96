"""Which served model plays which part, read from the server's own metadata and config: a tensor
model (one numeric input, e.g. yolo_raw [N,3,640,640] FP32) or an image model (one BYTES input of
encoded images, e.g. yolo_e2e, yolo_ensemble). Checks are written against these views, so they run on
any repository, and good inputs of the right shape come from here too."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import requests

from harness.protocol.wire import Request, Tensor, bytes_tensor

DYNAMIC_DIM_VALUE = 640  # what a -1 dim of a tensor model's input is filled with (YOLO's usual size)


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

    @property
    def role(self) -> str | None:
        if len(self.inputs) != 1:
            return None
        if self.inputs[0].datatype == "BYTES":
            return "image"
        if self.inputs[0].datatype in ("FP32", "FP16", "UINT8"):
            return "tensor"
        return None

    @property
    def detects(self) -> bool:
        """Returns detection rows ([.., max_det, 6]): the model the detection thresholds are for (not a
        preprocessing step that also takes image bytes)."""
        return any(len(p.shape) >= 2 and p.shape[-1] == 6 for p in self.outputs)

    @property
    def input(self) -> Port:
        return self.inputs[0]

    @property
    def batched(self) -> bool:
        return self.max_batch_size > 0

    def concrete_shape(self, batch: int = 1) -> tuple[int, ...]:
        dims = list(self.input.shape)
        if self.batched:
            dims[0] = batch
        fill = 1 if self.role == "image" else DYNAMIC_DIM_VALUE
        return tuple(fill if d < 0 else d for d in dims)

    def good_request(self, batch: int = 1, seed: int = 0, **parameters) -> Request:
        return Request(self.name, (Tensor.of(self.input.name, good_array(self, batch, seed)),), parameters=parameters)


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


def good_array(view: ModelView, batch: int = 1, seed: int = 0) -> np.ndarray:
    shape = view.concrete_shape(batch)
    if view.role == "image":
        items = [sample_image(seed + i) for i in range(int(np.prod(shape)))]
        return np.array(items, dtype=np.object_).reshape(shape)
    rng = np.random.default_rng(seed)
    dtype = {"FP32": np.float32, "FP16": np.float16, "UINT8": np.uint8}[view.input.datatype]
    if dtype is np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape).astype(dtype)


def discover(http_endpoint: str, timeout: float = 10.0) -> list[ModelView]:
    """Every READY model version the server serves, as views (metadata + max_batch_size from config)."""
    base = f"http://{http_endpoint}"
    index = requests.post(f"{base}/v2/repository/index", json={"ready": True}, timeout=timeout).json()
    views = []
    for name in sorted({entry["name"] for entry in index}):
        meta = requests.get(f"{base}/v2/models/{name}", timeout=timeout).json()
        config = requests.get(f"{base}/v2/models/{name}/config", timeout=timeout).json()
        ports = lambda items: tuple(Port(p["name"], p["datatype"], tuple(int(d) for d in p["shape"])) for p in items)
        views.append(ModelView(name, tuple(meta.get("versions", ())), ports(meta.get("inputs", [])),
                               ports(meta.get("outputs", [])), int(config.get("max_batch_size", 0)),
                               meta.get("platform", "")))
    return views


def image_request(view: ModelView, items: list[bytes], **parameters) -> Request:
    """One request carrying these encoded images in the image model's input."""
    tensor = bytes_tensor(view.input.name, items)
    if not view.batched:
        tensor = Tensor(tensor.name, tensor.datatype, (len(items),), tensor.data)
    return Request(view.name, (tensor,), parameters=parameters)
