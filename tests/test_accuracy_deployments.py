"""The deployments fixture repository (fixtures/accuracy/deployments/) through a real server, both
directions: a deployment declaring conf 0.6 fails test_thresholds naming the threshold and the mAP its
settings lose; a capped, an intermittently empty and a class-agnostic-NMS deployment fail test_boxes with
their cause named; the correct UINT8-pixels model passes the same checks.

Speed: one pytester run with one process server, 24 images at 320 (fixtures/accuracy/profiles/quick24.toml,
enough for images where the reference finds overlapping boxes of different classes): ~30 s on two cores."""

from __future__ import annotations

import re

import pytest

from harness import paths

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: F401
import harness.vision.letterbox  # noqa: F401
from tests.conftest import load_module

pytestmark = pytest.mark.server
ROOT = paths.PROJECT_ROOT
PROFILE = paths.FIXTURES / "accuracy" / "profiles" / "quick24.toml"
IMGSZ = 320

CAUSES = {
    "yolo_capped": ("test_boxes", "a cap: no answer has more than 3 rows although the reference has up to"),
    "yolo_flaky": ("test_boxes", "intermittent empty answers: 8 of 24 requests came back with no detection where the reference detects"),
    "yolo_agnostic": ("test_boxes", "class-agnostic suppression: 4 missed boxes each overlap a kept box of another class at IoU > 0.7"),
    "yolo_conf60": ("test_thresholds", "served:yolo_conf60's declared conf 0.6 (profile 0.25) alone loses"),
}


@pytest.fixture(scope="module")
def builder():
    return load_module(paths.FIXTURES / "accuracy" / "deployments" / "build.py")


def test_settings_and_missing_box_causes_are_named_and_the_correct_model_passes(pytester, tmp_path, builder):
    try:
        onnx = builder.LAYOUTS.reference_onnx(IMGSZ)
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")
    repo = builder.build(tmp_path / "models", onnx, IMGSZ)
    candidates = [a for name in ("yolo_pixels", *CAUSES) for a in ("--accuracy-candidate", f"served:{name}")]
    pytester.chdir()
    result = pytester.runpytest_subprocess(
        str(ROOT / "suites" / "accuracy"), "--repo", str(repo), "--profile", str(PROFILE), "--accuracy-reference", str(onnx),
        "-k", "boxes or thresholds", "-v", *candidates, "-p", "no:cacheprovider", f"--rootdir={ROOT}", "-c", str(ROOT / "pytest.ini"),
        "-rfs", timeout=900)
    text = result.stdout.str()
    verdicts = dict(re.findall(r"::(\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", text))
    for check in ("test_boxes", "test_thresholds"):
        assert verdicts.get(f"{check}[served:yolo_pixels]") == "PASSED", f"{check}: {verdicts}\n{text[-4000:]}"
    for name, (check, cause) in CAUSES.items():
        assert verdicts.get(f"{check}[served:{name}]") == "FAILED", f"{check}[{name}]: {verdicts}\n{text[-4000:]}"
        assert cause in text, f"{name}: the message should say {cause!r}\n{text[-4000:]}"
    # The declared threshold is a setting, not a model error: under its own conf the model matches the reference.
    assert verdicts.get("test_boxes[served:yolo_conf60]") == "PASSED", text[-4000:]
    assert re.search(r"mAP50_95 0\.\d+ at its settings vs 0\.\d+ at the profile's: \d+\.\d+ points lost", text), text[-4000:]
    # Each cause is named alone: a capped model's misses are not called empty answers or plain misses.
    capped = re.search(r"_ test_boxes\[served:yolo_capped\] _+\n(.*?)worst images", text, re.S).group(1)
    assert "plain misses" not in capped and "empty answers" not in capped and "class-agnostic" not in capped, capped
