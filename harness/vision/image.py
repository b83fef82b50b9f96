"""Encoded image bytes -> HWC uint8 RGB, the way the end-to-end model receives its requests.

PIL decodes; EXIF orientation is applied (cv2.imread, which ultralytics uses, does the same by
default); grayscale, palette, CMYK and RGBA become RGB (alpha dropped, as cv2.imread does), 16-bit
grayscale keeps its high byte (as cv2.imread does; PIL's own convert would clip it to white). Every
failure is a ValueError that says what was wrong, and the pixel count is checked from the header,
before any decoding, so a decompression bomb costs no memory.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

DEFAULT_MAX_PIXELS = 8192 * 8192  # an 8K frame (7680 x 4320) with room to spare


def decode_image_bytes(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Encoded bytes (JPEG, PNG, BMP, WebP, ...) -> [h, w, 3] uint8 RGB."""
    if data is None or len(data) == 0:
        raise ValueError("image bytes are empty")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(bytes(data)))
        except UnidentifiedImageError as error:
            raise ValueError(f"not a recognised image format ({len(data)} bytes, starts {bytes(data[:8])!r})") from error
        except Image.DecompressionBombError as error:
            raise ValueError(f"image header declares too many pixels: {error}") from error
        except (OSError, SyntaxError) as error:  # e.g. a JPEG cut inside its headers
            raise ValueError(f"image header is truncated or corrupt ({len(data)} bytes): {error}") from error
        w, h = image.size
        if w * h > max_pixels:
            raise ValueError(f"image header declares {w}x{h} = {w * h} pixels, above the limit of {max_pixels}")
        if w < 1 or h < 1:
            raise ValueError(f"image header declares an empty image {w}x{h}")
        try:
            image.load()
            image = ImageOps.exif_transpose(image)
        except (OSError, SyntaxError, ValueError) as error:
            raise ValueError(f"image data is truncated or corrupt ({image.format} {w}x{h}): {error}") from error
    if image.mode in ("I;16", "I;16L", "I;16B", "I"):  # 16-bit gray: scale to 8 bits, never clip
        image = Image.fromarray((np.asarray(image, dtype=np.uint32) >> 8).astype(np.uint8), "L")
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image, dtype=np.uint8)
