"""Hypothesis strategies for images, model input sizes and boxes, composed from small named pieces.

Every suite that draws images or boxes takes them from here, so "any size from 1 px to 8K" means the
same thing everywhere. Pixels come from a drawn seed (numpy fills the array), not from hypothesis
byte by byte: an 8K frame is 100 MB, and shrinking a seed is as useful as shrinking pixels.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

MAX_SIDE = 7680  # 8K UHD width
MAX_PIXELS = 7680 * 4320  # one 8K UHD frame, whatever the aspect
STRIDE = 32  # YOLOv8's largest stride: model input sides are multiples of it

# -- sizes --------------------------------------------------------------------------------------
sides = st.integers(min_value=1, max_value=MAX_SIDE)
target_sides = st.integers(min_value=1, max_value=1280 // STRIDE).map(lambda k: k * STRIDE)  # 32..1280
target_shapes = st.tuples(target_sides, target_sides)  # (th, tw) rectangular inputs
strides = st.sampled_from([8, 16, 32, 64])
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def image_sizes(draw, max_side: int = MAX_SIDE, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(h, w): any aspect, odd sides included, from 1 px up to an 8K frame's pixel count."""
    w = draw(st.integers(min_value=1, max_value=max_side))
    h = draw(st.integers(min_value=1, max_value=max(1, min(max_side, max_pixels // w))))
    return h, w


small_image_sizes = image_sizes(max_side=512, max_pixels=512 * 512)

# -- pixels -------------------------------------------------------------------------------------
_TILE = 257  # prime-sized noise tile: large frames repeat it, and no period lines up with a stride


def noise_image(size: tuple[int, int], seed: int) -> np.ndarray:
    """[h, w, 3] uint8 RGB noise from a seed; frames above 1 Mpx tile a noise patch to stay fast."""
    h, w = size
    rng = np.random.default_rng(seed)
    if h * w <= 1 << 20:
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    tile = rng.integers(0, 256, size=(min(h, _TILE), min(w, _TILE), 3), dtype=np.uint8)
    reps = (-(-h // tile.shape[0]), -(-w // tile.shape[1]), 1)
    return np.ascontiguousarray(np.tile(tile, reps)[:h, :w])


def images(sizes: st.SearchStrategy[tuple[int, int]] = image_sizes()) -> st.SearchStrategy[np.ndarray]:
    """HWC uint8 RGB images of the drawn sizes."""
    return st.builds(noise_image, sizes, seeds)


def batches(
    sizes: st.SearchStrategy[tuple[int, int]] = small_image_sizes, max_batch: int = 4
) -> st.SearchStrategy[list[np.ndarray]]:
    """A list of 1..max_batch images, each of its own size (what one request batch can hold)."""
    return st.lists(images(sizes), min_size=1, max_size=max_batch)


# -- boxes --------------------------------------------------------------------------------------
def _span(limit: float) -> st.SearchStrategy[tuple[float, float]]:
    coordinate = st.floats(min_value=0.0, max_value=float(limit), allow_nan=False, allow_infinity=False)
    return st.tuples(coordinate, coordinate).map(sorted).map(tuple)


@st.composite
def boxes_inside(draw, size: tuple[int, int], min_boxes: int = 1, max_boxes: int = 8) -> np.ndarray:
    """[k, 4] float64 x1, y1, x2, y2 boxes with 0 <= x1 <= x2 <= w and 0 <= y1 <= y2 <= h."""
    h, w = size
    n = draw(st.integers(min_value=min_boxes, max_value=max_boxes))
    rows = [(x1, y1, x2, y2) for (x1, x2), (y1, y2) in (draw(st.tuples(_span(w), _span(h))) for _ in range(n))]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 4)


@st.composite
def boxes_around(draw, size: tuple[int, int], reach: float = 0.5, max_boxes: int = 8) -> np.ndarray:
    """[k, 4] boxes that may stick out of a (h, w) canvas by up to `reach` of its sides: what a model
    predicts near the borders, or inside the letterbox padding."""
    h, w = size
    xs = st.floats(min_value=-reach * w, max_value=(1 + reach) * w, allow_nan=False)
    ys = st.floats(min_value=-reach * h, max_value=(1 + reach) * h, allow_nan=False)
    n = draw(st.integers(min_value=1, max_value=max_boxes))
    rows = []
    for _ in range(n):
        x1, x2 = sorted((draw(xs), draw(xs)))
        y1, y2 = sorted((draw(ys), draw(ys)))
        rows.append((x1, y1, x2, y2))
    return np.asarray(rows, dtype=np.float64)
