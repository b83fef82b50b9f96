"""End-to-end detectors in a model repository, found from their ModelConfig, and the one client for them.

An end-to-end detector is any model whose layout (harness.repository.layouts) pairs an image input
(encoded or base64 images, decoded UINT8 pixels, or a letterboxed tensor) with a detections output (rows
[max_det, 6], NMS-inside outputs, declared JSON): that is all a black-box check may assume, so the checks
work on any repository, not only the reference one. The client sends each image the way the input wants
it (the encoded bytes; their base64; the pixels of the reference decode; the reference letterbox's
tensor) and reads the answer back into rows [k, 6] in source pixels (harness.vision.detections). Inputs
beside the image that the owner declared ([inputs.NAME], harness.repository.extra_inputs) travel with
every image, with the values of that image.

The geometry a check needs (model input size, largest stride) comes from the config too: a tensor
input's own dims, else an `imgsz` parameter on the model, else on one of its ensemble steps, else the
square input of a raw-tensor model the ensemble calls; the stride from a `stride` parameter, else YOLOv8's 32."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tritonclient.utils import np_to_triton_dtype

from harness.checks.model import completed_config
from harness.repository.config import CONFIG_NAME
from harness.repository.layouts import BASE64, ENCODED, PIXELS, ROLE_E2E, TENSOR, Layout, read_layout

DEFAULT_STRIDE = 32  # YOLOv8's largest detection stride (P5)
DEFAULT_IMGSZ = 640  # a tensor input with -1 sides and no imgsz parameter: YOLO's export size


@dataclass(frozen=True)
class EndToEndModel:
    """What a client needs to call one end-to-end detector and interpret its answer."""

    name: str
    input_name: str
    input_shape: tuple[int, ...]  # request shape for one encoded image (batch dim included when batched)
    detections: str  # the output holding the boxes (rows, NMS boxes, JSON text)
    count: str | None
    imgsz: tuple[int, int] | None  # (h, w) of the model input canvas, when the config states it
    stride: int
    layout: Layout | None = None

    def describe(self) -> str:
        size = f"{self.imgsz[0]}x{self.imgsz[1]}" if self.imgsz else "input size unknown"
        return f"{self.name} ({self.input_name} -> {self.detections}, {size}, stride {self.stride})"


@dataclass(frozen=True)
class Answer:
    """One image's answer as the model gave it: its outputs, the letterbox the client applied (tensor
    inputs) and the source image's (h, w) where it was needed; decoding it is a separate step, so a check
    can decode the same answer under another box format (harness.accuracy.box_mixups)."""

    outputs: dict
    meta: object = None  # LetterboxMeta
    source: tuple[int, int] | None = None


def _parameter(config, key: str) -> str | None:
    return config.parameters[key].string_value if key in config.parameters else None


def model_imgsz(config, configs: dict) -> tuple[int, int] | None:
    """(h, w) of the model input canvas: its `imgsz` parameter, else an ensemble step's, else a step's tensor input."""
    value = _parameter(config, "imgsz")
    if value:
        sides = [int(v) for v in value.replace("x", ",").split(",") if v.strip()]
        return (sides[0], sides[-1])
    for step in config.ensemble_scheduling.step:
        other = configs.get(step.model_name)
        if other is None:
            continue
        if _parameter(other, "imgsz"):
            return model_imgsz(other, configs)
        size = read_layout(other).input
        if size is not None and size.imgsz is not None:
            return size.imgsz
    return None


def end_to_end_model(config, configs: dict | None = None, manifest=None) -> EndToEndModel | None:
    """The model as an end-to-end detector, or None when its layout is not one (declared layouts count)."""
    name = config.name
    layout = read_layout(config, manifest.layout(name) if manifest is not None else None)
    if layout.role != ROLE_E2E:
        return None
    dims = [1 if d < 0 else int(d) for d in layout.input.port.dims] or [1]
    shape = ([1] if config.max_batch_size > 0 else []) + dims
    stride = int(_parameter(config, "stride") or DEFAULT_STRIDE)
    imgsz = layout.input.imgsz or model_imgsz(config, configs or {})
    return EndToEndModel(name, layout.input.name, tuple(shape), layout.output.primary, layout.output.count, imgsz,
                         stride, layout)


def end_to_end_models(repository: Path, manifest=None) -> list[EndToEndModel]:
    """Every end-to-end detector in `repository`, by name; `manifest` adds what its owner declared."""
    configs = {}
    for model_dir in sorted(p for p in Path(repository).iterdir() if (p / CONFIG_NAME).is_file()):
        config = completed_config(model_dir)
        if not config.name:
            config.name = model_dir.name
        configs[config.name] = config
    found = [end_to_end_model(config, configs, manifest) for config in configs.values()]
    return [model for model in found if model is not None]


def _protocol(client):
    module = type(client).__module__
    if module.startswith("tritonclient.http"):
        import tritonclient.http as protocol
    elif module.startswith("tritonclient.grpc"):
        import tritonclient.grpc as protocol
    else:
        raise TypeError(f"{type(client).__name__}: not a tritonclient HTTP or gRPC client")
    return protocol


class EndToEndClient:
    """detect(encoded) -> rows [k, 6] in source pixels, over tritonclient's HTTP or gRPC client."""

    def __init__(self, client, model: EndToEndModel):
        self.client, self.model = client, model
        self.protocol = _protocol(client)
        self.layout = model.layout if model.layout is not None else _legacy_layout(model)

    def _batched(self, array: np.ndarray) -> np.ndarray:
        """One item as a request: with the batch dim when batched, or when the config writes it ([1, H, W, 3])."""
        name = self.layout.input.name
        declared = next((p.dims for p in self.layout.inputs if p.name == name), self.layout.input.port.dims)
        return array[None] if self.layout.batched or len(declared) > array.ndim else array

    def request(self, encoded: bytes):
        """(the input array and its wire datatype, the letterbox applied here or None, the source (h, w))."""
        from harness.vision.image import decode_image_bytes
        from harness.vision.letterbox import LETTERBOX

        kind, port = self.layout.input.kind, self.layout.input.port
        if kind in (ENCODED, BASE64) and port.datatype == "BYTES":
            item = base64.b64encode(encoded) if kind == BASE64 else encoded
            return np.array([item], dtype=np.object_).reshape(self.model.input_shape), "BYTES", None, None
        if kind == ENCODED:  # UINT8 [-1]: the file's bytes
            return self._batched(np.frombuffer(encoded, dtype=np.uint8).copy()), "UINT8", None, None
        pixels = decode_image_bytes(encoded)
        if kind == PIXELS:
            return self._batched(pixels), "UINT8", None, pixels.shape[:2]
        if kind == TENSOR:
            tensor, meta = LETTERBOX(pixels, self.model.imgsz or (DEFAULT_IMGSZ, DEFAULT_IMGSZ))
            dtype = np.float16 if port.datatype == "FP16" else np.float32
            return self._batched(tensor.astype(dtype)), port.datatype, meta, pixels.shape[:2]
        raise ValueError(f"{self.model.name}: input kind {kind!r}")

    def extras(self, encoded: bytes, source: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
        """The inputs beside the image that the owner declared ([inputs.NAME]), with this image's values, as one
        request carries them (batch dim included when batched); `source`: its (h, w) where already decoded."""
        if not self.layout.extras:
            return {}
        from harness.vision.image import decode_image_bytes

        source = source or decode_image_bytes(encoded).shape[:2]
        values = self.layout.extra_values(source, self.model.imgsz or DEFAULT_IMGSZ)
        return {name: value[None] if self.layout.batched else value for name, value in values.items()}

    def answer(self, encoded: bytes) -> Answer:
        from harness.vision.image import decode_image_bytes

        array, datatype, meta, source = self.request(encoded)
        infer_inputs = []
        for name, value in {self.model.input_name: array, **self.extras(encoded, source)}.items():
            infer_inputs.append(self.protocol.InferInput(name, list(value.shape), datatype if name == self.model.input_name
                                                         else np_to_triton_dtype(value.dtype)))
            infer_inputs[-1].set_data_from_numpy(value)
        names = self.layout.output.read
        response = self.client.infer(self.model.name, infer_inputs,
                                     outputs=[self.protocol.InferRequestedOutput(n) for n in names])
        outputs = {n: response.as_numpy(n) for n in names}
        if source is None and self.layout.output.box_units == "normalized":
            source = decode_image_bytes(encoded).shape[:2]  # fractions of the source image: its size is needed
        return Answer(outputs, meta, source)

    def decode(self, answer: Answer, output=None) -> np.ndarray:
        """Rows [k, 6] in source pixels, by the model's output layout or another (`output`)."""
        from harness.vision.detections import to_source_rows

        return to_source_rows(output or self.layout.output, answer.outputs, answer.source, answer.meta).astype(np.float64)

    def detect(self, encoded: bytes) -> np.ndarray:
        return self.decode(self.answer(encoded))


def _legacy_layout(model: EndToEndModel) -> Layout:
    """A layout for an EndToEndModel written by hand (encoded images in, rows + count out)."""
    from harness.repository.layouts import ROWS, InputLayout, OutputLayout, Port

    names = {"rows": model.detections, **({"count": model.count} if model.count else {})}
    port = Port(model.input_name, "BYTES", tuple(model.input_shape[1:]))
    return Layout(model.name, InputLayout(ENCODED, port), OutputLayout(ROWS, names), batched=len(model.input_shape) > 1,
                  inputs=(port,))
