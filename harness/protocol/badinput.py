"""The bad-input catalogue, as data: each kind of malformed request, what a conforming deployment
must answer, and what Triton 2.51 was measured to answer (fixtures/protocol/toy_yolo, process
launcher). A request is built from a ModelView, so the catalogue runs on any repository.

Rejected: an error of the client-error class (HTTP 4xx / gRPC INVALID_ARGUMENT, or the listed
statuses) whose message matches `names` (it must name the problem). Handled: a success whose outputs
have the declared names and datatypes (the documented result of inputs that are valid but odd)."""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.protocol.models import ModelView, good_array, image_request, sample_image
from harness.protocol.wire import Request, Tensor

CLIENT_ERROR = {"http": ("400",), "grpc": ("INVALID_ARGUMENT",)}


@dataclass(frozen=True)
class Rejected:
    names: str  # regex, case-insensitive, the message must match
    statuses: dict = field(default_factory=lambda: CLIENT_ERROR)

    def judge(self, answer) -> str | None:
        """None when the answer conforms, else what was wrong."""
        if answer.ok:
            detail = ", ".join(f"{k}={_brief(v)}" for k, v in answer.outputs.items())
            return (f"expected an error naming the problem (/{self.names}/), got a success: {detail}"
                    " — the deployment answers invalid input as if it were valid (errors swallowed)")
        if answer.status not in self.statuses[answer.protocol]:
            return f"expected status {'/'.join(self.statuses[answer.protocol])}, got {answer.status}: {answer.message[:300]}"
        if not re.search(self.names, answer.message, re.IGNORECASE):
            return f"the error does not name the problem (/{self.names}/): {answer.status}: {answer.message[:300]}"
        return None


@dataclass(frozen=True)
class Handled:
    note: str

    def judge(self, answer, view: ModelView) -> str | None:
        if not answer.ok:
            return f"expected a success ({self.note}), got {answer.status}: {answer.message[:300]}"
        declared = {p.name: p.datatype for p in view.outputs}
        missing = sorted(set(declared) - set(answer.outputs))
        if missing:
            return f"success without declared outputs {missing}"
        return None


@dataclass(frozen=True)
class Case:
    name: str
    role: str  # "tensor" | "image"
    build: Callable[[ModelView], Request | None]  # None: does not apply to this model (a skip)
    expect: Rejected | Handled
    triton_answer: str  # measured on Triton 2.51: what the server itself says
    protocols: tuple[str, ...] = ("http", "grpc")


def _brief(value: np.ndarray) -> str:
    flat = np.asarray(value).reshape(-1)
    return f"{list(np.shape(value))} {flat[:4].tolist()}{'...' if flat.size > 4 else ''}"


def _tensor(view: ModelView, array: np.ndarray, datatype: str | None = None, name: str | None = None) -> Request:
    return Request(view.name, (Tensor.of(name or view.input.name, array, datatype),))


def _wrong_dtype(view: ModelView) -> Request:
    x = good_array(view)
    other = np.float64 if view.input.datatype != "FP64" else np.float32
    return _tensor(view, x.astype(other) if view.role == "tensor" else np.zeros(x.shape, np.float32))


def _wrong_dims(view: ModelView) -> Request | None:
    shape = list(view.concrete_shape())
    fixed = [i for i, d in enumerate(view.input.shape) if d > 0 and not (view.batched and i == 0)]
    if not fixed:
        return None
    shape[fixed[0]] += 1
    view.check_size(shape)
    return _tensor(view, np.zeros(shape, good_array(view).dtype))


def _over_batch(view: ModelView) -> Request | None:
    if not view.batched:
        return None
    return _tensor(view, good_array(view, batch=view.max_batch_size + 1))


def _empty_batch(view: ModelView) -> Request | None:
    if not view.batched:
        return None
    view.check_size(view.concrete_shape())  # no data is sent, but the server sizes what it expects from the shape
    shape = (0,) + view.concrete_shape()[1:]
    return Request(view.name, (Tensor(view.input.name, view.input.datatype, shape, b""),))


