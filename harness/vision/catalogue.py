"""Client inputs as clients really send them: a small catalogue of encoded images, generated on demand from
the evaluation set's images (objects the reference detector finds), each with the pixels a correct decoder
must see and the pixels the usual decoding mistakes see instead.

The decoding contract (suites/letterbox/README.md, "Client inputs"): the image a deployment must detect on is
the decoded, EXIF-transposed, RGB image as PIL gives it with ImageOps.exif_transpose and convert("RGB") --
alpha dropped, grayscale repeated, CMYK converted, 16-bit samples reduced to their high byte
(harness.vision.image.decode_image_bytes). Each entry is judged by detections: the reference pipeline run on
those pixels says which objects are there and where; a served answer that misses them is compared with the
reference's answer on each mistake's pixels, so the failure can name the mistake it looks like. Entries with
partial alpha are `gated`: a treatment of alpha that keeps the objects (an un-premultiplied image still shows
them) moves boxes and scores, so their answer is held to the precision's box gates against the reference's
answer on the same decoded pixels, and the mistakes are the other treatments of alpha (harness.vision.client_inputs)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np
from PIL import Image, ImageOps

from harness import paths
from harness.vision.image import decode_image_bytes

EVAL_IMAGES = paths.FIXTURES / "shapes_eval" / "images"
SOURCE = "day_00004.jpg"  # 320 x 240, three objects the reference finds at 0.90+: not square, so a rotation shows
LARGE_SOURCE = "day_00006.jpg"  # 640 x 480, four objects; stays detectable at 32 x 20 and at 4000 x 3000
WIDE_SOURCE = "day_00001.jpg"  # 1280 x 320, a row of objects: two side by side make 10:1
TALL_SOURCE = "day_00002.jpg"  # 96 x 160, portrait: four stacked make 1:10
JPEG_QUALITY = 95
EXIF_ORIENTATION = 0x0112
# What exif_transpose does for each tag (the EXIF 2.3 meaning); the stored pixels are its inverse applied
# to the upright image, so that a correct decoder displays the upright image again.
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}
INVERSE = {**{k: v for k, v in TRANSPOSE.items() if k not in (6, 8)},
           6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}
ORIENTATION_WORDS = {1: "normal", 2: "mirrored", 3: "rotated 180", 4: "flipped vertically", 5: "transposed",
                     6: "rotated 90 CW", 7: "transversed", 8: "rotated 90 CCW"}


@dataclass(frozen=True)
class Entry:
    """One client input: its bytes, and `mistakes` (cause -> the pixels a decoder making it would see)."""

    name: str
    what: str
    encoded: bytes
    encoding_specific: bool  # only a model that decodes the bytes itself can get it wrong
    mistakes: dict[str, Callable[[], np.ndarray]] = field(default_factory=dict)
    gated: bool = False  # judged box for box within the precision's gates, not by objects found (lossless PNG)

    def displayed(self) -> np.ndarray:
        """The pixels the decoding contract gives: what every deployment must detect on."""
        return decode_image_bytes(self.encoded)


def _source(name: str) -> Image.Image:
    return Image.open(EVAL_IMAGES / name).convert("RGB")


def _save(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def _stored(encoded: bytes) -> np.ndarray:
    """The pixels as stored, EXIF orientation ignored (the orientation-blind decoder)."""
    return np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"))


def _raw_channels(encoded: bytes) -> np.ndarray:
    """The file's samples as they come, gray repeated and cut to three channels, cast to 8 bits: what
    `np.asarray(Image.open(f))[..., :3]` feeds a model (CMYK's C, M, Y as R, G, B; 16-bit's low byte)."""
    samples = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(encoded))))
    if samples.ndim == 2:
        samples = np.repeat(samples[..., None], 3, axis=-1)
    return (samples[..., :3].astype(np.int64) & 0xFF).astype(np.uint8)


def _exif_entries() -> list[Entry]:
    upright = _source(SOURCE)
    entries = []
    for tag in range(1, 9):
        stored = upright.transpose(INVERSE[tag]) if tag in INVERSE else upright
        exif = Image.Exif()
        exif[EXIF_ORIENTATION] = tag
        encoded = _save(stored, "JPEG", quality=JPEG_QUALITY, exif=exif.tobytes())
        mistakes = {} if tag == 1 else {
            "boxes match the stored (unrotated) pixels -- the deployment ignores EXIF orientation":
                lambda encoded=encoded: _stored(encoded)}
        entries.append(Entry(f"exif-{tag}", f"JPEG {stored.width}x{stored.height} stored {ORIENTATION_WORDS[tag]}"
                             f" (EXIF orientation {tag}), displayed {upright.width}x{upright.height}",
                             encoded, True, mistakes))
    return entries


def _gradient(size: tuple[int, int]) -> Image.Image:
    """A horizontal gradient from transparent to opaque: a decoder that composites alpha sees a different image."""
    w, h = size
    return Image.fromarray(np.broadcast_to(np.linspace(0, 255, w).astype(np.uint8), (h, w)).copy(), "L")


def _half(size: tuple[int, int]) -> Image.Image:
    """Alpha 128 everywhere: every pixel half transparent, where treatments of alpha differ most evenly."""
    return Image.new("L", size, 128)


def _straight(encoded: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The file's colour (gray repeated) and its alpha in [0, 1], as floats: PNG stores colour not premultiplied."""
    image = Image.open(io.BytesIO(encoded))
    colour = np.asarray(image.convert("RGB"), np.float64)
    return colour, np.asarray(image.getchannel("A"), np.float64)[..., None] / 255


