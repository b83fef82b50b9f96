"""harness.vision.letterbox on cases worked out by hand from ultralytics' LetterBox / scale_boxes, so a
change of rounding or split rule shows up as a number, not only as a property violation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.vision.letterbox import LETTERBOX, letterbox, letterbox_batch, project_boxes, restore_boxes


def blank(h: int, w: int) -> np.ndarray:
    return np.zeros((h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    "source, target, ratio, resized, padding",
    [
        ((480, 640), 640, 1.0, (480, 640), (80, 80, 0, 0)),  # VGA into 640: letterbox bands top/bottom
        ((720, 1280), 640, 0.5, (360, 640), (140, 140, 0, 0)),
        ((7, 3), 640, 640 / 7, (640, 274), (0, 0, 183, 183)),  # 3 * 91.43 = 274.29 -> 274
        ((100, 99), 64, 0.64, (64, 63), (0, 0, 0, 1)),  # odd remainder: round(0.4)=0 left, round(0.6)=1 right
        ((1, 7680), 640, 640 / 7680, (1, 640), (319, 320, 0, 0)),  # 0.083 px rounds to 0: kept at 1 px
        ((5, 2), (32, 64), 6.4, (32, 13), (0, 0, 25, 26)),  # rectangular target, r from the height
    ],
)
def test_geometry_matches_ultralytics(source, target, ratio, resized, padding):
    tensor, meta = letterbox(blank(*source), target)
    th, tw = (target, target) if isinstance(target, int) else target
    assert tensor.shape == (3, th, tw)
    assert meta.ratio == pytest.approx(ratio)
    assert meta.resized_shape == resized and meta.padding == padding
    assert meta.offset == (padding[2], padding[0])


def test_restore_undoes_offsets_and_ratio_then_clips():
    _, meta = letterbox(blank(720, 1280), 640)  # r 0.5, 140 px bands top and bottom
    restored = restore_boxes(np.array([[100, 150, 300, 200], [-10, 100, 700, 600]]), meta)
    np.testing.assert_allclose(restored, [[200, 20, 600, 120], [0, 0, 1280, 720]])
    np.testing.assert_allclose(project_boxes(restored[:1], meta), [[100, 150, 300, 200]])
    unclipped = restore_boxes(np.array([[-10, 100, 700, 600]]), meta, clip=False)
    np.testing.assert_allclose(unclipped, [[-20, -80, 1400, 920]])


def test_no_scaleup_keeps_small_images_at_native_size():
    """scaleup=False (ultralytics val): a 100 px image is padded, never enlarged."""
    _, meta = letterbox(blank(100, 100), 640, scaleup=False)
    assert meta.ratio == 1.0 and meta.resized_shape == (100, 100) and meta.padding == (270, 270, 270, 270)


def test_auto_mode_pads_to_the_next_stride_multiple():
    tensor, meta = letterbox(blank(720, 1280), 640, auto=True, stride=32)
    assert tensor.shape == (3, 384, 640) and meta.padding == (12, 12, 0, 0)


def test_batch_with_auto_and_different_aspects_is_refused():
    with pytest.raises(ValueError, match="different shapes"):
        letterbox_batch([blank(720, 1280), blank(1280, 720)], 640, auto=True)


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)])
def test_only_hwc_uint8_rgb_is_accepted(bad):
    with pytest.raises(ValueError, match="HWC uint8 RGB"):
        LETTERBOX(bad, 64)


def test_pad_value_is_114_over_255():
    tensor, _ = letterbox(np.full((10, 20, 3), 255, np.uint8), 32)
    assert tensor[:, 0, 0] == pytest.approx(np.full(3, 114 / 255))
    assert tensor[:, 16, 16] == pytest.approx(np.ones(3))
