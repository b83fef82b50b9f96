"""Does the candidate detect what the FP32 reference detects? Tensors, boxes, mAP (overall and per
slice), INT8 calibration coverage, and served/end-to-end outputs against a local run of the same artifact.
Thresholds: the profile (harness/accuracy/profiles/default.toml; --profile)."""

from __future__ import annotations

import pytest

from harness.accuracy import judge
from harness.accuracy.coverage import coverage_failures, coverage_report, read_sidecar
from harness.accuracy.tensors import table

from harness.accuracy.summary import record, verdict as _verdict
from harness.verdicts import not_applicable

pytestmark = pytest.mark.accuracy


def _fail(header: str, failures: list[str], extra: str = "") -> None:
    pytest.fail(f"{header}:\n  - " + "\n  - ".join(failures) + (f"\n{extra}" if extra else ""), pytrace=False)


def _reference_row(settings: dict, profile) -> str:
    """The summary row of the reference scored under `settings`: its conf, and iou / max_det where they
    are not the profile's."""
    if settings["conf"] == profile.eval["map_conf"]:
        return "fp32 reference"
    return f"fp32 reference @conf {settings['conf']:g}" + "".join(
        f" {k} {settings[k]:g}" for k in ("iou", "max_det") if settings[k] != profile.eval[k])


def test_tensors(candidate, reference_run, accuracy_runs, pytestconfig):
    """Raw outputs within the precision's tolerances (Polygraphy-style statistics, per output view)."""
    spec, cand, run = candidate
    if cand.kind != "raw":
        not_applicable(f"{spec.name}: end-to-end, no raw tensors (judged by boxes and mAP)")
    judge_as = accuracy_runs.judge_as(spec, cand)
    stats, failures = judge.tensor_level(reference_run, run, accuracy_runs.profile, judge_as)
    if failures:
        _verdict(pytestconfig, spec.name, "tensors")
        _fail(f"{spec.name} raw outputs vs FP32 reference (judged as {judge_as}, {len(run.raw)} images)", failures, table(stats))


def test_boxes(candidate, reference_run, accuracy_runs, pytestconfig, report_dir):
    """After NMS, the candidate's boxes match the reference's (matched share, extras, IoU, scores, classes)."""
    spec, cand, run = candidate
    judge_as = accuracy_runs.judge_as(spec, cand)
    report, failures = judge.box_level(reference_run, run, accuracy_runs.profile, judge_as, getattr(cand, "thresholds", None))
    summary = report.summary()
    record(pytestconfig, spec.name, "matched", summary["matched"])
    record(pytestconfig, spec.name, "seconds", round(run.seconds, 1))
    if failures:
        _verdict(pytestconfig, spec.name, "boxes")
        failures = judge.mixups(reference_run, run, getattr(cand, "detector", None), accuracy_runs.eval_set, accuracy_runs.profile, judge_as) + failures
        conf = max(accuracy_runs.profile.eval["conf"], run.conf)
        line, pictures = judge.worst_pictures(reference_run, run, report, accuracy_runs.eval_set, conf, report_dir,
                                              accuracy_runs.profile.eval["worst_images"])
        _fail(f"{spec.name} boxes vs FP32 reference (judged as {judge_as}, {summary['images']} images, conf > {conf})", failures,
              f"worst images: {line}" + (f"\npictures: {', '.join(map(str, pictures))}" if pictures else ""))


def test_map(candidate, reference_run, accuracy_runs, pytestconfig):
    """COCO mAP50-95 / mAP50 as a ratio of FP32's, overall and on every slice (day, night, small, large)."""
    spec, cand, run = candidate
    judge_as = accuracy_runs.judge_as(spec, cand)
    settings = getattr(cand, "thresholds", None)
    ref_metrics, cand_metrics, failures = judge.map_level(reference_run, run, accuracy_runs.eval_set, accuracy_runs.profile, judge_as,
                                                          settings)
    if cand_metrics is None:  # detections naming no class of the evaluation set: no mAP to compute
        _verdict(pytestconfig, spec.name, "mAP")
        _fail(f"{spec.name} mAP vs FP32 reference (judged as {judge_as}, {accuracy_runs.eval_set.describe()})", failures)
    # An end-to-end candidate has no detections below its own conf: both sides are scored at it (and at its iou, max_det).
    conf = max(accuracy_runs.profile.eval["map_conf"], run.conf)
    record(pytestconfig, _reference_row({**(settings or accuracy_runs.profile.eval), "conf": conf}, accuracy_runs.profile), "map",
           ref_metrics)
    record(pytestconfig, spec.name, "map", cand_metrics)
    record(pytestconfig, spec.name, "conf", conf)
    floor = accuracy_runs.profile.eval["min_reference_map50_95"]
    if ref_metrics["all"]["mAP50_95"] < floor:
        pytest.skip(f"the FP32 reference scores mAP50-95 {ref_metrics['all']['mAP50_95']:.3f} < {floor} on"
                    f" {accuracy_runs.eval_set.describe()}: an untrained model, the ratio gate means nothing")
    if failures:
        _verdict(pytestconfig, spec.name, "mAP")
        _fail(f"{spec.name} mAP vs FP32 reference (judged as {judge_as}, {accuracy_runs.eval_set.describe()})", failures)


