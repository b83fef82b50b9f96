"""Box geometry shared by decoding, NMS and matching: conversions and IoU, vectorized in numpy."""

from __future__ import annotations

import numpy as np


def xywh_to_xyxy(boxes_xywh: np.ndarray) -> np.ndarray:
    """Center-size boxes (YOLO's raw output rows 0-3) -> corner boxes x1, y1, x2, y2."""
    boxes = np.asarray(boxes_xywh)
    half = boxes[..., 2:4] / 2
    return np.concatenate([boxes[..., 0:2] - half, boxes[..., 0:2] + half], axis=-1)


def box_area(boxes_xyxy: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes_xyxy)
    return (boxes[..., 2] - boxes[..., 0]).clip(0) * (boxes[..., 3] - boxes[..., 1]).clip(0)


def iou_matrix(a_xyxy: np.ndarray, b_xyxy: np.ndarray, eps: float = 1e-9) -> np.ndarray:
    """IoU of every box in `a` [n, 4] with every box in `b` [m, 4] -> [n, m]."""
    a = np.asarray(a_xyxy, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b_xyxy, dtype=np.float64).reshape(-1, 4)
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (bottom_right - top_left).clip(0).prod(axis=2)
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    return inter / np.maximum(union, eps)
