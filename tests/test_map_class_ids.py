"""A detection whose class id is not one of the evaluation set's nc classes (issue #25: an IndexError in
harness/metrics/coco.py) is a failed mAP check naming the model, the class id and nc, not a crash; a
candidate with the set's classes is scored as before. Instant."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from harness.accuracy import judge, slices
from harness.accuracy.profile import load_profile
from harness.accuracy.runner import Run
from harness.metrics.coco import ClassIdOutOfRange, Detections, coco_map


def _gt() -> dict:
    images = [{"id": 1, "file_name": "a.jpg", "width": 640, "height": 640, "slice": "day"},
              {"id": 2, "file_name": "b.jpg", "width": 640, "height": 640, "slice": "night"}]
    annotations = [{"id": 1, "image_id": 1, "category_id": 0, "bbox": [100, 100, 200, 200], "area": 40000, "iscrowd": 0},
                   {"id": 2, "image_id": 2, "category_id": 1, "bbox": [300, 300, 150, 150], "area": 22500, "iscrowd": 0}]
    return {"images": images, "annotations": annotations,
            "categories": [{"id": 0, "name": "circle"}, {"id": 1, "name": "square"}]}


def _run(name: str, classes: tuple[int, int]) -> Run:
    run = Run(name, "fp32", "e2e", 0.25)
    run.detections = {1: np.array([[100, 100, 300, 300, 0.9, classes[0]]], np.float32),
                      2: np.array([[300, 300, 450, 450, 0.9, classes[1]]], np.float32)}
    return run


def _map_level(candidate: Run):
    evalset = SimpleNamespace(coco=_gt())
    return judge.map_level(_run("fp32", (0, 1)), candidate, evalset, load_profile(), "fp32")


def test_class_id_at_nc_fails_the_map_check_naming_model_class_id_and_nc():
    ref, cand, failures = _map_level(_run("served:vendor_e2e", (0, 80)))
    assert ref["all"]["mAP50_95"] > 0.99  # the reference is still scored
    assert cand is None
    assert len(failures) == 1, failures
    assert "served:vendor_e2e returned class id 80 but nc = 2" in failures[0], failures[0]
    assert "1 of 2 detections" in failures[0] and "ids 2" in failures[0], failures[0]


def test_negative_class_id_is_named_too():
    """-1 used to index the last category silently (a wrong score, no error)."""
    _, cand, failures = _map_level(_run("cand", (-1, 1)))
    assert cand is None and "cand returned class id -1 but nc = 2" in failures[0], failures


def test_classes_of_the_set_pass():
    ref, cand, failures = _map_level(_run("cand", (0, 1)))
    assert failures == [] and cand["all"]["mAP50_95"] > 0.99


def test_reference_with_foreign_classes_is_an_error_naming_it():
    evalset = SimpleNamespace(coco=_gt())
    with pytest.raises(ClassIdOutOfRange, match=r"the FP32 reference fp32 returned class id 5 but nc = 2"):
        judge.map_level(_run("fp32", (0, 5)), _run("cand", (0, 1)), evalset, load_profile(), "fp32")


def test_metrics_functions_raise_a_value_error_not_an_index_error():
    bad = [Detections(1, np.array([[100, 100, 300, 300]]), np.array([0.9]), np.array([7]))]
    with pytest.raises(ValueError, match=r"class id 7 but nc = 2"):
        coco_map(_gt(), bad)
    with pytest.raises(ValueError, match=r"class id 7 but nc = 2"):
        slices.evaluate(_gt(), bad, imgsz=640, small_max_area=1024, large_min_area=9216)
