"""A stand-in for the few cv2 calls harness.vision and harness.load make (resize INTER_LINEAR,
copyMakeBorder BORDER_CONSTANT, imencode), for the GPU machine only: benchmarks/gpu_env.sh installs it
into its numpy-1.26 venv ONLY when that machine's own opencv-python cannot import beside numpy 1.26
(the Python backend stub needs numpy < 2, see shared/PLATFORM.md). Every probe's JSON records which cv2
ran (`card.cv2_fallback`, benchmarks/probes/card.py).

resize is bilinear with half-pixel centres and edge clamping, cv2.INTER_LINEAR's sampling (no
antialiasing), computed in float32 and rounded; cv2 rounds through 11-bit fixed point, so pixels can
differ by 1. The served model and the local reference use the same stand-in on that machine, so
served-vs-local comparisons stay exact; comparisons against CPU-machine numbers are not pixel-exact."""

from __future__ import annotations

import io

import numpy as np

__version__ = "0.0-yts-fallback"
IS_YTS_FALLBACK = True
INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA = 0, 1, 2, 3
BORDER_CONSTANT = 0


def _axis(src: int, dst: int):
    scale = src / dst
    pos = (np.arange(dst, dtype=np.float64) + 0.5) * scale - 0.5
    pos = np.clip(pos, 0, None)
    i0 = np.minimum(np.floor(pos).astype(np.intp), src - 1)
    i1 = np.minimum(i0 + 1, src - 1)
    frac = (pos - i0).astype(np.float32)
    frac[i0 == src - 1] = 0.0
    return i0, i1, frac


def resize(image, dsize, interpolation=INTER_LINEAR, **_):
    if interpolation != INTER_LINEAR:
        raise NotImplementedError("the yts cv2 fallback implements INTER_LINEAR only")
    image = np.asarray(image)
    nw, nh = int(dsize[0]), int(dsize[1])
    h, w = image.shape[:2]
    y0, y1, fy = _axis(h, nh)
    x0, x1, fx = _axis(w, nw)
    img = image.astype(np.float32)
    shape = (-1, 1) + (1,) * (img.ndim - 2)
    rows = img[y0] * (1 - fy.reshape(shape)) + img[y1] * fy.reshape(shape)
    shape = (1, -1) + (1,) * (img.ndim - 2)
    out = rows[:, x0] * (1 - fx.reshape(shape)) + rows[:, x1] * fx.reshape(shape)
    if image.dtype == np.uint8:
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return out.astype(image.dtype)


def copyMakeBorder(src, top, bottom, left, right, borderType, value=None, **_):  # noqa: N802 - cv2's name
    if borderType != BORDER_CONSTANT:
        raise NotImplementedError("the yts cv2 fallback implements BORDER_CONSTANT only")
    src = np.asarray(src)
    h, w = src.shape[:2]
    out = np.empty((h + top + bottom, w + left + right) + src.shape[2:], dtype=src.dtype)
    fill = np.asarray(value if value is not None else 0, dtype=np.float64).reshape(-1)
    channels = src.shape[2] if src.ndim == 3 else 1
    out[...] = (fill[:channels] if fill.size >= channels else fill[0]).astype(src.dtype)
    out[top:top + h, left:left + w] = src
    return out


def imencode(ext, image, params=None):
    from PIL import Image

    fmt = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}[ext.lower()]
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image)[..., ::-1]).save(buffer, format=fmt)  # cv2 images are BGR
    return True, np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def __getattr__(name):
    raise AttributeError(f"cv2.{name}: not in the yts cv2 fallback (benchmarks/cv2_fallback), only resize/copyMakeBorder/imencode")