def test_thresholds(candidate, reference_run, accuracy_runs, pytestconfig, record_property):
    """A served end-to-end deployment's own conf / iou / max_det cost the FP32 reference at most the
    profile's [settings] loss: the reference scored at the profile's settings against at the deployment's
    (the model's own error is test_boxes' and test_map's, under the deployment's settings)."""
    spec, cand, run = candidate
    settings = getattr(cand, "thresholds", None)
    if settings is None:
        not_applicable(f"{spec.name}: the harness post-processes it at the profile's settings")
    profile = accuracy_runs.profile
    at_profile, at_candidate, failures = judge.settings_level(reference_run, accuracy_runs.eval_set, profile, settings, spec.name)
    said = lambda at: ", ".join(f"{k} {at[k]:g}" for k in judge.SETTINGS)  # noqa: E731
    record(pytestconfig, _reference_row(profile.eval, profile), "map", at_profile)
    record(pytestconfig, _reference_row(settings, profile), "map", at_candidate)
    for key, value in (("profile_settings", {k: profile.eval[k] for k in judge.SETTINGS}),
                       ("deployed_settings", {k: settings[k] for k in judge.SETTINGS}),
                       ("reference_map50_95_at_profile_settings", at_profile["all"]["mAP50_95"]),
                       ("reference_map50_95_at_deployed_settings", at_candidate["all"]["mAP50_95"]),
                       ("map50_95_points_lost_by_settings", (at_profile["all"]["mAP50_95"] - at_candidate["all"]["mAP50_95"]) * 100)):
        record_property(key, value)  # report.json's values for this check: both scores and the loss
    if failures:
        _verdict(pytestconfig, spec.name, "settings")
        _fail(f"{spec.name}'s settings cost the FP32 reference mAP50-95 {at_profile['all']['mAP50_95']:.4f} at the profile's"
              f" {said(profile.eval)} -> {at_candidate['all']['mAP50_95']:.4f} at its {said(settings)}", failures)


def test_calibration_coverage(candidate_spec, accuracy_runs, pytestconfig):
    """An INT8 candidate built by the harness was calibrated on every slice of the evaluation set."""
    spec, cand = candidate_spec, accuracy_runs.build(candidate_spec)
    if cand.precision != "int8":
        not_applicable(f"{spec.name}: {cand.precision}, not INT8")
    calibration = read_sidecar(cand.artifact) if cand.artifact else None
    if calibration is None:
        pytest.skip(f"{spec.name}: no calibration.json beside {cand.artifact} (not built by the harness)")
    report = coverage_report(calibration["composition"], accuracy_runs.eval_set.composition)
    failures = coverage_failures(report, accuracy_runs.profile.data["coverage"])
    if failures:
        _verdict(pytestconfig, spec.name, "coverage")
        shares = ", ".join(f"{n}: {s['calibration_images']} calib / {s['eval_images']} eval" for n, s in report["slices"].items())
        _fail(f"{spec.name} calibration set does not cover the evaluation set ({shares})", failures)


def test_end_to_end_matches_local_run(candidate, accuracy_runs, pytestconfig, report_dir):
    """An end-to-end deployment equals the local reference pipeline on the same artifact, within FP32
    tolerance when it computes in FP32 (what differs is its pre/post-processing or transport, not
    precision); an FP16/INT8 engine serving that file is judged at its own precision."""
    spec, cand, run = candidate
    if cand.kind != "e2e":
        not_applicable(f"{spec.name}: raw-tensor candidate (served ones: test_served_tensors_match_local_run)")
    local = accuracy_runs.local_twin(cand)
    tolerance = accuracy_runs.twin_tolerance(cand)
    report, failures = judge.box_level(local, run, accuracy_runs.profile, tolerance)
    if failures:
        _verdict(pytestconfig, spec.name, "vs-local")
        failures = accuracy_runs.version_match(spec, cand, lambda other: judge.box_level(other, run, accuracy_runs.profile,
                                                                                         tolerance)[1]) + \
            judge.mixups(local, run, getattr(cand, "detector", None), accuracy_runs.eval_set, accuracy_runs.profile,
                         tolerance) + failures
        line, pictures = judge.worst_pictures(local, run, report, accuracy_runs.eval_set, run.conf, report_dir,
                                              accuracy_runs.profile.eval["worst_images"])
        _fail(f"{spec.name} vs the local pipeline on {cand.artifact} ({tolerance.upper()} tolerance, "
              f"{len(run.detections)} images)", failures,
              f"worst images: {line}" + (f"\npictures: {', '.join(map(str, pictures))}" if pictures else ""))


def test_served_tensors_match_local_run(candidate, accuracy_runs, pytestconfig):
    """A served raw-tensor model returns what ONNX Runtime computes locally from the same file (within
    FP32 tolerance; an FP16/INT8 engine serving that file, within its precision's)."""
    spec, cand, run = candidate
    if cand.kind != "raw" or cand.origin != "served":
        not_applicable(f"{spec.name}: not a served raw-tensor model")
    local = accuracy_runs.local_twin(cand)
    tolerance = accuracy_runs.twin_tolerance(cand)
    stats, failures = judge.tensor_level(local, run, accuracy_runs.profile, tolerance)
    if failures:
        _verdict(pytestconfig, spec.name, "vs-local")
        failures = accuracy_runs.version_match(
            spec, cand, lambda other: judge.tensor_level(other, run, accuracy_runs.profile, tolerance)[1]) + failures
        _fail(f"{spec.name} vs ONNX Runtime on {cand.artifact} ({tolerance.upper()} tolerance)", failures, table(stats))
