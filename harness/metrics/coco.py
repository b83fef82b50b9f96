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


class ClassIdOutOfRange(ValueError):
    """A detection's class id is not one of the evaluation set's nc classes (0..nc-1): the model's
    classes are not the ones the set is labelled with (another nc, a 1-based or unmapped class id)."""

    def __init__(self, class_ids: list[int], nc: int, images: list[int], count: int, total: int, who: str = "a model"):
        self.class_ids, self.nc, self.images, self.count, self.total = class_ids, nc, images, count, total
        shown = ", ".join(map(str, class_ids[:8])) + (", ..." if len(class_ids) > 8 else "")
        where = ", ".join(map(str, images[:5])) + (", ..." if len(images) > 5 else "")
        super().__init__(
            f"{who} returned class id {shown} but nc = {nc} (the evaluation set's classes are 0..{nc - 1}):"
            f" {count} of {total} detections on {len(images)} image(s) (ids {where}) name no class; the model's"
            " classes are not the evaluation set's (another nc, or class ids not mapped to it)")

    def with_model(self, who: str) -> "ClassIdOutOfRange":
        return ClassIdOutOfRange(self.class_ids, self.nc, self.images, self.count, self.total, who)


def check_class_ids(detections: list[Detections], nc: int, who: str = "a model") -> None:
    """Raises ClassIdOutOfRange naming the offending class ids and nc when any detection's class is
    outside 0..nc-1 (a negative id would silently index from the end, one >= nc crash pycocotools' map)."""
    bad_ids: set[int] = set()
    images: list[int] = []
    count = total = 0
    for det in detections:
        classes = np.asarray(det.classes).reshape(-1)
        total += classes.size
        ids = classes.astype(np.int64)
        out = (ids < 0) | (ids >= nc) | (classes != ids)
        if out.any():
            bad_ids.update(int(c) if float(c).is_integer() else float(c) for c in classes[out])
            images.append(det.image_id)
            count += int(out.sum())
    if count:
        raise ClassIdOutOfRange(sorted(bad_ids), nc, images, count, total, who)


def results_array(ground_truth: dict, detections: list[Detections]) -> np.ndarray:
    """pycocotools' loadRes rows [image_id, x, y, w, h, score, category_id]; class index i is the i-th
    category id in ascending order. A class index outside the categories raises ClassIdOutOfRange."""
    category_ids = sorted(c["id"] for c in ground_truth["categories"])
    check_class_ids(detections, len(category_ids))
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
