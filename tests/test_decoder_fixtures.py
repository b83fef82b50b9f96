"""suites/accuracy/test_decoder.py: a served end-to-end model's JPEG decoding judged apart from its
precision. The reference yolo_e2e (PIL decodes both encodings: identical answers) passes;
fixtures/accuracy/served/jpeg_draft (the reference yolo_e2e decoding JPEGs in libjpeg's 1/4 draft mode,
PNGs normally) fails naming its JPEG decoding. Quick profile (4 day + 4 night images); each run starts
the embedded server: ~30-60 s on two shared cores. Skips until the trained reference model is committed."""

from __future__ import annotations


import pytest

from harness import paths
from tests.conftest import derive_served, run_suite_file

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: E402,F401

SUITE_FILE = paths.PROJECT_ROOT / "suites" / "accuracy" / "test_decoder.py"
QUICK = paths.FIXTURES / "accuracy" / "profiles" / "quick.toml"


def run_decoder_check(pytester: pytest.Pytester, repository) -> pytest.RunResult:
    return run_suite_file(pytester, SUITE_FILE, "-q", f"--repo={repository}", "--profile", str(QUICK),
                          "--accuracy-candidate", "served:yolo_e2e", timeout=600)


def test_reference_decodes_jpeg_as_it_decodes_png(pytester, reference_repository):
    result = run_decoder_check(pytester, reference_repository)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 1, output[-4000:]


def test_jpeg_draft_decoding_is_caught(pytester, tmp_path, reference_repository):
    broken = derive_served(reference_repository, "jpeg_draft", tmp_path / "models", paths.FIXTURES / "accuracy" / "served")
    result = run_decoder_check(pytester, broken)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, f"jpeg_draft was not caught:\n{output[-4000:]}"
    result.stdout.fnmatch_lines(["*served:yolo_e2e JPEG decoding: overall mAP50_95 on JPEG * of its * on the same "
                                 "pixels losslessly encoded (need >= 99%): its JPEG decoding loses detections*"])
