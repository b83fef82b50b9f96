"""Issue 3's acceptance, recomputed here rather than read from a file: the committed FP32 ONNX through
ONNX Runtime reaches the mAP50-95 recorded in reference_model/MODEL.json on the evaluation set, and the
INT8 Q/DQ variants' mAP ratio to FP32 per slice — day+night calibration against day-only — is measured
and reported (junit properties and a printed table). 640 px, the 100 committed images: ~2 min on 2 cores."""

from __future__ import annotations

import json

import pytest

from harness.accuracy import runner
from harness.accuracy.candidates import RawCandidate
from harness.accuracy.evalset import EvalSet
from harness.accuracy.profile import load_profile
from harness.accuracy.slices import evaluate
from harness.engines.artifacts import EVAL_SET, REFERENCE_MODEL, ArtifactCache
from harness.engines.ort import OrtEngine

IMGSZ = 640
SLICES = ("all", "day", "night")
# The recorded numbers are ultralytics `val` (rect batches, its own letterbox); the harness letterboxes
# every image to a square 640: a few thousandths apart, measured 0.916 vs 0.921 overall.
RECORDED_TOLERANCE = 0.01

pytestmark = pytest.mark.skipif(not REFERENCE_MODEL.exists(), reason=f"{REFERENCE_MODEL} is not committed")


@pytest.fixture(scope="module")
def evalset() -> EvalSet:
    return EvalSet(EVAL_SET)


@pytest.fixture(scope="module")
def cache() -> ArtifactCache:
    """The project's cache (content-hashed): the accuracy suite builds the same 640 variants."""
    return ArtifactCache()


def mean_ap(cache: ArtifactCache, evalset: EvalSet, variant: str) -> dict[str, float]:
    profile = load_profile()
    e, size_slices = profile.eval, profile.data["slices"]
    path = cache.build(variant).path
    run = runner.run(RawCandidate(variant, "fp32", OrtEngine(path), artifact=path), evalset, imgsz=IMGSZ,
                     conf=e["map_conf"], iou=e["iou"], max_det=e["max_det"], tensor_images=0)
    table = evaluate(evalset.coco, run.coco(e["map_conf"]), imgsz=IMGSZ, small_max_area=size_slices["small_max_area"],
                     large_min_area=size_slices["large_min_area"])
    return {name: table[name]["mAP50_95"] for name in SLICES}


@pytest.fixture(scope="module")
def fp32(cache, evalset) -> dict[str, float]:
    return mean_ap(cache, evalset, f"fp32-dyn-{IMGSZ}")


def test_fp32_reaches_the_recorded_map(fp32, record_property):
    recorded = json.loads((REFERENCE_MODEL.parent / "MODEL.json").read_text())["eval"]["ultralytics_val_onnx_fp32_unpacked_cpu"]
    for name in SLICES:
        record_property(f"fp32_map50_95_{name}", round(fp32[name], 4))
    assert fp32["day"] >= 0.70, f"day-slice mAP50-95 {fp32['day']:.3f} is below issue 3's 0.70 target"
    for name in SLICES:
        want = recorded[name]["mAP50-95"]
        assert fp32[name] >= want - RECORDED_TOLERANCE, (
            f"{name}: recomputed mAP50-95 {fp32[name]:.4f}, MODEL.json records {want:.4f} (tolerance {RECORDED_TOLERANCE})")


def test_int8_map_ratio_per_slice_day_only_vs_day_and_night(cache, evalset, fp32, record_property, capsys):
    ratios = {}
    for calibration in ("day+night", "day"):
        int8 = mean_ap(cache, evalset, f"int8-{calibration}-minmax-quint8-dyn-{IMGSZ}")
        ratios[calibration] = {name: int8[name] / fp32[name] for name in SLICES}
        for name in SLICES:
            record_property(f"int8_{calibration}_map50_95_{name}", round(int8[name], 4))
            record_property(f"int8_{calibration}_ratio_{name}", round(ratios[calibration][name], 4))
    with capsys.disabled():
        print("\nINT8 (MinMax, QUInt8) mAP50-95 ratio to FP32 @640:")
        for calibration, by_slice in ratios.items():
            print(f"  calibrated on {calibration:9}: " + "  ".join(f"{n} {by_slice[n]:.4f}" for n in SLICES))
    # The day+night model meets the default profile's INT8 gate (95 % of FP32) on every slice. Day-only
    # calibration is reported, not asserted worse: on this model its night drop is within noise
    # (numbers in the issue 3 note), and the accuracy suite fails it by calibration coverage instead.
    assert all(ratios["day+night"][n] >= 0.95 for n in SLICES), ratios["day+night"]
    assert all(ratios["day"][n] > 0.5 for n in SLICES), f"day-only INT8 collapsed: {ratios['day']}"
