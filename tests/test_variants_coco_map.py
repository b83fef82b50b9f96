"""The mAP the INT8 acceptance is judged by: perfect detections score 1, none score 0, slices separate."""

import numpy as np

from harness.metrics.coco import Detections, coco_map


def ground_truth() -> dict:
    images = [{"id": 1, "file_name": "a.jpg", "width": 100, "height": 100, "slice": "day"},
              {"id": 2, "file_name": "b.jpg", "width": 100, "height": 100, "slice": "night"}]
    annotations = [{"id": 1, "image_id": 1, "category_id": 3, "bbox": [10, 10, 30, 20], "area": 600, "iscrowd": 0},
                   {"id": 2, "image_id": 2, "category_id": 7, "bbox": [50, 40, 20, 40], "area": 800, "iscrowd": 0}]
    return {"images": images, "annotations": annotations, "categories": [{"id": 3, "name": "circle"}, {"id": 7, "name": "square"}]}


def test_perfect_detections_score_one_per_slice():
    detections = [Detections(1, np.array([[10, 10, 40, 30]]), np.array([0.9]), np.array([0])),
                  Detections(2, np.array([[50, 40, 70, 80]]), np.array([0.8]), np.array([1]))]
    result = coco_map(ground_truth(), detections)
    assert set(result) == {"all", "day", "night"}
    for name in result:
        assert result[name]["mAP50_95"] > 0.99 and result[name]["mAP50"] > 0.99, (name, result[name])


def test_missing_night_detections_drop_only_night():
    detections = [Detections(1, np.array([[10, 10, 40, 30]]), np.array([0.9]), np.array([0]))]
    result = coco_map(ground_truth(), detections)
    assert result["day"]["mAP50_95"] > 0.99
    assert result["night"]["mAP50_95"] == 0.0
    assert 0.0 < result["all"]["mAP50_95"] < 1.0


def test_no_detections_score_zero():
    assert coco_map(ground_truth(), [])["all"] == {"mAP50_95": 0.0, "mAP50": 0.0, "images": 2}
