"""suites/accuracy/test_batched_answers.py both ways: the reference yolo_e2e (a bad image fails its own
request, never the batch) gives every image its own answer under concurrency, in multi-image requests and
beside bad requests, with batches seen in the statistics API; fixtures/batching/served/rotated_answers
(responses rotated by one when a batch holds several requests) and bad_fails_batch (one undecodable image
fails the whole batch) are caught naming the cause. Each run starts the embedded server: ~30-40 s on two
shared cores; skips until the trained reference model is committed."""

from __future__ import annotations

import re

import pytest

from harness import paths
from tests.conftest import derive_served, load_module, run_suite_file

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: F401

pytestmark = pytest.mark.server
SUITE_FILE = paths.PROJECT_ROOT / "suites" / "accuracy" / "test_batched_answers.py"
QUICK = paths.FIXTURES / "accuracy" / "profiles" / "quick.toml"


def run_check(pytester: pytest.Pytester, repository, *models: str) -> pytest.RunResult:
    candidates = [a for model in models for a in ("--accuracy-candidate", f"served:{model}")]
    return run_suite_file(pytester, SUITE_FILE, "-v", f"--repo={repository}", "--profile", str(QUICK), *candidates,
                          timeout=600)


def test_reference_answers_each_request_under_batching(pytester, reference_repository):
    result = run_check(pytester, reference_repository, "yolo_e2e")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 1, output[-4000:]


def test_third_party_answers_each_request_under_batching(pytester, tmp_path, reference_repository):
    """fixtures/third_party's vendor_yolo (NMS image by image) passes, twin rounds included."""
    vendor = load_module(paths.FIXTURES / "third_party" / "build.py")
    repository = vendor.build(tmp_path / "models", vendor.reference_onnx(640))
    result = run_check(pytester, repository, vendor.NAME)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 1, output[-4000:]


@pytest.mark.slow
def test_reference_raw_and_ensemble_answer_each_request_under_batching(pytester, reference_repository):
    result = run_check(pytester, reference_repository, "yolo_raw", "yolo_ensemble")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 2, output[-4000:]


@pytest.mark.parametrize("variant, cause, not_said", [
    ("rotated_answers", r"under concurrency: \d+ of \d+ images got another request's answer — responses are not returned to their own "
                        r"requests: \S+ got \S+'s", None),
    ("bad_fails_batch", r"mixed batch: \d+ of \d+ good requests failed beside a bad one — one bad input fails its neighbours", None),
    ("cross_image_nms", r"with its twins in one request: \d+ of \d+ images lost boxes that they have when sent alone — boxes of "
                        r"one image suppressed by another image's in the same batch .*: \S+( \(.+?\))? lost \d+ of its \d+ boxes, "
                        r"each under a same-class box kept in the answer of \S+",
     r"answered differently than alone|got another request's answer|under concurrency:|in \d+-image requests:"),
], ids=["rotated_answers", "bad_fails_batch", "cross_image_nms"])
def test_broken_batching_is_caught(pytester, tmp_path, reference_repository, variant, cause, not_said):
    broken = derive_served(reference_repository, variant, tmp_path / "models", paths.FIXTURES / "batching" / "served")
    result = run_check(pytester, broken, "yolo_e2e")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, f"{variant} was not caught:\n{output[-4000:]}"
    assert re.search(cause, output), f"{variant}: the message should say {cause!r}\n{output[-4000:]}"
    # the cause told apart: distinct images come through, nothing is called another mismatch
    assert not_said is None or not re.search(not_said, output), f"{variant}: {not_said!r} should not be said\n{output[-4000:]}"
