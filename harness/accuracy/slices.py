"""mAP per slice: the eval set's image slices (the per-image "slice" field: day, night) and object-size
slices (small, large: area in model-input pixels, i.e. after the letterbox scale, because that is the
size the network sees). COCOeval with custom area ranges scores each size slice the COCO way: ground
truth outside the range is ignored, and so are unmatched detections outside it."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from harness.metrics.coco import Detections, results_array

ALL = "all"


def input_scale(image: dict, imgsz: int) -> float:
    return min(imgsz / image["height"], imgsz / image["width"])


def _scaled(ground_truth: dict, imgsz: int) -> dict:
    """A copy whose annotation areas are in model-input pixels, so COCO's area ranges mean input size."""
    images = {i["id"]: i for i in ground_truth["images"]}
    annotations = [dict(a, area=a["area"] * input_scale(images[a["image_id"]], imgsz) ** 2) for a in ground_truth["annotations"]]
    return {"info": {}, "licenses": [], **ground_truth, "annotations": annotations}


def _ap(precision: np.ndarray) -> float:
    valid = precision[precision > -1]
    return float(valid.mean()) if valid.size else float("nan")


def evaluate(ground_truth: dict, detections: list[Detections], *, imgsz: int, small_max_area: float,
             large_min_area: float, slice_key: str = "slice") -> dict[str, dict]:
    """{"all": {"mAP50_95", "mAP50", "images", "objects"}, "day": ..., "night": ..., "small": ..., "large": ...}.
    Detection areas are scaled per image like the ground truth's. NaN: the slice has no ground truth."""
    from pycocotools.coco import COCO  # noqa: PLC0415
    from pycocotools.cocoeval import COCOeval  # noqa: PLC0415

    gt_data = _scaled(ground_truth, imgsz)
    scales = {i["id"]: input_scale(i, imgsz) for i in ground_truth["images"]}
    results = results_array(ground_truth, detections)
    by_slice: dict[str, list[int]] = {ALL: [i["id"] for i in ground_truth["images"]]}
    for image in ground_truth["images"]:
        if slice_key in image:
            by_slice.setdefault(image[slice_key], []).append(image["id"])
    ranges = {ALL: (0, 1e10), "small": (0, small_max_area), "large": (large_min_area, 1e10)}
    out: dict[str, dict] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = gt_data
        gt.createIndex()
        dt = gt.loadRes(results) if len(results) else None
        if dt is not None:  # loadRes computes detection areas in source pixels: rescale them too
            for ann in dt.dataset["annotations"]:
                ann["area"] *= scales[ann["image_id"]] ** 2
        for name, ids in by_slice.items():
            objects = {label: sum(1 for a in gt_data["annotations"] if a["image_id"] in set(ids) and lo <= a["area"] < hi)
                       for label, (lo, hi) in ranges.items()}
            if dt is None:
                scores = {label: (0.0, 0.0) for label in ranges}
            else:
                evaluator = COCOeval(gt, dt, iouType="bbox")
                evaluator.params.imgIds = ids
                evaluator.params.areaRng = [list(r) for r in ranges.values()]
                evaluator.params.areaRngLbl = list(ranges)
                evaluator.params.maxDets = [100]
                evaluator.evaluate()
                evaluator.accumulate()
                precision = evaluator.eval["precision"]  # [T iou thresholds, R recall, K classes, A areas, M maxDets]
                scores = {label: (_ap(precision[:, :, :, a, 0]), _ap(precision[0, :, :, a, 0])) for a, label in enumerate(ranges)}
            for label, (m5095, m50) in scores.items():
                key = name if label == ALL else (label if name == ALL else None)
                if key is None:
                    continue  # size x image-slice crossings are not reported: too few objects each
                if objects[label] == 0:
                    m5095 = m50 = float("nan")
                out[key] = {"mAP50_95": max(m5095, 0.0) if m5095 == m5095 else m5095,
                            "mAP50": max(m50, 0.0) if m50 == m50 else m50, "images": len(ids), "objects": objects[label]}
    return out
