"""COCO mAP50-95 / mAP50 with pycocotools, overall and per slice ("day", "night"), from detections given
as arrays: the accuracy suite compares variants (FP32 vs INT8, day-only vs day+night calibration) by
these numbers, recomputed from detections every time."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Detections:
    """One image's detections in source-image pixels: boxes [k, 4] xyxy, scores [k], classes [k]
    (model class indices; index i is the i-th COCO category by ascending id)."""

    image_id: int
    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray


def _evaluate(ground_truth: dict, results: np.ndarray, image_ids: list[int]) -> dict:
    from pycocotools.coco import COCO  # noqa: PLC0415
    from pycocotools.cocoeval import COCOeval  # noqa: PLC0415

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        gt = COCO()
        gt.dataset = ground_truth
        gt.createIndex()
        if len(results) == 0:
            return {"mAP50_95": 0.0, "mAP50": 0.0, "images": len(image_ids)}
        dt = gt.loadRes(results)
        evaluator = COCOeval(gt, dt, iouType="bbox")
        evaluator.params.imgIds = image_ids
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    # stats[0] = AP@[.5:.95], stats[1] = AP@.5; -1 means no ground truth in the selection.
    return {"mAP50_95": max(float(evaluator.stats[0]), 0.0), "mAP50": max(float(evaluator.stats[1]), 0.0), "images": len(image_ids)}


def results_array(ground_truth: dict, detections: list[Detections]) -> np.ndarray:
    """pycocotools' loadRes rows [image_id, x, y, w, h, score, category_id]; class index i is the i-th
    category id in ascending order."""
    category_ids = sorted(c["id"] for c in ground_truth["categories"])
    rows = []
    for det in detections:
        boxes = np.asarray(det.boxes, dtype=np.float64).reshape(-1, 4)
        for (x1, y1, x2, y2), score, cls in zip(boxes, np.asarray(det.scores).reshape(-1), np.asarray(det.classes).reshape(-1)):
            rows.append([det.image_id, x1, y1, x2 - x1, y2 - y1, float(score), category_ids[int(cls)]])
    return np.asarray(rows, dtype=np.float64).reshape(-1, 7)


def coco_map(ground_truth: dict, detections: list[Detections], slice_key: str = "slice") -> dict[str, dict]:
    """{"all": {...}, "<slice>": {...}} for every slice named in the images' `slice_key` field."""
    ground_truth = dict(ground_truth)
    ground_truth.setdefault("info", {})
    ground_truth.setdefault("licenses", [])
    results = results_array(ground_truth, detections)
    by_slice: dict[str, list[int]] = {}
    for image in ground_truth["images"]:
        by_slice.setdefault(image.get(slice_key, "all"), []).append(image["id"])
    out = {"all": _evaluate(ground_truth, results, [i["id"] for i in ground_truth["images"]])}
    for name, ids in sorted(by_slice.items()):
        if name != "all":
            out[name] = _evaluate(ground_truth, results[np.isin(results[:, 0], ids)] if len(results) else results, ids)
    return out