def _filled(value: float) -> Callable[[ModelView], Request | None]:
    def build(view: ModelView) -> Request | None:
        if view.input.datatype not in ("FP32", "FP16"):
            return None
        x = good_array(view)
        x.reshape(-1)[:: max(1, x.size // 64)] = value  # sprinkled, not a whole tensor: how real data goes bad
        return _tensor(view, x)
    return build


def _unknown_input(view: ModelView) -> Request:
    view.check_size(view.concrete_shape(), tensors=2)  # the input and a stranger of the same size
    x = good_array(view)
    return Request(view.name, (Tensor.of(view.input.name, x), Tensor.of("not_an_input", x)))


def _byte_size(delta: int) -> Callable[[ModelView], Request]:
    def build(view: ModelView) -> Request:
        t = Tensor.of(view.input.name, good_array(view))
        data = t.data[:delta] if delta < 0 else t.data + b"\0" * delta
        return Request(view.name, (Tensor(t.name, t.datatype, t.shape, data),))
    return build


def _json_count_mismatch(view: ModelView) -> Request | None:
    if view.role != "tensor":
        return None
    view.check_size(view.concrete_shape())  # two values are sent; the declared shape is what the server sizes
    body = {"inputs": [{"name": view.input.name, "datatype": view.input.datatype,
                        "shape": list(view.concrete_shape()), "data": [0.5, 0.5]}]}
    return Request(view.name, (), http_body=json.dumps(body).encode())


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR declaring width x height, then a tiny IDAT: what a decompression
    bomb looks like before anyone decodes it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1024)) + chunk(b"IEND", b"")


def _image(data: bytes | Callable[[], bytes], **parameters) -> Callable[[ModelView], Request]:
    return lambda view: image_request(view, [data() if callable(data) else data], **parameters)


def _thresholds(**parameters) -> Callable[[ModelView], Request | None]:
    """A good image with these request parameters, for models that return detections."""
    return lambda view: image_request(view, [sample_image()], **parameters) if view.detects else None


def _length_prefix_lies(view: ModelView) -> Request:
    item = sample_image()
    data = struct.pack("<I", len(item) + 1000) + item
    request = image_request(view, [item])
    t = request.inputs[0]
    return Request(view.name, (Tensor(t.name, t.datatype, t.shape, data),), parameters=request.parameters)


_NAMES_SHAPE = r"shape|dims"
IMAGE_EMPTY = r"empty|no (image )?data|0 bytes|zero"
IMAGE_CORRUPT = r"truncat|corrupt|incomplete|decode|invalid"
IMAGE_NOT_IMAGE = r"not .*image|unrecogni[sz]ed|cannot identify|unknown .*format|decode|invalid image"
IMAGE_TOO_LARGE = r"pixel|too (large|big)|bomb|exceeds|limit"

