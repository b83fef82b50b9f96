"""Inputs beside the image that no config can say how to fill, declared by the owner as `[inputs.MODEL]`
in yts.toml (harness.repository.manifest): a pre-processing ensemble that takes JPEG bytes plus the
letterbox's affine matrix, a threshold tensor, the original image size. Each entry names one input of the
model and says what it carries:

    [inputs.vendor_pipeline]
    affine = "letterbox_affine"     # per image: [2, 3] source pixels -> model input pixels
    inverse = "letterbox_inverse"   # per image: [2, 3] model input pixels -> source pixels
    orig_size = "image_hw"          # per image: [2] the source image's (height, width)
    threshold = 0.25                # a constant: a number, a list of numbers, or text for a TYPE_STRING input

The per-image transforms are the harness's own letterbox (harness.vision.letterbox) of THAT image at the
model's input size: `letterbox_affine` = [[gx, 0, left], [0, gy, top]] (gx, gy: the resized content's side
over the source's, the ratio r as drawn; left, top: the padding), `letterbox_inverse` its inverse
[[1/gx, 0, -left/gx], [0, 1/gy, -top/gy]], `image_hw` / `image_wh` the source size (EXIF orientation
applied, as the decode shows it). A constant takes its data type and shape from the config (a -1 dim takes
the value's own). Every request the suites send with an image carries these tensors, with the values of
its own image(s); an entry the model's config cannot hold (no such input, a data type or shape that cannot
take the value) is refused at start (ManifestError, raised by the manifest), naming the entry, what the
config expects and what was found."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# transform -> (its shape, what it is)
TRANSFORMS = {
    "letterbox_affine": ((2, 3), "per image: the [2, 3] affine matrix mapping source pixels to the letterboxed model input"),
    "letterbox_inverse": ((2, 3), "per image: the [2, 3] affine matrix mapping model input pixels back to source pixels"),
    "image_hw": ((2,), "per image: the source image's [height, width]"),
    "image_wh": ((2,), "per image: the source image's [width, height]"),
}
FLOATS = ("FP16", "FP32", "FP64", "BF16")
NUMERIC = FLOATS + ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
_NUMPY = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "INT8": np.int8, "INT16": np.int16,
          "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
          "UINT64": np.uint64, "BOOL": np.bool_, "BYTES": np.object_}


@dataclass(frozen=True)
class ExtraInput:
    """One `[inputs.MODEL]` entry: the input's name and either a transform (TRANSFORMS) or a constant."""

    name: str
    transform: str | None = None
    constant: object = None  # a number, a (nested) list of numbers, or text

    def describe(self) -> str:
        return f'{self.name} = "{self.transform}"' if self.transform else f"{self.name} = {self.constant!r}"


def parse_inputs(model: str, table, origin: str) -> tuple[ExtraInput, ...]:
    """An `[inputs.MODEL]` table -> its entries; ValueError naming the entry and why."""
    where = f"{origin}: [inputs.{model}]"
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{where} must be a table of INPUT = a transform ({' | '.join(TRANSFORMS)}) or a constant")
    out = []
    for name, value in table.items():
        if isinstance(value, str) and value in TRANSFORMS:
            out.append(ExtraInput(name, transform=value))
        elif isinstance(value, bool) or not isinstance(value, (int, float, str, list)):
            raise ValueError(f"{where}: {name} = {value!r}: a transform ("
                             f"{'; '.join(f'{t}: {what}' for t, (_, what) in TRANSFORMS.items())}), a number, a list of "
                             "numbers or text")
        else:
            if isinstance(value, list):
                try:
                    array = np.asarray(value)
                except ValueError:
                    array = None
                if array is None or array.dtype.kind not in "iuf":
                    raise ValueError(f"{where}: {name} = {value!r}: a list must hold numbers, in equal rows")
            out.append(ExtraInput(name, constant=value))
    return tuple(out)


def _fits(dims: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape))


