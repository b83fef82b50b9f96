"""suites/config catches every broken repository in fixtures/config/ with the check that owns the
mistake and a message naming it, no other check fails on it, and the good repository passes — offline
(no server, seconds) and live (the embedded server, Python backend only)."""

from __future__ import annotations

import pytest

# Imported before pytester snapshots sys.modules: an in-process run would otherwise import the
# ModelConfig protobuf and onnx a second time, which protobuf's descriptor pool refuses (and onnx's
# extension aborts the process on). So is the report's renderer: matplotlib imported twice fails (--report-dir).
import harness.engines.onnx_signature  # noqa: F401
import harness.checks.bindings  # noqa: F401
import harness.checks.layout  # noqa: F401
import harness.checks.live  # noqa: F401
import harness.checks.schema  # noqa: F401
import harness.report.html  # noqa: F401
import tritonclient.grpc  # noqa: F401
import tritonclient.http  # noqa: F401
from harness.checks.bindings import compare_signature
from harness.engines.signature import Profile, Signature, TensorSpec
from harness.paths import FIXTURES, PROJECT_ROOT
from harness.report import gate
from harness.repository.config import parse_config

SUITE = PROJECT_ROOT / "suites" / "config"
FIXTURE_DIR = FIXTURES / "config"

# broken repository -> (the one test that must fail, words its message must contain)
BROKEN = {
    "wrong_input_name": ("test_bindings[yolo_onnx]", "input 'image' of config.pbtxt is not an input of the model"),
    "fp16_vs_fp32": ("test_bindings[yolo_onnx]", "config.pbtxt says TYPE_FP16, the model's tensor is FP32"),
    "dims_640_vs_320_engine": ("test_bindings[yolo_onnx]", "dim 2 is 640 in config.pbtxt"),
    "batch_dim_in_dims": ("test_bindings[yolo_onnx]", "dims [-1, 3, 320, 320] include the batch dim"),
    "max_batch_above_profile": ("test_bindings[yolo_onnx]", "the model's batch dim is fixed at 1 (shape [1, 3, 320, 320]), but max_batch_size 8"),
    "output_dims_fixed_for_dynamic": ("test_bindings[yolo_onnx]", "output 'output0': dim 2 is 100 in config.pbtxt (shape [-1, 6, 100]) but variable (-1) in the model"),
    "plan_named_engine": ("test_layout[yolo_trt]", "Triton loads only model.plan"),
    "missing_version_dir": ("test_layout[yolo_detector]", "no version directory"),
    "non_numeric_version_dir": ("test_layout[yolo_detector]", "version directory 'v1' is not a number"),
    "preferred_above_max_batch": ("test_schema[yolo_detector]", "preferred_batch_size 8 is above max_batch_size 4"),
    "ensemble_missing_tensor": ("test_schema[yolo_ensemble]", "wired to 'letterboxed', which no ensemble input"),
    "symlink_escapes": ("test_layout[yolo_detector]", "symlink escapes the repository"),
    "config_name_mismatch": ("test_layout[yolo_raw]", "config name 'yolo_detector' differs from its directory 'yolo_raw'"),
    "declared_role_contradicts": ("test_role[yolo_onnx]", "declared e2e"),
    "declared_nc_mismatch": ("test_role[yolo_onnx]", "nc = 80 means 4 + 80 = 84"),
    "segmentation_nc_mismatch": ("test_role[yolo_seg]", "117 rows, but nc = 80 means 4 + 80 + 32 mask coefficients = 116"),
    "autocomplete_conflict": ("test_schema[yolo_auto]", "configuration specified max_batch_size 8, but in "
                              "auto-complete-config function for model 'yolo_auto' specified max_batch_size 4"),
    "empty_onnx": ("test_bindings[yolo_onnx]", "model.onnx is empty (0 bytes)"),
    "ensemble_pinned_version": ("test_schema[yolo_ensemble]", "'yolo_detector' whose required version 2 is not loaded"),
    "plan_built_elsewhere": ("test_bindings[yolo_trt]", "model.plan was built for sm_8.0 (NVIDIA A100-SXM4-80GB); "
                             "the serving GPU is sm_9.0"),
}
# The serving host a fixture is judged for, where it is not this one.
SERVING_HOST = {"plan_built_elsewhere": {"YTS_COMPUTE_CAPABILITY": "9.0", "YTS_TENSORRT_VERSION": "10.3.1"}}
# Correct repositories besides good/: one that relies on Triton's auto-complete, one only serving breaks.
GOOD = {"good", "autocomplete_minimal", "served_shape_differs", "segmentation_head"}


