"""Decode + class-aware NMS: hand-made raw outputs with known answers, and the greedy-NMS invariants
as properties over random boxes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.hypothesis_profiles import load_profile
from harness.vision import strategies as yst
from harness.vision.boxes import iou_matrix, xywh_to_xyxy
from harness.vision.decode import decode_batch
from harness.vision.nms import batched_nms, nms

load_profile()


def test_iou_matrix_known_values():
    a = np.array([[0, 0, 10, 10]])
    b = np.array([[0, 0, 10, 5], [5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 10, 10]])
    np.testing.assert_allclose(iou_matrix(a, b), [[0.5, 50 / 150, 0.0, 1.0]])
    assert iou_matrix(np.zeros((0, 4)), b).shape == (0, 4)


def test_xywh_to_xyxy():
    np.testing.assert_allclose(xywh_to_xyxy(np.array([[10, 20, 4, 6]])), [[8, 17, 12, 23]])


def test_nms_suppresses_strictly_above_threshold():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5], [20, 20, 30, 30]])  # IoU(0, 1) = 0.5 exactly
    scores = np.array([0.9, 0.8, 0.7])
    assert nms(boxes, scores, 0.5).tolist() == [0, 1, 2]
    assert nms(boxes, scores, 0.49).tolist() == [0, 2]
    assert nms(boxes, scores, 0.49, max_keep=1).tolist() == [0]


def test_class_aware_nms_keeps_overlaps_of_different_classes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10]])
    scores, classes = np.array([0.9, 0.8]), np.array([0, 1])
    assert batched_nms(boxes, scores, classes, 0.5).tolist() == [0, 1]
    assert batched_nms(boxes, scores, classes, 0.5, agnostic=True).tolist() == [0]


def raw_output(rows: list[tuple[float, float, float, float, int, float]], nc: int = 3, anchors: int = 8) -> np.ndarray:
    """[1, 4 + nc, anchors] with one anchor per (cx, cy, w, h, class, score); other anchors score 0."""
    raw = np.zeros((1, 4 + nc, anchors), dtype=np.float32)
    for a, (cx, cy, w, h, c, s) in enumerate(rows):
        raw[0, :4, a] = cx, cy, w, h
        raw[0, 4 + c, a] = s
    return raw


def test_decode_batch_filters_suppresses_and_pads():
    raw = raw_output([
        (50, 50, 20, 10, 1, 0.9),   # kept
        (51, 50, 20, 10, 1, 0.8),   # same class, IoU 0.9 -> suppressed
        (50, 50, 20, 10, 0, 0.6),   # other class, same place -> kept
        (10, 10, 4, 4, 2, 0.25),    # exactly at conf: filtered (score must be > conf)
    ])
    detections, num = decode_batch(np.concatenate([raw, np.zeros_like(raw)]), conf=0.25, iou=0.7, max_det=5)
    assert detections.shape == (2, 5, 6) and detections.dtype == np.float32
    assert num.tolist() == [2, 0]
    np.testing.assert_allclose(detections[0, :2], [[40, 45, 60, 55, 0.9, 1], [40, 45, 60, 55, 0.6, 0]])
    assert (detections[0, 2:] == -1).all() and (detections[1] == -1).all()


def test_decode_batch_caps_at_max_det_best_first():
    rows = [(20 * i + 10, 10, 8, 8, 0, 0.3 + 0.05 * i) for i in range(8)]
    detections, num = decode_batch(raw_output(rows), conf=0.25, iou=0.7, max_det=3)
    assert num.tolist() == [3]
    np.testing.assert_allclose(detections[0, :, 4], [0.65, 0.6, 0.55], rtol=1e-6)


def test_decode_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"\[N, 4 \+ nc, anchors\]"):
        decode_batch(np.zeros((7, 8)), 0.25, 0.7, 10)


detection_sets = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        yst.boxes_inside((640, 640), min_boxes=n, max_boxes=n),
        st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@given(case=detection_sets, threshold=st.floats(0.1, 0.9))
def test_greedy_nms_invariants(case, threshold):
    """Kept boxes of one class never overlap above the threshold, and every dropped box is covered
    by a kept box of its class with at least its score."""
    boxes, scores, classes = case[0], np.array(case[1]), np.array(case[2])
    keep = batched_nms(boxes, scores, classes, threshold)
    kept = np.zeros(len(boxes), bool)
    kept[keep] = True
    same_class = classes[:, None] == classes[None, :]
    ious = iou_matrix(boxes, boxes)
    among_kept = ious[np.ix_(keep, keep)] * same_class[np.ix_(keep, keep)]
    np.fill_diagonal(among_kept, 0)
    assert (among_kept <= threshold).all(), "two kept boxes of one class overlap above the threshold"
    for i in np.flatnonzero(~kept):
        covering = kept & same_class[i] & (ious[i] > threshold) & (scores >= scores[i])
        assert covering.any(), f"box {i} was dropped with no kept box of its class covering it"
    assert list(scores[keep]) == sorted(scores[keep], reverse=True), "kept boxes not best score first"