def _ranked(value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """`value` with leading 1s up to the rank of `dims` ([2, 3] for dims [1, 2, 3]; a number for [1] or [-1])."""
    extra = len(dims) - value.ndim
    return value.reshape((1,) * extra + value.shape) if extra > 0 else value


def _constant(entry: ExtraInput, datatype: str, dims: tuple[int, ...]) -> np.ndarray:
    """The constant as the config's data type and dims; ValueError saying what cannot hold it."""
    if datatype == "BYTES":
        if not isinstance(entry.constant, str):
            raise ValueError(f"a TYPE_STRING input takes text, not {entry.constant!r}")
        value = np.array([entry.constant.encode()], dtype=np.object_)
    else:
        if isinstance(entry.constant, str):
            raise ValueError(f"a {datatype} input takes numbers, not text {entry.constant!r}")
        value = np.asarray(entry.constant)
        if datatype not in FLOATS and datatype != "BOOL" and not np.all(np.equal(np.mod(value, 1), 0)):
            raise ValueError(f"a {datatype} input holds integers, not {entry.constant!r}")
        dtype = _NUMPY.get(datatype)
        if dtype is None:
            raise ValueError(f"data type {datatype} is not one a constant can fill")
        if np.issubdtype(dtype, np.integer) and not np.all((value >= np.iinfo(dtype).min) & (value <= np.iinfo(dtype).max)):
            raise ValueError(f"{entry.constant!r} is out of {datatype}'s range")
        value = value.astype(dtype)
    if _fits(dims, _ranked(value, dims).shape):
        return _ranked(value, dims)
    if all(d > 0 for d in dims) and value.size == int(np.prod(dims, dtype=np.int64)):
        return value.reshape(dims)
    raise ValueError(f"{value.size} value(s) of shape {list(value.shape)} cannot fill dims {list(dims)}")


def check(model: str, entries: tuple[ExtraInput, ...], ports, origin: str) -> None:
    """Each entry against the model's config inputs (harness.repository.layouts.Port, dims without the
    batch dim): ValueError naming the entry, what the config expects and what was found."""
    by_name = {p.name: p for p in ports}
    for entry in entries:
        where = f"{origin}: [inputs.{model}] {entry.describe()}"
        port = by_name.get(entry.name)
        if port is None:
            raise ValueError(f"{where}: the model has no input {entry.name!r} (its inputs: {[p.describe() for p in ports]})")
        if entry.transform:
            shape = TRANSFORMS[entry.transform][0]
            if port.datatype not in NUMERIC or (entry.transform.startswith("letterbox") and port.datatype not in FLOATS):
                wanted = "a floating-point" if entry.transform.startswith("letterbox") else "a numeric"
                raise ValueError(f"{where}: {entry.transform} needs {wanted} input of dims {list(shape)}; "
                                 f"the config has {port.describe()}")
            if not (_fits(port.dims, shape) or _fits(port.dims, (1,) + shape)):
                raise ValueError(f"{where}: {entry.transform} gives dims {list(shape)}; the config has {port.describe()}")
        else:
            try:
                _constant(entry, port.datatype, port.dims)
            except ValueError as error:
                raise ValueError(f"{where}: the config has {port.describe()}: {error}") from None


def values(entries: tuple[ExtraInput, ...], ports, source_hw: tuple[int, int], imgsz) -> dict[str, np.ndarray]:
    """input name -> its value for one image of `source_hw` (h, w) at the model input size `imgsz`
    (an int or (h, w)), shaped and typed as the config's input (no batch dim)."""
    from harness.vision.letterbox import LETTERBOX

    by_name = {p.name: p for p in ports}
    out = {}
    for entry in entries:
        port = by_name[entry.name]
        if entry.constant is not None:
            out[entry.name] = _constant(entry, port.datatype, port.dims)
            continue
        h, w = int(source_hw[0]), int(source_hw[1])
        if entry.transform == "image_hw":
            value = np.array([h, w], dtype=np.float64)
        elif entry.transform == "image_wh":
            value = np.array([w, h], dtype=np.float64)
        else:
            meta = LETTERBOX.geometry((h, w), imgsz)
            (left, top), (gx, gy) = meta.offset, meta.gain
            forward = np.array([[gx, 0.0, left], [0.0, gy, top]])
            value = forward if entry.transform == "letterbox_affine" else \
                np.array([[1 / gx, 0.0, -left / gx], [0.0, 1 / gy, -top / gy]])
        out[entry.name] = _ranked(value, port.dims).astype(_NUMPY[port.datatype])
    return out


def batch_of(per_image: list[dict[str, np.ndarray]], batched: bool) -> dict[str, np.ndarray]:
    """The values of several images as one request's tensors: stacked on the batch dim when the model
    batches (max_batch_size > 0), else the one image's values as they are."""
    if not per_image:
        return {}
    return {name: np.stack([v[name] for v in per_image]) if batched else per_image[0][name] for name in per_image[0]}


def what_to_declare(model: str, ports) -> str:
    """The `[inputs.MODEL]` lines that would fill `ports` (the inputs the suites cannot infer): the transform
    that fits each one's dims, else a constant of its data type."""
    lines = [f"[inputs.{model}]"]
    for port in ports:
        fitting = [t for t, (shape, _) in TRANSFORMS.items()
                   if port.datatype in NUMERIC and (_fits(port.dims, shape) or _fits(port.dims, (1,) + shape))
                   and (not t.startswith("letterbox") or port.datatype in FLOATS)]
        example = '"text"' if port.datatype == "BYTES" else "0.5" if port.datatype in FLOATS else "1"
        value = f'"{"|".join(fitting)}"' if fitting else f"{example}  # a constant"
        lines.append(f"{port.name} = {value}  # {port.datatype} {list(port.dims)}")
    return "; ".join(lines) + " (letterbox_affine: source pixels -> model input, letterbox_inverse: model input -> " \
        "source pixels, image_hw / image_wh: the source size, per image; or a constant: a number, a list, text)"