def run_suite(pytester: pytest.Pytester, fixture: str, *args: str):
    return pytester.inline_run(str(SUITE), "--repo", str(FIXTURE_DIR / fixture), "-p", "no:cacheprovider", "-q", *args)


def failures(recorder) -> dict[str, str]:
    return {report.nodeid.split("::")[-1]: report.longreprtext for report in recorder.getfailures()}


def test_every_broken_fixture_is_listed():
    on_disk = {p.name for p in FIXTURE_DIR.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert on_disk - GOOD == set(BROKEN)


def test_good_repository_passes_offline(pytester):
    recorder = run_suite(pytester, "good", "-m", "not server")
    passed, skipped, failed = recorder.listoutcomes()
    assert not failed, failures(recorder)
    assert len(passed) == 13  # 4 models x layout/schema, 3 with a model file x bindings, 2 roles known


def test_configs_relying_on_auto_complete_pass_offline(pytester):
    """No config.pbtxt next to an ONNX model, a Python model whose model.py declares its I/O: Triton
    loads both, so every check passes on the config Triton completes (inputs from the graph and from
    auto_complete_config), and the completion is reported as information."""
    recorder = run_suite(pytester, "autocomplete_minimal", "-m", "not server")
    passed, skipped, failed = recorder.listoutcomes()
    assert not failed, failures(recorder)
    assert len(passed) == 8  # 2 models x layout/schema/bindings/role


def test_unknown_role_is_not_tested_and_says_how_to_declare_it(pytester):
    """good/'s ensemble maps images to raw rows: neither raw nor end-to-end, so "not tested" with the way
    out, never passed; its preprocess step is tested through the ensemble; a declaration makes it known."""
    recorder = run_suite(pytester, "good", "-m", "not server", "-k", "role")
    skipped = {r.nodeid.split("::")[-1]: str(r.longrepr) for r in recorder.getreports("pytest_runtest_logreport") if r.skipped}
    assert "not tested, because its layout is neither raw" in skipped["test_role[yolo_ensemble]"]
    assert "--model yolo_ensemble=raw|e2e|skip" in skipped["test_role[yolo_ensemble]"]
    assert "not applicable: a step of ['yolo_ensemble']" in skipped["test_role[yolo_preprocess]"]
    declared = run_suite(pytester, "good", "-m", "not server", "-k", "role", "--model", "yolo_ensemble=skip")
    reasons = [str(r.longrepr) for r in declared.getreports("pytest_runtest_logreport") if r.skipped]
    assert any("marks yolo_ensemble skip" in reason for reason in reasons), reasons


def test_segmentation_heads_are_judged_by_their_detections_and_say_masks_are_not_tested(pytester):
    """YOLOv8-seg exports (nc = 80 declared): raw [116, anchors] and rows [100, 38], each beside prototypes
    output1 [32, H, W]. Their roles pass as what their detections are (not raw heads with 112 or 34
    classes), and each pass says, as a NotTestedWarning, that the masks were not tested."""
    recorder = run_suite(pytester, "segmentation_head", "-m", "not server", "-k", "role")
    passed, skipped, failed = recorder.listoutcomes()
    assert not failed, failures(recorder)
    assert sorted(r.nodeid.split("::")[-1] for r in passed) == ["test_role[yolo_seg]", "test_role[yolo_seg_nms]"]
    said = sorted(str(call.warning_message.message) for call in recorder.getcalls("pytest_warning_recorded")
                  if call.warning_message.category.__name__ == "NotTestedWarning")
    assert said == ["yolo_seg: segmentation head: detections judged from the first 4 + nc rows; masks not tested "
                    "(32 mask coefficients with prototypes 'output1')",
                    "yolo_seg_nms: segmentation head: detections judged from the first 6 columns; masks not tested "
                    "(32 mask coefficients with prototypes 'output1')"], said


def test_a_part_not_tested_reaches_the_report_and_the_verdict(tmp_path):
    """The segmentation heads' NotTestedWarning is in report.json, on the check that passed, and in the verdict:
    a pass that read masks it did not judge never reads as if it had."""
    import json

    from tests.conftest import certify_repo, verdict_block

    result = certify_repo(FIXTURE_DIR / "segmentation_head", tmp_path, ("config",), "-k", "test_role")
    block = verdict_block(result.stdout, "CERTIFIED")
    assert block is not None, result.stdout[-3000:]
    assert ("  yolo_seg: segmentation head: detections judged from the first 4 + nc rows; masks not tested (32 mask "
            "coefficients with prototypes 'output1') (a part these passes did not judge: 1 check(s): "
            "test_config_role.py::test_role[yolo_seg])") in block, block
    checks = json.loads((tmp_path / "report.json").read_text())["checks"]
    role = next(c for c in checks if c["id"].endswith("test_role[yolo_seg_nms]"))
    assert role["verdict"] == "passed" and len(role["not_tested_parts"]) == 1, role
    assert "masks not tested" in role["not_tested_parts"][0], role


def test_manifest_naming_a_model_the_repository_lacks_is_a_usage_error(pytester):
    result = pytester.runpytest_subprocess(str(SUITE), "--repo", str(FIXTURE_DIR / "good"), "--model", "yolo_nope=raw",
                                           "-p", "no:cacheprovider", "-m", "not server")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*declares*yolo_nope*, which the repository*does not have*"])


@pytest.mark.parametrize("fixture", sorted(BROKEN))
def test_broken_repository_fails_its_check_only(pytester, monkeypatch, fixture):
    from harness.checks.plan_compat import serving_host

    expected, words = BROKEN[fixture]
    for name, value in SERVING_HOST.get(fixture, {}).items():
        monkeypatch.setenv(name, value)
    serving_host.cache_clear()
    report_dir = pytester.path / "report"
    recorder = run_suite(pytester, fixture, "-m", "not server", "--report-dir", str(report_dir))
    failed = failures(recorder)
    assert set(failed) == {expected}, f"{fixture}: expected only {expected} to fail, failed: {sorted(failed)}\n{failed}"
    assert words in failed[expected], f"{fixture}: the message does not name the cause ({words!r}):\n{failed[expected]}"
    # and the verdict `yts certify` gives on this report (the certified profile) names that check: not certified
    # (the CLI itself is test_report's, on one of these fixtures)
    verdict = gate.judge(report_dir / "report.json", gate.load_profile("certified"))
    line = verdict.line()
    assert not verdict.certified and f"FAILED suites/config/" in line and expected in line, line


@pytest.mark.server
def test_good_repository_passes_live(pytester):
    recorder = run_suite(pytester, "good", "-k", "live")
    assert not recorder.getfailures(), failures(recorder)
    passed = [r.nodeid.split("::")[-1] for r in recorder.getreports("pytest_runtest_logreport") if r.when == "call" and r.passed]
    # yolo_onnx loads through the ONNX Runtime adapter (the embedded server has no onnxruntime backend)
    assert sorted(passed) == ["test_live[yolo_detector]", "test_live[yolo_ensemble]", "test_live[yolo_onnx]",
                              "test_live[yolo_preprocess]"]


@pytest.mark.server
def test_live_check_catches_what_only_serving_shows(pytester):
    """Declared output0 [6, 8], served [6, 4]: every file agrees with itself, the server's answer does not."""
    recorder = run_suite(pytester, "served_shape_differs")
    failed = failures(recorder)
    assert set(failed) == {"test_live[yolo_detector]"}, failed
    assert "output 'output0' has shape [1, 6, 4], declared [1, 6, 8]" in failed["test_live[yolo_detector]"]


@pytest.mark.server
@pytest.mark.parametrize("fixture, model, reason", [
    ("ensemble_missing_tensor", "yolo_ensemble", "'letterboxed', is not connected"),
    ("preferred_above_max_batch", "yolo_detector", "preferred size must be <= max batch size"),
])
def test_live_reports_tritons_own_reason(pytester, fixture, model, reason):
    """A model Triton refuses fails its live test with the reason from Triton's log, not "failed to poll"."""
    failed = failures(run_suite(pytester, fixture, "-k", "live"))
    assert set(failed) == {f"test_live[{model}]"}, failed
    assert reason in failed[f"test_live[{model}]"], failed


def _plan_signature(max_batch: int) -> Signature:
    shape = (-1, 3, 320, 320)
    return Signature(
        inputs=(TensorSpec("images", "FP32", shape),), outputs=(TensorSpec("output0", "FP32", (-1, 6, 100)),),
        profiles=(Profile("images", (1, 3, 320, 320), (4, 3, 320, 320), (max_batch, 3, 320, 320)),))


def test_plan_profile_max_batch_is_checked():
    """TensorRT is not installable here, so the plan path is driven with the signature a plan reports."""
    config = parse_config((FIXTURE_DIR / "max_batch_above_profile" / "yolo_onnx" / "config.pbtxt").read_text())
    assert not compare_signature(config, _plan_signature(8), "yolo_trt", "1/model.plan")
    (finding,) = compare_signature(config, _plan_signature(4), "yolo_trt", "1/model.plan")
    assert "max_batch_size 8 is above the profile's max batch 4" in finding.message



@pytest.mark.server
def test_live_checks_keep_their_own_server_beside_other_suites():
    """After a suite that opened the session's clients (letterbox's served property), the live checks
    still talk to the config suite's server. They once shared the plugin's cached http_client: models
    loaded on one server were inspected on the other, and yolo_onnx's failed load there left it unready."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "suites" / "letterbox" / "test_served.py"),
         str(SUITE / "test_config_live.py"), "-q", "-p", "no:cacheprovider", "-rs", "--no-adapter"],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "not tested on this host, because yolo_onnx needs the onnxruntime backend" in result.stdout, result.stdout[-2000:]


def test_plan_is_judged_against_the_serving_host():
    """The sidecar's TensorRT version and GPU against the server's: same GPU and TensorRT minor → loads;
    another GPU or TensorRT minor → refused, naming both; a version-compatible plan runs on a newer
    TensorRT; no GPU or TensorRT known here → not judged, saying which."""
    from harness.checks.plan_compat import plan_problems

    plan = FIXTURE_DIR / "plan_built_elsewhere" / "yolo_trt" / "1" / "model.plan"
    assert plan_problems(plan, "8.0", "10.3.1") == ([], None)
    (gpu,), _ = plan_problems(plan, "9.0", "10.3.0")
    assert "built for sm_8.0 (NVIDIA A100-SXM4-80GB); the serving GPU is sm_9.0" in gpu and "Version tag does not match" in gpu
    (trt,), _ = plan_problems(plan, "8.0", "10.8.0")
    assert "built with TensorRT 10.3.0; the server runs TensorRT 10.8.0" in trt
    problems, unjudged = plan_problems(plan, None, None)
    assert problems == [] and "no GPU on this host" in unjudged and "YTS_TENSORRT_VERSION" in unjudged
    assert plan_problems(FIXTURE_DIR / "plan_named_engine" / "yolo_trt" / "1" / "model.engine", "9.0", "10.3")[1]


@pytest.mark.server
def test_offline_completion_agrees_with_the_config_triton_reports(pytester):
    """yolo_auto's config is `backend: "python"`; the live check compares the offline completion (I/O and
    max_batch_size from its auto_complete_config) with GET /v2/models/yolo_auto/config field by field:
    no difference, and Triton adds only its normalisation (instance group, pinned memory, version policy)."""
    recorder = run_suite(pytester, "autocomplete_minimal", "-k", "live")
    assert not recorder.getfailures(), failures(recorder)
    passed = [r.nodeid.split("::")[-1] for r in recorder.getreports("pytest_runtest_logreport") if r.when == "call" and r.passed]
    assert passed == ["test_live[yolo_auto]"]
