"""Image bytes decoding: every format and mode becomes HWC uint8 RGB, and every bad input is a
ValueError saying what was wrong, a decompression bomb refused from its header."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from harness.vision.image import decode_image_bytes


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def test_png_round_trip_is_exact_rgb():
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    decoded = decode_image_bytes(encode(Image.fromarray(pixels)))
    assert decoded.dtype == np.uint8 and decoded.shape == (5, 7, 3)
    np.testing.assert_array_equal(decoded, pixels)


@pytest.mark.parametrize("mode, value, rgb", [("L", 77, (77, 77, 77)), ("RGBA", (10, 20, 30, 0), (10, 20, 30)),
                                              ("P", 0, (0, 0, 0))])
def test_other_modes_become_rgb(mode, value, rgb):
    decoded = decode_image_bytes(encode(Image.new(mode, (4, 3), value)))
    assert decoded.shape == (3, 4, 3)
    assert tuple(decoded[0, 0]) == rgb


def test_jpeg_decodes():
    decoded = decode_image_bytes(encode(Image.new("RGB", (16, 8), (200, 100, 50)), "JPEG"))
    assert decoded.shape == (8, 16, 3) and np.abs(decoded.astype(int) - (200, 100, 50)).max() <= 3


def test_empty_bytes():
    with pytest.raises(ValueError, match="empty"):
        decode_image_bytes(b"")


def test_not_an_image():
    with pytest.raises(ValueError, match="not a recognised image format"):
        decode_image_bytes(b"this is a text file, not a picture")


def test_truncated_png():
    data = encode(Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)))
    with pytest.raises(ValueError, match="truncated or corrupt"):
        decode_image_bytes(data[: len(data) // 2])


def png_header_only(width: int, height: int) -> bytes:
    """A PNG signature and IHDR declaring width x height, with a valid CRC and no pixel data: the
    cheapest decompression bomb, which must be refused without decoding."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


def test_bomb_is_refused_by_its_header():
    with pytest.raises(ValueError, match="pixels"):
        decode_image_bytes(png_header_only(100_000, 100_000))
    with pytest.raises(ValueError, match="above the limit of 5000"):
        decode_image_bytes(png_header_only(100, 100), max_pixels=5000)
