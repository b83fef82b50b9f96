"""Greedy non-maximum suppression, class-aware, as ultralytics' `non_max_suppression` runs it.

Class-aware by the offset trick (torchvision's `batched_nms` and ultralytics do the same): each box
is shifted by class * max_wh, so boxes of different classes never overlap and one pass suffices.
"""

from __future__ import annotations

import numpy as np

from harness.vision.boxes import iou_matrix

MAX_WH = 7680  # ultralytics' class offset: larger than any input side


def nms(boxes_xyxy: np.ndarray, scores: np.ndarray, iou_threshold: float, max_keep: int | None = None) -> np.ndarray:
    """Indices of the kept boxes, best score first. A box is suppressed when its IoU with a kept,
    higher-scoring box is > iou_threshold (strict, as torchvision.ops.nms)."""
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    order = np.argsort(-np.asarray(scores), kind="stable")
    keep: list[int] = []
    while order.size and (max_keep is None or len(keep) < max_keep):
        best, rest = order[0], order[1:]
        keep.append(int(best))
        if rest.size == 0:
            break
        order = rest[iou_matrix(boxes[best], boxes[rest])[0] <= iou_threshold]
    return np.asarray(keep, dtype=np.intp)


def batched_nms(
    boxes_xyxy: np.ndarray,
    scores: np.ndarray,
    classes: np.ndarray,
    iou_threshold: float,
    max_keep: int | None = None,
    agnostic: bool = False,
) -> np.ndarray:
    """Class-aware NMS (per class, in one pass through the offset trick); `agnostic` ignores classes."""
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    if boxes.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    if not agnostic:
        max_wh = max(MAX_WH, float(np.abs(boxes).max()) * 2 + 1)
        boxes = boxes + np.asarray(classes, dtype=np.float64)[:, None] * max_wh
    return nms(boxes, scores, iou_threshold, max_keep)
