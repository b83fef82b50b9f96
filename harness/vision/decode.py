"""YOLOv8 raw head output -> fixed-size detection rows, the contract of the served end-to-end model.

Raw output [N, 4 + nc, anchors]: rows 0-3 are cx, cy, w, h in input pixels, rows 4.. class scores
(already sigmoid). Per image: best class and its score, keep score > conf (strict, as ultralytics),
the top `max_nms` candidates by score, class-aware NMS, the first `max_det`. Rows are
x1, y1, x2, y2, score, class in input pixels, padded with -1 to [max_det, 6], plus num_detections,
so a batch has one shape whatever each image contains.
"""

from __future__ import annotations

import numpy as np

from harness.vision.boxes import xywh_to_xyxy
from harness.vision.nms import batched_nms

MAX_NMS = 30000  # ultralytics: candidates kept for NMS, by score
PAD = -1.0


def decode_image(
    raw: np.ndarray, conf: float, iou: float, max_det: int, agnostic: bool = False, max_nms: int = MAX_NMS
) -> np.ndarray:
    """One image's raw output [4 + nc, anchors] -> detections [k, 6] (k <= max_det), best first."""
    raw = np.asarray(raw)
    if raw.ndim != 2 or raw.shape[0] < 5:
        raise ValueError(f"raw YOLO output must be [4 + nc, anchors] per image, got {raw.shape}")
    class_scores = raw[4:]
    classes = class_scores.argmax(axis=0)
    scores = np.take_along_axis(class_scores, classes[None], axis=0)[0]
    candidates = np.flatnonzero(scores > conf)
    if candidates.size > max_nms:
        candidates = candidates[np.argsort(-scores[candidates], kind="stable")[:max_nms]]
    boxes = xywh_to_xyxy(raw[:4, candidates].T)
    keep = batched_nms(boxes, scores[candidates], classes[candidates], iou, max_det, agnostic)
    return np.concatenate(
        [boxes[keep], scores[candidates][keep, None], classes[candidates][keep, None]], axis=1
    ).astype(np.float32)


def pad_detections(detections: np.ndarray, max_det: int) -> np.ndarray:
    """[k, 6] -> [max_det, 6] padded with -1."""
    rows = np.full((max_det, 6), PAD, dtype=np.float32)
    rows[: len(detections)] = detections[:max_det]
    return rows


def decode_batch(
    raw: np.ndarray, conf: float, iou: float, max_det: int, agnostic: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Raw output [N, 4 + nc, anchors] -> (detections [N, max_det, 6] float32, num_detections [N] int32)."""
    raw = np.asarray(raw)
    if raw.ndim != 3:
        raise ValueError(f"raw YOLO output must be [N, 4 + nc, anchors], got {raw.shape}")
    per_image = [decode_image(r, conf, iou, max_det, agnostic) for r in raw]
    detections = np.stack([pad_detections(d, max_det) for d in per_image]) if per_image else np.zeros((0, max_det, 6), np.float32)
    return detections, np.asarray([len(d) for d in per_image], dtype=np.int32)