CATALOGUE: tuple[Case, ...] = (
    # -- any model: validated by Triton itself before the model sees anything ------------------------
    Case("wrong_dtype", "tensor", _wrong_dtype, Rejected(r"data-type|dtype|datatype"),
         "400 / INVALID_ARGUMENT: inference input 'images' data-type is 'FP64', but model 'M' expects 'FP32'"),
    Case("wrong_dtype_image", "image", _wrong_dtype, Rejected(r"data-type|dtype|datatype"),
         "400 / INVALID_ARGUMENT: inference input 'images' data-type is 'FP32', but model 'M' expects 'BYTES'"),
    Case("wrong_rank", "tensor", lambda v: _tensor(v, good_array(v)[0]), Rejected(_NAMES_SHAPE),
         "400 / INVALID_ARGUMENT: unexpected shape for input 'images' ... Expected [-1,3,640,640], got [3,640,640]"),
    Case("wrong_dims", "tensor", _wrong_dims, Rejected(_NAMES_SHAPE),
         "400 / INVALID_ARGUMENT: unexpected shape for input 'images' ... Expected [-1,3,640,640], got [1,4,640,640]"),
    Case("batch_above_max", "tensor", _over_batch, Rejected(r"batch"),
         "400 / INVALID_ARGUMENT: inference request batch-size must be <= MAX for 'M'"),
    Case("batch_above_max_image", "image", _over_batch, Rejected(r"batch"),
         "400 / INVALID_ARGUMENT: inference request batch-size must be <= MAX for 'M'"),
    Case("missing_input", "tensor", lambda v: Request(v.name, ()), Rejected(r"missing|expected \d+ inputs"),
         "400 / INVALID_ARGUMENT: expected 1 inputs but got 0 inputs ... missing required input(s) ['images']"),
    Case("unknown_input", "tensor",
         _unknown_input,
         Rejected(r"not_an_input|unexpected input|unknown input"),
         "400 / INVALID_ARGUMENT: expected 1 inputs but got 2 inputs ... Got input(s) ['not_an_input','images']"),
    Case("unknown_output", "tensor",
         lambda v: Request(v.name, (Tensor.of(v.input.name, good_array(v)),), outputs=("not_an_output",)),
         Rejected(r"not_an_output"), "400 / INVALID_ARGUMENT: unexpected inference output 'not_an_output' for model 'M'"),
    Case("byte_size_short", "tensor", _byte_size(-4), Rejected(r"byte size|byte-size|size mismatch"),
         "400 / INVALID_ARGUMENT: input byte size mismatch for input 'images' ... Expected B, got B-4"),
    Case("byte_size_long", "tensor", _byte_size(4), Rejected(r"byte size|byte-size|size mismatch|unexpected"),
         "400 / INVALID_ARGUMENT: input byte size mismatch for input 'images' ... Expected B, got B+4"),
    Case("empty_batch", "tensor", _empty_batch, Rejected(r"batch|byte size|shape"),
         "400 / INVALID_ARGUMENT: input byte size mismatch ... Expected <one image>, got 0 (Triton reads a 0 batch "
         "as 1; the message names the byte size, not the empty batch)"),
    Case("unknown_version", "tensor", lambda v: Request(v.name, (Tensor.of(v.input.name, good_array(v)),), version="987654"),
         Rejected(r"version", {"http": ("404", "400"), "grpc": ("NOT_FOUND", "INVALID_ARGUMENT")}),
         "404 / NOT_FOUND: Request for unknown model: 'M' version 987654 is not found"),
    Case("malformed_json", "tensor", lambda v: Request(v.name, (), http_body=b'{"inputs": [{"name": '),
         Rejected(r"json|parse", {"http": ("400", "500"), "grpc": ()}),
         "500: failed to parse the request JSON buffer: Invalid value. at N (Triton 2.51 answers a client's "
         "malformed JSON with 500, not 400: accepted here, documented)", protocols=("http",)),
    Case("json_data_count_mismatch", "tensor", _json_count_mismatch,
         Rejected(r"shape|data", {"http": ("400", "500"), "grpc": ()}),
         "500: Unable to parse 'data': Shape does not match true shape of 'data' field (500 in Triton 2.51)",
         protocols=("http",)),
    Case("bytes_length_prefix_lies", "image", _length_prefix_lies, Rejected(r"incomplete|length|string"),
         "400 / INVALID_ARGUMENT: incomplete string data for inference input 'images', expecting string of length L"),
    # -- valid requests with odd values: must not crash the model ------------------------------------
    Case("nan_input", "tensor", _filled(float("nan")), Handled("NaN values are data, not a crash: success"),
         "200 / OK, outputs of the declared shape; NaN propagates into the scores of the cells it touches"),
    Case("inf_input", "tensor", _filled(float("inf")), Handled("Inf values are data, not a crash: success"),
         "200 / OK, outputs of the declared shape"),
    # -- image models: the model's own validation --------------------------------------------------------
    Case("empty_bytes", "image", _image(b""), Rejected(IMAGE_EMPTY), "model-defined; toy: 400 image bytes are empty"),
    Case("truncated_jpeg", "image", _image(lambda: sample_image()[:300]), Rejected(IMAGE_CORRUPT),
         "model-defined; toy: 400 image data is truncated or corrupt (JPEG WxH)"),
    Case("non_image_bytes", "image", _image(b"%PDF-1.7 this is not an image at all"), Rejected(IMAGE_NOT_IMAGE),
         "model-defined; toy: 400 not a recognised image format"),
    Case("decompression_bomb_header", "image", _image(lambda: png_header_only(20000, 20000)), Rejected(IMAGE_TOO_LARGE),
         "model-defined; toy: 400 image header declares too many pixels (checked before decoding)"),
    Case("one_pixel_image", "image", _image(lambda: sample_image(size=(1, 1), fmt="PNG")),
         Handled("a 1x1 image is an image: success"), "200 / OK"),
    Case("grayscale_png", "image", _image(lambda: sample_image(fmt="PNG", mode="L")),
         Handled("grayscale is converted to RGB: success"), "200 / OK"),
    Case("rgba_png", "image", _image(lambda: sample_image(fmt="PNG", mode="RGBA")),
         Handled("alpha is dropped: success"), "200 / OK"),
    Case("negative_conf", "image", _thresholds(conf=-0.5), Rejected(r"conf"),
         "model-defined; toy: 400 request parameter conf=-0.5 must be a number in [0, 1]"),
    Case("conf_not_a_number", "image", _thresholds(conf="high"), Rejected(r"conf"),
         "model-defined; toy: 400 request parameter conf='high' must be a number in [0, 1]"),
    Case("iou_above_one", "image", _thresholds(iou=1.5), Rejected(r"iou"),
         "model-defined; toy: 400 request parameter iou=1.5 must be a number in [0, 1]"),
    Case("max_det_zero", "image", _thresholds(max_det=0), Rejected(r"max_det"),
         "model-defined; toy: 400 request parameter max_det=0 must be an integer in [1, MAX]"),
)

assert len({case.name for case in CATALOGUE}) == len(CATALOGUE), "catalogue names must be unique"
