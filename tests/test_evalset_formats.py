"""The evaluation set in YOLO format reads as the same COCO set: fixtures/shapes_eval carries both."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from harness.accuracy.evalset import EvalSet, coco_from_yolo
from harness.engines.artifacts import EVAL_SET


def test_yolo_labels_give_the_committed_coco_annotations():
    coco = json.loads((EVAL_SET / "annotations.json").read_text())
    yolo = coco_from_yolo(EVAL_SET)
    by_name = {i["file_name"]: i for i in coco["images"]}
    assert [(i["file_name"], i["width"], i["height"], i["slice"]) for i in yolo["images"]] == \
        [(n, by_name[n]["width"], by_name[n]["height"], by_name[n]["slice"]) for n in sorted(by_name)]
    assert len(yolo["annotations"]) == len(coco["annotations"])
    ids = {i["id"]: i["file_name"] for i in coco["images"]}
    yolo_ids = {i["id"]: i["file_name"] for i in yolo["images"]}
    want = sorted((ids[a["image_id"]], a["category_id"], *a["bbox"]) for a in coco["annotations"])
    got = sorted((yolo_ids[a["image_id"]], a["category_id"], *a["bbox"]) for a in yolo["annotations"])
    assert [w[:2] for w in want] == [g[:2] for g in got]
    # COCO boxes are whole pixels, YOLO's normalised to 6 decimals: within a pixel
    assert np.abs(np.array([w[2:] for w in want]) - np.array([g[2:] for g in got])).max() <= 1.0


def test_a_folder_with_neither_format_is_a_clear_error(tmp_path):
    (tmp_path / "images").mkdir()
    with pytest.raises(FileNotFoundError, match="neither COCO annotations.json"):
        EvalSet(tmp_path)


def test_yolo_set_without_slices_or_names(tmp_path):
    shutil.copytree(EVAL_SET / "images", tmp_path / "images")
    shutil.copytree(EVAL_SET / "labels", tmp_path / "labels")
    evalset = EvalSet(tmp_path)
    assert {i.slice for i in evalset.images} == {"unlabelled"} and len(evalset.images) == 100
    assert [c["name"] for c in evalset.coco["categories"]][:2] == ["class0", "class1"]
