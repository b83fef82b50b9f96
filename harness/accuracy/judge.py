"""The three comparison levels over two runs (reference, candidate), each returning its numbers and its
failure lines; the suite turns failure lines into assertion messages. No thresholds live here: they
come from the profile, by the precision the candidate is judged as.

A served end-to-end candidate runs its own post-processing settings (conf, iou, max_det: `settings`).
The model levels compare it with the reference under those same settings, isolating the model's error;
`settings_level` scores the reference at the profile's settings and at the candidate's, isolating what
the settings themselves cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.accuracy import box_mixups
from harness.accuracy import boxes as boxes_module
from harness.accuracy import gates, slices, tensors
from harness.accuracy.evalset import EvalSet
from harness.accuracy.pictures import side_by_side
from harness.accuracy.profile import Profile
from harness.accuracy.runner import Run
from harness.metrics.coco import ClassIdOutOfRange, Detections
from harness.vision.nms import batched_nms

SETTINGS = ("conf", "iou", "max_det")


def tensor_level(reference: Run, candidate: Run, profile: Profile, judge_as: str) -> tuple[list[tensors.TensorStats], list[str]]:
    ids = [i for i in reference.raw if i in candidate.raw]
    if not ids:
        raise ValueError(f"{candidate.name}: no raw tensors to compare (an end-to-end candidate has none)")
    ref, cand = reference.raw_batch(ids), candidate.raw_batch(ids)
    bad_reference = [n for n, a in ref.items() if not np.isfinite(a).all()]
    if bad_reference:
        raise ValueError(f"the FP32 reference itself has NaN/Inf in {bad_reference}")
    tolerances = profile.section("tensors", judge_as)
    stats = tensors.compare_outputs(ref, cand, tolerances, box_score_floor=profile.get("tensors.box_score_floor", 0.0))
    return stats, tensors.failures(stats, tolerances)


def reference_at(reference: Run, settings: dict, ran_iou: float) -> dict[int, np.ndarray]:
    """The reference's detections under other post-processing settings, re-scored from its run (not
    inferred again): rows above `conf`, NMS again at `iou` when it is below the IoU the run used
    (`ran_iou`; a higher IoU cannot bring back what the run suppressed, so the run's stands), the best
    `max_det`. Greedy NMS over NMS output at a higher IoU equals NMS over all candidates but for rare
    chains (a box suppressed at `ran_iou` by a box that the lower IoU suppresses in turn)."""
    out = {}
    for image_id, rows in reference.at(settings["conf"]).items():
        if settings["iou"] < ran_iou and len(rows):
            rows = rows[batched_nms(rows[:, :4], rows[:, 4], rows[:, 5], settings["iou"])]
        out[image_id] = rows[: int(settings["max_det"])]
    return out


def _reference_rows(reference: Run, profile: Profile, conf: float, settings: dict | None) -> dict[int, np.ndarray]:
    if settings is None:
        return reference.at(conf)
    return reference_at(reference, {**settings, "conf": conf}, profile.eval["iou"])


def box_level(reference: Run, candidate: Run, profile: Profile, judge_as: str,
              settings: dict | None = None) -> tuple[boxes_module.BoxReport, list[str]]:
    """`settings`: the candidate's own conf / iou / max_det; the reference is compared under them.
    Failing with boxes missing, the last line says why they are missing (BoxReport.missing_causes)."""
    thresholds = profile.section("boxes", judge_as)
    conf = max(profile.eval["conf"], candidate.conf)
    ref, cand = _reference_rows(reference, profile, conf, settings), candidate.at(conf)
    report = boxes_module.BoxReport()
    for image_id in ref:
        report.add(image_id, ref[image_id], cand.get(image_id, np.zeros((0, 6))), thresholds["match_iou"])
    failures = report.failures(thresholds)
    nms_iou = (settings or profile.eval)["iou"] if candidate.kind == "e2e" else None  # raw: the harness's class-aware NMS
    causes = report.missing_causes(nms_iou) if failures else None
    return report, failures + ([causes] if causes else [])


def mixups(reference: Run, candidate: Run, detector, evalset: EvalSet, profile: Profile, judge_as: str) -> list[str]:
    """For a served end-to-end candidate whose boxes failed: the box-format or unit mix-up that explains
    it (harness.accuracy.box_mixups), as failure lines; none when none does or the answers were not kept."""
    if not candidate.answers or not hasattr(detector, "decode") or getattr(detector, "layout", None) is None:
        return []
    conf = max(profile.eval["conf"], candidate.conf)
    sizes = {i["id"]: (int(i["height"]), int(i["width"])) for i in evalset.coco["images"] if "height" in i}
    declared = detector.layout.declared
    assumed = tuple(k for k in ("box_format", "box_units") if declared is None or not getattr(declared, k))
    return box_mixups.hints(reference.at(conf), candidate.answers, detector.decode, detector.layout.output, sizes, conf,
                            profile.section("boxes", judge_as)["match_iou"], detector.model.name, assumed) + \
        _declared_inputs(detector.model.name, detector.layout)


def _declared_inputs(name: str, layout) -> list[str]:
    """For a model fed inputs its owner declared ([inputs.NAME], harness.repository.extra_inputs): the
    declaration is part of what was judged, so a failure says what the harness sent."""
    transforms = [e for e in layout.extras if e.transform]
    if not transforms:
        return []
    return [f"{name}: every request carried inputs filled as {layout.declared.source} declares them ([inputs.{name}] "
            f"{', '.join(e.describe() for e in transforms)}): if the model is right, the declaration is not — a transform "
            "fed where another is expected (letterbox_affine for letterbox_inverse, image_hw for image_wh) moves every box"]


def _options(profile: Profile) -> dict:
    return dict(imgsz=profile.eval["imgsz"], small_max_area=profile.data["slices"]["small_max_area"],
                large_min_area=profile.data["slices"]["large_min_area"])


def _coco(rows_by_id: dict[int, np.ndarray]) -> list[Detections]:
    return [Detections(i, rows[:, :4], rows[:, 4], rows[:, 5].astype(int)) for i, rows in rows_by_id.items()]


def map_level(reference: Run, candidate: Run, evalset: EvalSet, profile: Profile, judge_as: str,
              settings: dict | None = None) -> tuple[dict, dict | None, list[str]]:
    """Both runs scored at the same threshold: the mAP one for raw candidates, the model's own for an
    end-to-end candidate (whose detections below it do not exist), and under the candidate's own
    `settings` (iou, max_det) when given. A candidate detection whose class
    id is not one of the set's nc classes cannot be scored: its metrics are None and the failure line
    names the class id and nc."""
    conf = max(profile.eval["map_conf"], candidate.conf)
    options = _options(profile)
    try:
        ref_metrics = slices.evaluate(evalset.coco, _coco(_reference_rows(reference, profile, conf, settings)), **options)
    except ClassIdOutOfRange as error:  # the evaluation set does not fit the reference: a setup error
        raise error.with_model(f"the FP32 reference {reference.name}") from None
    try:
        cand_metrics = slices.evaluate(evalset.coco, candidate.coco(conf), **options)
    except ClassIdOutOfRange as error:  # the candidate's classes are not the set's: a failed check, not a crash
        return ref_metrics, None, [str(error.with_model(candidate.name))]
    failures = gates.map_failures(ref_metrics, cand_metrics, profile.section("map", judge_as),
                                  profile.get("map.slice_ratio_slack", 0.0), profile.get("map.slice_drop_slack_points", 0.0))
    return ref_metrics, cand_metrics, failures


def settings_level(reference: Run, evalset: EvalSet, profile: Profile, settings: dict, name: str) -> tuple[dict, dict, list[str]]:
    """What a deployment's own settings cost, apart from its model: the reference's mAP at the profile's
    conf / iou / max_det against the reference's mAP at the candidate's, gated by the profile's
    [settings] max_map_loss_points; a failure names each setting that differs and what it alone loses."""
    ours = {k: profile.eval[k] for k in SETTINGS}
    options, ran_iou = _options(profile), profile.eval["iou"]

    def score(at: dict) -> dict:
        return slices.evaluate(evalset.coco, _coco(reference_at(reference, at, ran_iou)), **options)

    at_profile = score(ours)
    differing = [k for k in SETTINGS if settings[k] != ours[k]]
    at_candidate = score(settings) if differing else at_profile
    failures = gates.settings_failures(at_profile["all"], at_candidate["all"], profile.data["settings"]["max_map_loss_points"])
    if failures:
        alone = {k: (at_profile["all"]["mAP50_95"] - score({**ours, k: settings[k]})["all"]["mAP50_95"]) * 100 for k in differing}
        said = ", ".join(f"{k} {settings[k]:g} (profile {ours[k]:g}) alone loses {alone[k]:.2f} points" for k in differing)
        failures = [f"{name}'s declared {said}"] + failures
    return at_profile, at_candidate, failures


def worst_pictures(reference: Run, candidate: Run, report: boxes_module.BoxReport, evalset: EvalSet, conf: float,
                   report_dir: Path | None, n: int) -> tuple[str, list[Path]]:
    """The message line naming the worst images, and their side-by-side pictures when a report dir is set."""
    worst = report.worst(n)
    line = boxes_module.describe(worst, evalset.names)
    paths = []
    if report_dir is not None:
        by_id = {i.id: i for i in evalset.images}
        ref, cand = reference.at(conf), candidate.at(max(conf, candidate.conf))
        for w in worst:
            image = by_id[w.image_id]
            out = Path(report_dir) / "accuracy" / _safe(candidate.name) / f"{Path(image.file_name).stem}.png"
            paths.append(side_by_side(image.rgb(), ref[w.image_id], cand.get(w.image_id, np.zeros((0, 6))),
                                      f"{candidate.name} vs FP32 on {image.file_name}", out))
    return line, paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)
