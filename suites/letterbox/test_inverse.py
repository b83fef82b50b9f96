"""Inverse mapping properties: boxes predicted in input pixels back to source pixels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.vision import strategies as yst
from letterbox_spec import ROUNDTRIP_TOLERANCE_PX, forward_boxes, inverse_mistake


@st.composite
def image_and_boxes(draw, boxes=yst.boxes_inside):
    size = draw(yst.image_sizes())
    return yst.noise_image(size, draw(yst.seeds)), draw(boxes(size))


@given(case=image_and_boxes(), target=yst.target_shapes)
def test_restore_inverts_the_forward_mapping(letterbox_impl, case, target):
    """A box anywhere in the source, letterboxed and restored (before clipping), comes back within 0.5 px."""
    image, boxes = case
    _, meta = letterbox_impl(image, target)
    boxes_in = forward_boxes(boxes, meta)
    restored = np.asarray(letterbox_impl.restore_boxes(boxes_in, meta, clip=False), dtype=np.float64)
    per_box = np.abs(restored - boxes).max(axis=1)
    worst = int(per_box.argmax())
    error = float(per_box[worst])
    assert error <= ROUNDTRIP_TOLERANCE_PX, (
        f"restore(forward(box)) is off by {error:.2f} px (> {ROUNDTRIP_TOLERANCE_PX}): "
        f"{inverse_mistake(boxes_in, restored, meta)}; box {boxes[worst].round(2).tolist()} -> input "
        f"{boxes_in[worst].round(2).tolist()} -> restored {restored[worst].round(2).tolist()}; "
        f"source {image.shape[0]}x{image.shape[1]} (h x w) -> target {target}, meta {meta}"
    )


@given(case=image_and_boxes(), target=yst.target_shapes, data=st.data())
def test_restored_boxes_are_clipped_to_the_source(letterbox_impl, case, target, data):
    """Predictions reaching into the padding or past the canvas must come back inside the source image."""
    image, _ = case
    _, meta = letterbox_impl(image, target)
    boxes_in = data.draw(yst.boxes_around(tuple(target)), label="boxes in input pixels")
    restored = np.asarray(letterbox_impl.restore_boxes(boxes_in, meta), dtype=np.float64)
    h, w = image.shape[:2]
    outside = (restored[:, [0, 2]] < 0).any(1) | (restored[:, [0, 2]] > w).any(1) | \
              (restored[:, [1, 3]] < 0).any(1) | (restored[:, [1, 3]] > h).any(1)
    assert not outside.any(), (
        f"restored boxes not clipped to the source (x in 0..{w}, y in 0..{h}): "
        f"{restored[outside][:3].round(1).tolist()}; meta {meta}"
    )
