"""Greedy IoU matching sorts two detection sets into pairs, misses, extras and class flips."""

from __future__ import annotations

import numpy as np

from harness.vision.matching import match_detections


def test_pairs_misses_extras_and_flips():
    reference = np.array([
        [0, 0, 10, 10, 0.9, 0],
        [20, 20, 30, 30, 0.8, 1],
        [50, 50, 60, 60, 0.7, 2],  # nothing near it in the candidate: missed
    ])
    candidate = np.array([
        [21, 20, 31, 30, 0.95, 1],  # matches reference 1
        [0, 0, 10, 11, 0.6, 2],  # matches reference 0 with another class: a flip
        [80, 80, 90, 90, 0.5, 0],  # nothing near it in the reference: extra
    ])
    result = match_detections(reference, candidate, iou_threshold=0.5)
    assert sorted(map(tuple, result.pairs.tolist())) == [(0, 1), (1, 0)]
    assert result.missed.tolist() == [2] and result.extra.tolist() == [2]
    flipped = result.pairs[result.class_flips]
    assert flipped.tolist() == [[0, 1]]
    assert (result.ious > 0.5).all()


def test_each_reference_box_is_taken_once_best_candidate_first():
    reference = np.array([[0, 0, 10, 10, 0.9, 0]])
    candidate = np.array([[0, 0, 10, 10, 0.5, 0], [0, 0, 10, 10, 0.8, 0]])
    result = match_detections(reference, candidate)
    assert result.pairs.tolist() == [[0, 1]] and result.extra.tolist() == [0]


def test_empty_sets():
    result = match_detections(np.zeros((0, 6)), np.array([[0, 0, 1, 1, 0.5, 0]]))
    assert result.pairs.shape == (0, 2) and result.extra.tolist() == [0] and result.missed.size == 0
    result = match_detections(np.array([[0, 0, 1, 1, 0.5, 0]]), np.zeros((0, 6)))
    assert result.missed.tolist() == [0] and result.extra.size == 0
