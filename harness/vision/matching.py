"""Greedy IoU matching of two detection sets (reference vs candidate), for the accuracy suite.

Matching is class-agnostic so that a box found at the right place with the wrong class shows up as a
class flip rather than one miss plus one extra. Candidates are visited best score first; each takes
the unmatched reference box of highest IoU at or above the threshold (COCO-style greedy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.vision.boxes import iou_matrix


@dataclass(frozen=True)
class MatchResult:
    pairs: np.ndarray  # [k, 2] (reference index, candidate index)
    ious: np.ndarray  # [k] IoU of each pair
    missed: np.ndarray  # reference indices without a candidate
    extra: np.ndarray  # candidate indices without a reference
    class_flips: np.ndarray  # indices into `pairs` whose classes differ


def match_detections(reference: np.ndarray, candidate: np.ndarray, iou_threshold: float = 0.5) -> MatchResult:
    """Rows are x1, y1, x2, y2, score, class (padding rows with class -1 must be removed first)."""
    ref = np.asarray(reference, dtype=np.float64).reshape(-1, 6)
    cand = np.asarray(candidate, dtype=np.float64).reshape(-1, 6)
    ious = iou_matrix(ref[:, :4], cand[:, :4])
    ref_taken = np.zeros(len(ref), dtype=bool)
    pairs: list[tuple[int, int]] = []
    for j in np.argsort(-cand[:, 4], kind="stable"):
        if not len(ref):
            break
        column = np.where(ref_taken, -1.0, ious[:, j])
        i = int(column.argmax())
        if column[i] >= iou_threshold:
            ref_taken[i] = True
            pairs.append((i, int(j)))
    pair_array = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
    cand_taken = np.zeros(len(cand), dtype=bool)
    cand_taken[pair_array[:, 1]] = True
    return MatchResult(
        pairs=pair_array,
        ious=ious[pair_array[:, 0], pair_array[:, 1]],
        missed=np.flatnonzero(~ref_taken),
        extra=np.flatnonzero(~cand_taken),
        class_flips=np.flatnonzero(ref[pair_array[:, 0], 5] != cand[pair_array[:, 1], 5]),
    )
