"""The performance audit at reduced precision (issue 31 item 5), both ways, on the reference yolo_raw with
its model.py wrapped by a fixture of fixtures/batching/audit: answers under load whose tensors moved by
rounding (every box centre one pixel off when batched, as an FP16 engine at another batch size does) pass
once judged by detections with the FP16 box gates, and fail as FP32 tensors; an answer cached across a
batch (another image's detections) fails even at FP16. ~40-60 s a run on two shared cores."""

from __future__ import annotations

import json

import pytest

from harness import paths
from tests.conftest import derive_served, run_suite_file

import harness.reference.build  # noqa: F401  (before pytester snapshots sys.modules)

pytestmark = pytest.mark.server
SUITE_FILE = paths.PROJECT_ROOT / "suites" / "batching" / "test_batching.py"
AUDIT = paths.FIXTURES / "batching" / "audit"
FAST = ("--batching-window", "0.5", "--batching-warmup", "0.3", "--batching-max-windows", "4",
        "--batching-audit-inputs", "8", "--batching-audit-rounds", "3", "--batching-audit-sample", "16")


def run_audit(pytester, reference_repository, tmp_path, variant: str, precision: str):
    repository = derive_served(reference_repository, variant, tmp_path / variant, fixtures=AUDIT, model="yolo_raw")
    out = tmp_path / "bench.json"
    result = run_suite_file(pytester, SUITE_FILE, "--benchmark-only", f"--repo={repository}", "-k", "performance_audit",
                            "--precision", f"yolo_raw={precision}", f"--benchmark-json={out}", *FAST, timeout=600)
    extra = next((b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]), {}) if out.exists() else {}
    return result, extra


def test_rounding_under_batching_passes_by_detections_at_fp16(pytester, reference_repository, tmp_path):
    result, extra = run_audit(pytester, reference_repository, tmp_path, "rounded_when_batched", "fp16")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-4000:]
    assert extra["audit"]["mismatches"] == 0 and extra["within_box_gates"] > 0, extra


def test_rounding_under_batching_fails_as_fp32_tensors(pytester, reference_repository, tmp_path):
    result, _ = run_audit(pytester, reference_repository, tmp_path, "rounded_when_batched", "fp32")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-4000:]
    assert "(fp32): " in out and "differ from the sequential answers to the same inputs (cached" in out, out[-4000:]


def test_an_answer_cached_across_the_batch_fails_at_fp16(pytester, reference_repository, tmp_path):
    result, extra = run_audit(pytester, reference_repository, tmp_path, "first_answer_for_all", "fp16")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-4000:]
    assert "beyond rounding (judged by detections)" in out and "detections beyond the fp16 box gates" in out, out[-4000:]
