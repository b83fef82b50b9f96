"""The accuracy machinery on hand-made inputs: each level's numbers and failure lines, both directions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.accuracy import batched, boxes, coverage, gates, slices, tensors
from harness.accuracy.evalset import EvalSet
from harness.accuracy.profile import load_profile
from harness.engines.artifacts import EVAL_SET
from harness.metrics.coco import Detections


def test_profiles_load_and_extend(tmp_path):
    default = load_profile()
    assert default.section("map", "fp16")["min_ratio"] == 0.99
    assert load_profile("int8-99").section("map", "int8")["min_ratio"] == 0.99
    assert load_profile("int8-99").section("map", "fp16") == default.section("map", "fp16")  # inherited
    custom = tmp_path / "mine.toml"
    custom.write_text('extends = "default"\n[tensors.fp16]\nboxes = { atol = 0.1, rtol = 0.0, max_outside = 0.0 }\n')
    assert load_profile(custom).section("tensors", "fp16")["boxes"]["atol"] == 0.1
    with pytest.raises(FileNotFoundError, match="no-such"):
        load_profile("no-such")
    partial = tmp_path / "partial.toml"
    partial.write_text("[eval]\nimgsz = 320\n")
    with pytest.raises(ValueError, match="missing tables"):
        load_profile(partial)


def _raw(seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(0, 640, (2, 4, 50)), rng.uniform(0, 1, (2, 6, 50))], axis=1).astype(np.float32)


def test_tensor_stats_split_boxes_and_scores_and_gate_on_outside_share():
    tol = load_profile().section("tensors", "fp16")
    ref = _raw()
    near = ref + np.float32(0.1) * np.sign(ref)  # 0.1 px / 0.1 score: boxes fine, scores out
    stats = tensors.compare_outputs({"output0": ref}, {"output0": near}, tol)
    assert [s.name for s in stats] == ["output0:boxes", "output0:scores"]
    assert stats[0].abs_max == pytest.approx(0.1, abs=1e-4) and stats[0].outside == 0.0
    failures = tensors.failures(stats, tol)
    assert len(failures) == 1 and failures[0].startswith("output0:scores") and "outside atol" in failures[0]
    assert tensors.failures(tensors.compare_outputs({"output0": ref}, {"output0": ref.copy()}, tol), tol) == []


def test_tensor_nan_is_named():
    tol = load_profile().section("tensors", "int8")
    ref = _raw()
    bad = ref.copy()
    bad[0, 5, 3] = np.nan
    failures = tensors.failures(tensors.compare_outputs({"output0": ref}, {"output0": bad}, tol), tol)
    assert failures == ["output0:scores: 1 NaN and 0 Inf values in the candidate's output"]


def test_box_report_counts_misses_extras_flips_and_ranks_worst():
    thresholds = load_profile().section("boxes", "fp32")
    ref = np.array([[0, 0, 10, 10, 0.9, 0], [20, 20, 40, 40, 0.8, 1], [50, 50, 60, 60, 0.7, 2]], dtype=np.float32)
    report = boxes.BoxReport()
    report.add(1, ref, ref, 0.5)
    assert report.failures(thresholds) == []
    cand = np.array([[0, 0, 10, 10, 0.9, 3], [21, 21, 41, 41, 0.8, 1], [90, 90, 99, 99, 0.6, 0]], dtype=np.float32)
    report.add(2, ref, np.concatenate([cand, -np.ones((2, 6), np.float32)]), 0.5)  # -1 padding is dropped
    s = report.summary()
    assert (s["missed"], s["extra"], s["class_flips"]) == (1, 1, 1) and s["matched"] == pytest.approx(5 / 6)
    text = " ".join(report.failures(thresholds))
    assert "1 missed" in text and "extra boxes" in text and "class flips" in text and "mean IoU" in text
    assert [w.image_id for w in report.worst(2)] == [2]


def _gt():
    images = [{"id": 1, "file_name": "a.jpg", "width": 640, "height": 640, "slice": "day"},
              {"id": 2, "file_name": "b.jpg", "width": 640, "height": 640, "slice": "night"}]
    annotations = [{"id": 1, "image_id": 1, "category_id": 0, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0},
                   {"id": 2, "image_id": 1, "category_id": 0, "bbox": [100, 100, 200, 200], "area": 40000, "iscrowd": 0},
                   {"id": 3, "image_id": 2, "category_id": 0, "bbox": [300, 300, 150, 150], "area": 22500, "iscrowd": 0}]
    return {"images": images, "annotations": annotations, "categories": [{"id": 0, "name": "circle"}]}


def _det(image_id, rows):
    rows = np.asarray(rows, dtype=np.float64)
    return Detections(image_id, rows[:, :4], rows[:, 4], rows[:, 5].astype(int))


def test_batched_borderline_boxes_are_neither_missed_nor_extra():
    """Under batching a box scoring within the precision's score tolerance of the model's conf may come or go
    (FP32: 1e-3 above 0.25); one clearly above it may not."""
    fp32, conf = load_profile().section("boxes", "fp32"), 0.25
    box = np.array([[10, 10, 60, 60, 0.8, 1]], dtype=np.float64)
    near, clear = [np.array([[100, 100, 150, 150, conf + margin, 2]]) for margin in (0.0005, 0.01)]
    assert batched.differs(box, np.concatenate([box, near]), fp32, conf) == []  # extra, borderline
    assert batched.differs(np.concatenate([box, near]), box, fp32, conf) == []  # missed, borderline
    assert batched.differs(np.zeros((0, 6)), near, fp32, conf) == []  # the FP32 false failure of issue #34
    assert batched.differs(np.zeros((0, 6)), clear, fp32, conf) == [
        "1 boxes where its sequential answer has none (above 0.25 + 0.001, the score tolerance)"]
    assert batched.differs(box, np.concatenate([box, clear]), fp32, conf) == [
        "1 extra boxes = 100.0% of the reference's (allowed 0.0%)"]
    assert batched.differs(np.concatenate([box, clear]), box, fp32, conf)[0].startswith("matched 50.0% of 2 reference boxes")
    assert batched.score_tolerance(load_profile().section("boxes", "int8")) == 0.2  # the bulk's, not the outlier's 0.5


def test_boxes_lost_to_another_image_of_the_batch_are_told_from_plain_misses():
    """suppressed_by: lost boxes that lie under a same-class, at-least-as-high box kept in another image's
    answer are NMS across images; a box lost with nothing over it, or an answer that also gained boxes, is not."""
    fp32, conf = load_profile().section("boxes", "fp32"), 0.25
    frame = np.array([[10, 10, 60, 60, 0.8, 1], [100, 20, 140, 90, 0.6, 0]], dtype=np.float64)
    sequential = [frame, frame, np.array([[300, 300, 340, 340, 0.7, 0]])]
    answers = {0: frame, 1: frame[:0], 2: sequential[2]}
    assert batched.suppressed_by(1, answers, sequential, fp32, conf) == ([0], 2, 2)
    assert batched.suppressed_by(1, {**answers, 0: frame[:1]}, sequential, fp32, conf) is None  # the second lost box: nothing over it
    assert batched.suppressed_by(1, {**answers, 1: sequential[2]}, sequential, fp32, conf) is None  # gained a box: not suppression
    assert batched.suppressed_by(1, {1: frame[:0]}, sequential, fp32, conf, beside=((0, frame),)) == ([0], 2, 2)  # in flight beside it
    problems = batched.judge_round("m", "with its twins in one request", answers, sequential, ["a.png", "a.png (again)", "b.png"],
                                   fp32, conf)
    assert problems == ["m with its twins in one request: 1 of 3 images lost boxes that they have when sent alone — "
                        f"{batched.SUPPRESSED} (post-processing, e.g. NMS, runs over the whole batch instead of image by image): "
                        "a.png (again) lost 2 of its 2 boxes, each under a same-class box kept in the answer of a.png"]


def test_slices_score_image_and_object_size_slices():
    perfect = [_det(1, [[10, 10, 30, 30, 0.9, 0], [100, 100, 300, 300, 0.9, 0]]), _det(2, [[300, 300, 450, 450, 0.9, 0]])]
    options = dict(imgsz=640, small_max_area=1024, large_min_area=9216)
    result = slices.evaluate(_gt(), perfect, **options)
    assert set(result) == {"all", "day", "night", "small", "large"}
    assert all(result[k]["mAP50_95"] > 0.99 for k in result), result
    assert result["small"]["objects"] == 1 and result["large"]["objects"] == 2
    no_small = slices.evaluate(_gt(), [_det(1, [[100, 100, 300, 300, 0.9, 0]]), perfect[1]], **options)
    assert no_small["small"]["mAP50_95"] == 0.0 and no_small["large"]["mAP50_95"] > 0.99


def test_map_gate_names_the_collapsed_slice():
    reference = {"all": {"mAP50_95": 0.90, "mAP50": 0.97}, "day": {"mAP50_95": 0.92, "mAP50": 0.98},
                 "night": {"mAP50_95": 0.88, "mAP50": 0.96}, "small": {"mAP50_95": math.nan, "mAP50": math.nan}}
    thresholds = load_profile().section("map", "int8")
    holds = {k: dict(v) for k, v in reference.items()}
    assert gates.map_failures(reference, holds, thresholds, 0.03) == []
    collapsed = {**holds, "all": {"mAP50_95": 0.88, "mAP50": 0.96}, "night": {"mAP50_95": 0.60, "mAP50": 0.80}}
    failures = gates.map_failures(reference, collapsed, thresholds, 0.03)
    assert failures and all("slice 'night'" in f for f in failures), failures


def test_coverage_fails_a_missing_slice_and_passes_a_full_one():
    evalset = EvalSet(EVAL_SET, images_per_slice=6)
    thresholds = load_profile().data["coverage"]
    from harness.engines.calibration import composition

    day_only = composition([(i.path, i.slice) for i in evalset.images if i.slice == "day"])
    failures = coverage.coverage_failures(coverage.coverage_report(day_only, evalset.composition), thresholds)
    assert any("eval slice 'night'" in f and "no calibration image" in f for f in failures), failures
    assert coverage.coverage_failures(coverage.coverage_report(evalset.composition, evalset.composition), thresholds) == []


def _boxes(*rows) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32).reshape(-1, 6)


ROWS = _boxes([0, 0, 10, 10, 0.9, 0], [20, 20, 40, 40, 0.8, 1], [50, 50, 60, 60, 0.7, 2], [70, 70, 90, 90, 0.6, 0])


def test_missing_causes_tell_a_cap_empty_answers_agnostic_suppression_and_plain_misses_apart():
    def causes(pairs, nms_iou=0.7):
        report = boxes.BoxReport()
        for n, (ref, cand) in enumerate(pairs):
            report.add(n, ref, cand, 0.5)
        return report.missing_causes(nms_iou)

    assert causes([(ROWS, ROWS)]) is None
    capped = causes([(ROWS, ROWS[:2]), (ROWS[:3], ROWS[:2]), (ROWS[:1], ROWS[:1])])
    assert capped.startswith("3 reference boxes missing: a cap: no answer has more than 2 rows although the reference has up to 4"), capped
    empty = causes([(ROWS, ROWS[:0]), (ROWS, ROWS), (ROWS, ROWS)])
    assert "intermittent empty answers: 1 of 3 requests came back with no detection" in empty and "cap" not in empty, empty
    assert "every answer empty" in causes([(ROWS, ROWS[:0])])
    # a class-1 box on top of the reference's class-0 box: class-agnostic NMS kept it, the class-0 one is gone
    twin = _boxes([0, 0, 10, 10, 0.9, 0], [0, 0, 10, 10.5, 0.5, 1])
    agnostic = causes([(twin, twin[:1]), (ROWS, ROWS)])
    assert agnostic == ("1 reference boxes missing: class-agnostic suppression: 1 missed boxes each overlap a kept box of"
                        " another class at IoU > 0.7 (NMS across classes removes them; class-aware NMS keeps them)"), agnostic
    assert causes([(twin, twin[:1])], nms_iou=None).endswith("1 plain misses (no empty answer, cap or overlapping box of"
                                                             " another class explains them)")  # the harness's NMS ran
    plain = causes([(ROWS, ROWS[[0, 1, 3]]), (ROWS, ROWS)])  # the third box missing, not the lowest-scoring
    assert plain == "1 reference boxes missing: 1 plain misses (no empty answer, cap or overlapping box of another class explains them)"


def test_reference_is_re_scored_at_other_settings_without_inferring_again():
    from harness.accuracy.judge import reference_at
    from harness.accuracy.runner import Run

    overlapping = _boxes([0, 0, 10, 10, 0.9, 0], [0, 0, 10, 14, 0.8, 0], [0, 0, 10, 14, 0.7, 1], [50, 50, 60, 60, 0.3, 0])
    run = Run("ref", "fp32", "raw", 0.001, detections={1: overlapping})
    same = reference_at(run, {"conf": 0.25, "iou": 0.7, "max_det": 300}, ran_iou=0.7)[1]
    assert np.array_equal(same, overlapping)  # at the IoU the run used, its NMS output stands
    merged = reference_at(run, {"conf": 0.25, "iou": 0.5, "max_det": 300}, ran_iou=0.7)[1]
    assert merged[:, 4].tolist() == pytest.approx([0.9, 0.7, 0.3])  # class-aware: the class-1 twin stays
    assert reference_at(run, {"conf": 0.5, "iou": 0.7, "max_det": 2}, ran_iou=0.7)[1][:, 4].tolist() == pytest.approx([0.9, 0.8])


def test_settings_gate_states_the_points_lost():
    at_profile, at_candidate = {"mAP50_95": 0.70, "mAP50": 0.80}, {"mAP50_95": 0.60, "mAP50": 0.795}
    failures = gates.settings_failures(at_profile, at_candidate, 1.0)
    assert failures == ["mAP50_95 0.6000 at its settings vs 0.7000 at the profile's: 10.00 points lost by the settings alone"
                        " (allowed 1)"], failures
    assert gates.settings_failures(at_profile, at_profile, 1.0) == []


def test_an_ensembles_thresholds_are_its_post_processing_steps(tmp_path):
    """An ensemble states no conf itself: the step that post-processes does, and that is what it deploys."""
    from tritonclient.grpc import model_config_pb2 as pb

    from harness.accuracy.served import e2e_thresholds
    from harness.repository.config import read_config
    from harness.repository.writer import write_model

    post = pb.ModelConfig(name="post", backend="python")
    post.parameters["conf"].string_value = "0.6"
    post.parameters["iou_threshold"].string_value = "0.45"
    write_model(tmp_path, post, {1: {"model.py": "# post-processing\n"}})
    ensemble = pb.ModelConfig(name="pipeline", platform="ensemble")
    ensemble.ensemble_scheduling.step.add(model_name="post", model_version=-1)
    write_model(tmp_path, ensemble, {1: {}})
    defaults = {"conf": 0.25, "iou": 0.7, "max_det": 300}
    config = read_config(tmp_path / "pipeline")
    assert e2e_thresholds(config, defaults, repository=tmp_path) == {"conf": 0.6, "iou": 0.45, "max_det": 300}
    assert e2e_thresholds(config, defaults) == defaults  # without the repository its steps cannot be read
