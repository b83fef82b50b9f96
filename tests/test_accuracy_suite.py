"""suites/accuracy against its broken candidates (fixtures/accuracy/): each fails the check meant for it,
with a message naming the cause, and a correct deployment of the same model passes those checks.

The FP32 reference here is fixtures/accuracy/cell_detector.py (built at test time) until the trained
reference model is committed: the untrained dev export answers the same for every input and cannot show
a preprocessing bug. Quick profile: 320 px, 4 day + 4 night images, a few seconds per run."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from harness import paths

ROOT = paths.PROJECT_ROOT
FIXTURES = ROOT / "fixtures" / "accuracy"
SUITE = ROOT / "suites" / "accuracy"
QUICK = FIXTURES / "profiles" / "quick.toml"


@pytest.fixture(scope="module")
def cell_detector(tmp_path_factory) -> Path:
    sys.path.insert(0, str(ROOT))
    from fixtures.accuracy.cell_detector import build

    return build(tmp_path_factory.mktemp("cell") / "cell_detector.onnx")


def run_suite(pytester, reference: Path, candidates: list[str], *extra: str):
    pytester.chdir()
    args = [str(SUITE), "-p", "no:cacheprovider", f"--rootdir={ROOT}", "-c", str(ROOT / "pytest.ini"), "--profile", str(QUICK),
            "--accuracy-reference", str(reference), "-rfs", *extra]
    for candidate in candidates:
        args += ["--accuracy-candidate", candidate]
    return pytester.runpytest_subprocess(*args, timeout=600)


def outcomes(result) -> dict[str, str]:
    """test id -> PASSED / FAILED / SKIPPED / ERROR, from the -v lines ("path::test[id] PASSED [ 50%]")."""
    out = {}
    for line in result.outlines:
        match = re.match(r"^(\S+::(\S+)) (PASSED|FAILED|SKIPPED|ERROR)\b", line)
        if match:
            out[match.group(2)] = match.group(3)
    return out


BROKEN = {
    "bgr": ("test_end_to_end_matches_local_run", "score moved by up to"),
    "no_scale": ("test_end_to_end_matches_local_run", "matched"),
    "pad_zero": ("test_end_to_end_matches_local_run", "score moved by up to"),
    "letterbox_offset": ("test_end_to_end_matches_local_run", "mean IoU of matched boxes"),
    "corrupted_weights": ("test_tensors", "output0:scores"),
}


def test_each_broken_candidate_fails_its_check_and_a_correct_pipeline_passes(pytester, cell_detector, tmp_path):
    good = tmp_path / "reference_pipeline.toml"
    good.write_text('kind = "pipeline"\njudge_as = "fp32"\n')  # the reference preprocessing, spelled out
    candidates = [str(FIXTURES / f"{name}.toml") for name in BROKEN] + [str(good)]
    result = run_suite(pytester, cell_detector, candidates, "-v", "--report-dir", str(tmp_path / "report"))
    verdicts = outcomes(result)
    text = result.stdout.str()
    for name, (check, cause) in BROKEN.items():
        assert verdicts.get(f"{check}[{name}]") == "FAILED", f"{name}: {check} should fail, got {verdicts.get(f'{check}[{name}]')}\n{text[-3000:]}"
        assert cause in text, f"{name}: failure message should name {cause!r}"
    assert verdicts.get("test_end_to_end_matches_local_run[reference_pipeline]") == "PASSED", text[-3000:]
    assert verdicts.get("test_boxes[reference_pipeline]") == "PASSED", text[-3000:]
    assert "worst images: " in text and "per candidate, per slice" in text
    pictures = list((tmp_path / "report" / "accuracy").rglob("*.png"))
    assert pictures, "failing box checks should draw side-by-side pictures into --report-dir"


def _dev_model() -> Path:
    from harness.engines.artifacts import REFERENCE_MODEL

    if REFERENCE_MODEL.exists():
        return REFERENCE_MODEL
    if os.environ.get("YTS_DEV_MODEL"):
        return Path(os.environ["YTS_DEV_MODEL"])
    pytest.skip("INT8 variants need an ultralytics export: reference model not committed and $YTS_DEV_MODEL not set")


def test_day_only_int8_fails_coverage_naming_night_and_day_night_passes(pytester):
    """Calibration coverage reads the INT8 sidecar only, so an untrained export is enough to prove it."""
    result = run_suite(pytester, _dev_model(), [str(FIXTURES / "int8_day_only.toml"), "variant:int8-day+night-minmax-quint8-dyn-320"],
                       "-v", "-k", "coverage")
    verdicts, text = outcomes(result), result.stdout.str()
    assert verdicts.get("test_calibration_coverage[int8_day_only]") == "FAILED", text[-3000:]
    assert "eval slice 'night'" in text and "has no calibration image" in text, text[-3000:]
    assert verdicts.get("test_calibration_coverage[variant:int8-day+night-minmax-quint8-dyn-320]") == "PASSED", text[-3000:]


def test_a_bad_profile_is_a_usage_error(pytester, cell_detector):
    result = run_suite(pytester, cell_detector, [str(FIXTURES / "bgr.toml")], "--profile", "no-such-profile")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no-such-profile" in result.stderr.str()
