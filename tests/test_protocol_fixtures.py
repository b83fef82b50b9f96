"""suites/protocol passes the toy repository and flags every broken fixture in fixtures/protocol/ by
the check meant for it, with a message naming the cause, and `yts certify` does not certify it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.paths import PROJECT_ROOT
from tests.conftest import assert_not_certified, certify_repo

SUITE = PROJECT_ROOT / "suites" / "protocol"
FIXTURES = PROJECT_ROOT / "fixtures" / "protocol"

# fixture -> (-k selection, tests that must fail, words the failure must contain)
BROKEN = {
    "nan_crash": ("nan_input", ["test_bad_input[nan_input-http]", "test_bad_input[nan_input-grpc]"],
                  "the model's stub process died on this input"),
    "wrong_dtype": ("outputs_match_model_metadata", ["test_outputs_match_model_metadata[http]"],
                    "detections comes back as FP64, metadata declares FP32 (wrong dtype returned by the model)"),
    "swallows_errors": ("empty_bytes or non_image_bytes or truncated_jpeg or decompression_bomb",
                        ["test_bad_input[empty_bytes-http]", "test_bad_input[non_image_bytes-grpc]",
                         "test_bad_input[decompression_bomb_header-http]"],
                        "the deployment answers invalid input as if it were valid (errors swallowed)"),
    "path_escape": ("paths_stay_inside_root", ["test_repository_paths_stay_inside_root"],
                    "yolo_raw/1/labels.txt: symlink to '/etc/hostname' resolves outside the repository"),
    # Triton answers wrong_dtype_image itself (400, before the queue): the good request after it is the one refused
    "queue_timeout": ("wrong_dtype_image or empty_bytes",
                      ["test_bad_input[wrong_dtype_image-http]", "test_bad_input[empty_bytes-grpc]"],
                      "yolo_e2e's queue policy refusing a request that waited in the queue past its timeout, not a "
                      "deployment that stopped serving: dynamic_batching.default_queue_policy { timeout_action: REJECT "
                      "default_timeout_microseconds: 100000 } rejects after 100 ms; max_queue_delay_microseconds: 250000"),
}


def run_suite(repo: str, *args: str) -> subprocess.CompletedProcess:
    """A subprocess: each run starts its own server, and a crashed stub must not touch this process."""
    return subprocess.run([sys.executable, "-m", "pytest", str(SUITE), "--repo", str(FIXTURES / repo), "-q",
                           "-p", "no:cacheprovider", *args], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)


@pytest.mark.server
def test_toy_repository_passes():
    result = run_suite("toy_yolo")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "bad-input catalogue: 29 kinds, 29 judged on this repository, 29 conform" in result.stdout, result.stdout[-2000:]
    assert "[yts] WARNING: process launcher: the repository's model code (model.py) runs on this host" in result.stdout


@pytest.mark.server
@pytest.mark.parametrize("fixture", sorted(BROKEN))
def test_broken_fixture_is_flagged_and_not_certified(fixture, tmp_path):
    """Through `yts certify`, as a user gates on it: the checks meant for the fixture fail naming the cause,
    and the verdict names them."""
    selection, failing, cause = BROKEN[fixture]
    result = certify_repo(FIXTURES / fixture, tmp_path / "report", ("protocol",), "-k", selection)
    for test in failing:
        assert f"FAILED suites/protocol/" in result.stdout and test in result.stdout, f"{test} did not fail for {fixture}:\n{result.stdout[-4000:]}"
    assert_not_certified(result, "protocol", failing[0].split("[")[0], cause)
    if fixture == "queue_timeout":
        assert "after wrong_dtype_image a good request was refused: http 503 'Request timeout expired'" in result.stdout
        assert "the deployment stopped serving" not in result.stdout, result.stdout[-4000:]