def _treated(encoded: bytes, how: str) -> np.ndarray:
    """The pixels a decoder that treats alpha `how` gives: "black" / "white" composite the colour over that
    background (black is what premultiplying gives), "unpremultiplied" divides the colour by alpha (reads
    the stored colour as premultiplied; alpha 0 stays black), clipped to 255."""
    colour, alpha = _straight(encoded)
    if how == "black":
        out = colour * alpha
    elif how == "white":
        out = colour * alpha + 255 * (1 - alpha)
    elif how == "unpremultiplied":
        out = np.divide(colour, alpha, out=np.zeros_like(colour), where=alpha > 0)
    else:
        raise ValueError(f"unknown treatment of alpha {how!r}")
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


ALPHA_TREATMENTS = {  # how -> what a failure calls it (a gated entry's mistakes, harness.vision.client_inputs)
    "black": "composited over black by its alpha (premultiplied colour)",
    "white": "composited over white by its alpha",
    "unpremultiplied": "un-premultiplied (colour divided by alpha, clipped to 255)",
}
ALPHA_DROPPED = 'alpha dropped, colour as stored (PIL\'s convert("RGB"))'  # the contract's treatment


def _alpha_entries(rgb: Image.Image) -> list[Entry]:
    """RGBA and LA PNG with a 0..255 gradient and a constant 50 % alpha, gated; the mistakes are the other treatments."""
    gray = rgb.convert("L")
    entries = []
    for name, base, what in (("gray-LA", gray, "grayscale + alpha PNG (mode LA, "), ("rgba", rgb, "RGBA PNG (")):
        for suffix, alpha, spread in (("", _gradient, "alpha 0..255 left to right"), ("-half", _half, "alpha 128")):
            image = base.copy()
            image.putalpha(alpha(base.size))
            encoded = _save(image, "PNG")
            mistakes = {words: (lambda e=encoded, how=how: _treated(e, how)) for how, words in ALPHA_TREATMENTS.items()}
            entries.append(Entry(name + suffix, f"{what}{spread})", encoded, True, mistakes, gated=True))
    return entries


def _channel_entries() -> list[Entry]:
    rgb = _source(SOURCE)
    gray = rgb.convert("L")
    # 16-bit: the 8-bit gray in the high byte, a deterministic pattern in the low byte (a real sensor's detail)
    low = np.random.default_rng(16).integers(0, 256, size=gray.size[::-1], dtype=np.uint16)
    deep = Image.fromarray((np.asarray(gray).astype(np.uint16) << 8) | low)
    cmyk = rgb.convert("CMYK")

    raw = "boxes match the file's samples fed as they are stored"
    entries = [
        ("gray-L", "grayscale PNG (mode L)", _save(gray, "PNG"), {}),
        ("png-16bit", "16-bit grayscale PNG (mode I;16)", _save(deep, "PNG"),
         {f"{raw}: 16-bit samples cast to 8 bits (their low byte) instead of scaled (their high byte)": _raw_channels,
          "boxes match 16-bit samples clipped to 255 (a plain convert) instead of scaled (their high byte)":
              lambda encoded: np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"))}),
        ("cmyk", "CMYK JPEG", _save(cmyk, "JPEG", quality=JPEG_QUALITY),
         {f"{raw}: C, M, Y read as R, G, B (CMYK not converted)": _raw_channels}),
    ]
    built = [Entry(name, what, encoded, True, {cause: (lambda f=f, e=encoded: f(e)) for cause, f in mistakes.items()})
             for name, what, encoded, mistakes in entries]
    return built[:1] + _alpha_entries(rgb) + built[1:]  # gray, its alpha forms and RGBA's, then the rest


def _tiled(name: str, size: tuple[int, int], copies: int, axis: int) -> Image.Image:
    """`copies` of an eval image, each resized to `size`, side by side (axis 1) or stacked (axis 0)."""
    tile = np.asarray(_source(name).resize(size, Image.Resampling.BILINEAR))
    return Image.fromarray(np.concatenate([tile] * copies, axis=axis))


def _size_entries() -> list[Entry]:
    """Sizes and aspects: not about decoding, so a model fed decoded pixels is judged on them too. PNG, so
    every decoder sees the same pixels."""
    small = _source(LARGE_SOURCE).resize((32, 20), Image.Resampling.BILINEAR)
    large = _source(LARGE_SOURCE).resize((4000, 3000), Image.Resampling.BICUBIC)
    wide = _tiled(WIDE_SOURCE, (1000, 200), 2, axis=1)
    tall = _tiled(TALL_SOURCE, (200, 500), 4, axis=0)
    return [
        Entry("small-32x20", "32x20 PNG (upscaled 20x by the letterbox)", _save(small, "PNG"), False),
        Entry("large-4000x3000", "4000x3000 JPEG (12 Mpx)", _save(large, "JPEG", quality=JPEG_QUALITY), False),
        Entry("wide-2000x200", "2000x200 PNG (10:1)", _save(wide, "PNG"), False),
        Entry("tall-200x2000", "200x2000 PNG (1:10)", _save(tall, "PNG"), False),
    ]


@lru_cache(maxsize=1)
def catalogue() -> tuple[Entry, ...]:
    """Every entry, built once per process (~1 s; nothing is stored on disk)."""
    return tuple(_exif_entries() + _channel_entries() + _size_entries())


def entry(name: str) -> Entry:
    found = {e.name: e for e in catalogue()}
    if name not in found:
        raise KeyError(f"no catalogue entry {name!r}; have {sorted(found)}")
    return found[name]


NAMES = ("exif-1", "exif-2", "exif-3", "exif-4", "exif-5", "exif-6", "exif-7", "exif-8", "gray-L", "gray-LA",
         "gray-LA-half", "rgba", "rgba-half", "png-16bit", "cmyk", "small-32x20", "large-4000x3000", "wide-2000x200",
         "tall-200x2000")
