"""Encoded images -> [3, h, w] uint8 RGB tensors on the device, nvJPEG for plain JPEGs. nvJPEG's pixels
are not libjpeg-turbo's (its 4:2:0 chroma upsampling differs by up to 120 grey levels at coloured edges,
measured on the H200): the accuracy suite judges that decoder apart (test_jpeg_decoding).

Every image's header is read by PIL first (cheap: no pixels decoded), so the pixel limit and the error
messages are harness.vision.image's. Plain baseline/progressive RGB JPEGs that end in their EOI marker
and carry no EXIF rotation go to torchvision's batched GPU decoder; everything else — PNG, grayscale,
CMYK, rotated, truncated, or a JPEG nvJPEG refuses — is decoded by the reference CPU decoder (which
also raises its ValueError for what is broken) and uploaded. Without torchvision every image takes that
path; `gpu_decoder` says which is in use."""

from __future__ import annotations

import io
import warnings
from typing import Sequence

import numpy as np
import torch
from PIL import Image

from harness.vision.image import DEFAULT_MAX_PIXELS, decode_image_bytes

ORIENTATION = 0x0112  # EXIF tag
JPEG_ONLY = ("JPEG",)

try:
    from torchvision.io import ImageReadMode, decode_jpeg
except Exception:  # noqa: BLE001 -- torchvision missing or built for another torch: CPU decode
    decode_jpeg = None


def gpu_decoder() -> str:
    return "nvjpeg (torchvision.io.decode_jpeg)" if decode_jpeg is not None else "PIL on CPU (torchvision not importable)"


def _nvjpeg_ok(data: bytes, max_pixels: int) -> bool:
    """True for what nvJPEG decodes: a plain RGB JPEG, complete, not rotated by EXIF, within the pixel limit."""
    if decode_jpeg is None or len(data) < 4 or data[:2] != b"\xff\xd8" or not data.rstrip(b"\x00")[-2:] == b"\xff\xd9":
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            image = Image.open(io.BytesIO(data), formats=JPEG_ONLY)  # the SOI marker is checked: no other plugin asked
            w, h = image.size
            return (image.mode == "RGB" and 0 < w * h <= max_pixels
                    and image.getexif().get(ORIENTATION, 1) == 1)
        except Exception:  # noqa: BLE001 -- the CPU decoder says what is wrong
            return False


def _upload(data: bytes, device: str, max_pixels: int) -> torch.Tensor:
    array = decode_image_bytes(data, max_pixels)
    return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))).to(device, non_blocking=True)


def decode_images(blobs: Sequence[bytes], device: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> list:
    """One entry per blob: a [3, h, w] uint8 RGB tensor on `device`, or the ValueError that names what
    is wrong with that image (a bad image never fails the others)."""
    out: list = [None] * len(blobs)
    jpegs = [i for i, blob in enumerate(blobs) if _nvjpeg_ok(blob, max_pixels)]
    if jpegs:
        data = [torch.frombuffer(bytearray(blobs[i]), dtype=torch.uint8) for i in jpegs]
        try:
            decoded = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
        except RuntimeError:  # one image nvJPEG refuses fails the batch call: decode the rest one by one
            decoded = []
            for tensor in data:
                try:
                    decoded.append(decode_jpeg(tensor, mode=ImageReadMode.RGB, device=device))
                except RuntimeError:
                    decoded.append(None)
        for i, tensor in zip(jpegs, decoded):
            out[i] = tensor
    for i, blob in enumerate(blobs):
        if out[i] is None:
            try:
                out[i] = _upload(blob, device, max_pixels)
            except ValueError as error:
                out[i] = error
    return out
