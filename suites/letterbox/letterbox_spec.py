"""What a letterbox must do, written out independently of any implementation, and the known ways
implementations get it wrong, so a failing property can name the likely mistake.

The geometry follows ultralytics (the training-time preprocessing): scale r = min(th/h, tw/w),
content round(w*r) x round(h*r) (Python rounding, at least 1 px), padding split around the content.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

PAD_VALUE = 114
ROUNDTRIP_TOLERANCE_PX = 0.5


def expected_ratio(source: tuple[int, int], target: tuple[int, int]) -> float:
    (h, w), (th, tw) = source, target
    return min(th / h, tw / w)


def expected_resized(source: tuple[int, int], target: tuple[int, int]) -> tuple[int, int]:
    h, w = source
    r = expected_ratio(source, target)
    return max(1, round(h * r)), max(1, round(w * r))


def resize_mistake(source, target, found: tuple[int, int]) -> str:
    """Name the mistake that produces `found` as the content size, if it is a known one."""
    h, w = source
    r = expected_ratio(source, target)
    if tuple(found) == tuple(target) and tuple(found) != expected_resized(source, target):
        return "the image was stretched to the target: aspect ratio not kept"
    if tuple(found) == (max(1, int(h * r)), max(1, int(w * r))):
        return "sizes truncated with int() instead of rounded"
    return "content size does not follow round(side * r)"


def forward_boxes(boxes: np.ndarray, meta) -> np.ndarray:
    """Source pixels -> input pixels where the resize really draws them: source [0, w] spans the
    content [left, left + new_w], so x -> x * new_w / w + left (per axis; the content size and the
    padding are checked by their own properties)."""
    (h, w), (nh, nw) = meta.source_shape, meta.resized_shape
    left, top = meta.offset
    out = np.array(boxes, dtype=np.float64)
    out[:, [0, 2]] = out[:, [0, 2]] * (nw / w) + left
    out[:, [1, 3]] = out[:, [1, 3]] * (nh / h) + top
    return out


def _gain(meta) -> np.ndarray:
    (h, w), (nh, nw) = meta.source_shape, meta.resized_shape
    return np.array([nw / w, nh / h] * 2)


# Known wrong inverses: name -> (input boxes, meta) -> what that mistake restores them to.
INVERSE_MISTAKES: dict[str, Callable] = {
    "pad offsets not subtracted before dividing by the scale": lambda b, m: b / _gain(m),
    "divided by r = min(th/h, tw/w) instead of the rounded content's scale new_side / side": lambda b, m: (
        b - np.array([m.offset[0], m.offset[1]] * 2)) / m.ratio,
    "ratio taken from the padded canvas (input size / source size per axis), offsets ignored": lambda b, m: b
    * np.array([m.source_shape[1] / m.output_shape[1], m.source_shape[0] / m.output_shape[0]] * 2),
    "offsets subtracted but not divided by the scale": lambda b, m: b
    - np.array([m.offset[0], m.offset[1]] * 2),
}


def inverse_mistake(boxes_in: np.ndarray, restored: np.ndarray, meta) -> str:
    for name, mistake in INVERSE_MISTAKES.items():
        if np.allclose(mistake(np.asarray(boxes_in, dtype=np.float64), meta), restored, atol=ROUNDTRIP_TOLERANCE_PX):
            return name
    return "unknown inverse mapping"
