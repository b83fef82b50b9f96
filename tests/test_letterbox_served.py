"""suites/letterbox/test_served.py, the black-box letterbox property through a served end-to-end model:
it finds end-to-end models from the repository's configs, skips saying why where there is none, passes
the reference yolo_e2e / yolo_ensemble, and catches fixtures/letterbox/served/offset_not_undone (the
reference yolo_e2e with the padding offset not subtracted), printing the shrunk source size.

Speed: the discovery and skip tests are instant; each served run starts a Triton server (process
launcher) and sends 12 images per model (~30-60 s on two shared cores). They need the committed
reference model (reference_model/yolov8n_shapes.onnx) and skip, saying so, until it lands."""

from __future__ import annotations

import re

import pytest

from harness import paths
from harness.vision.served import end_to_end_models
from tests.conftest import derive_served, run_suite_file

# Imported here, before pytester snapshots sys.modules (it drops what a test imported, and OpenCV /
# ONNX Runtime abort when imported a second time in one process).
import harness.reference.build  # noqa: E402,F401
import harness.vision.letterbox  # noqa: E402,F401

SUITE_FILE = paths.PROJECT_ROOT / "suites" / "letterbox" / "test_served.py"
TOY = paths.FIXTURES / "protocol" / "toy_yolo"


def run_served(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_suite_file(pytester, SUITE_FILE, "-q", *args)


# -- discovery ----------------------------------------------------------------------------------
def test_reference_end_to_end_models_are_found_with_their_geometry():
    found = {m.name: m for m in end_to_end_models(paths.REFERENCE_REPO_SOURCES)}
    assert sorted(found) == ["yolo_e2e", "yolo_ensemble"]
    e2e, ensemble = found["yolo_e2e"], found["yolo_ensemble"]
    assert (e2e.input_name, e2e.input_shape, e2e.detections, e2e.count) == ("images", (1, 1), "detections", "num_detections")
    assert e2e.imgsz == (640, 640) and e2e.stride == 32
    assert ensemble.imgsz == (640, 640), "the ensemble's input size comes from its yolo_preprocess step"


def test_models_without_encoded_input_or_detections_are_not_end_to_end(tiny_repository):
    assert end_to_end_models(tiny_repository) == []  # FP32 X -> Y: not an image model
    (toy,) = end_to_end_models(TOY)
    assert toy.name == "yolo_e2e" and toy.imgsz is None  # encoded images in, but no stated input size


# -- skips --------------------------------------------------------------------------------------
def test_repository_without_end_to_end_model_is_not_applicable_saying_why(pytester, tiny_repository):
    result = run_served(pytester, f"--repo={tiny_repository}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert result.parseoutcomes().get("skipped") == 1
    result.stdout.fnmatch_lines(["*not applicable: * has no end-to-end model (one TYPE_STRING/BYTES image input*"])


def test_end_to_end_model_without_input_size_is_skipped_saying_why(pytester):
    result = run_served(pytester, f"--repo={TOY}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*not tested, because yolo_e2e's config does not state its input size*"])


# -- both directions through a real server ------------------------------------------------------
def test_reference_end_to_end_models_pass(pytester, reference_repository):
    result = run_served(pytester, f"--repo={reference_repository}")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-4000:]
    assert result.parseoutcomes().get("passed") == 2, output[-4000:]  # yolo_e2e and yolo_ensemble


def test_offset_not_undone_is_caught_and_shrunk(pytester, tmp_path, reference_repository):
    broken = derive_served(reference_repository, "offset_not_undone", tmp_path / "models")

    result = run_served(pytester, f"--repo={broken}")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, f"offset_not_undone was not caught:\n{output[-4000:]}"
    result.stdout.fnmatch_lines(["FAILED *test_returned_box_maps_back_to_the_drawn_object[[]yolo_e2e[]]*"])
    assert "the padding offset was not subtracted" in output, output[-4000:]
    # hypothesis shrank it (sources are drawn up to 2048 px a side) and printed the failing source size
    shrunk = re.search(r"Failing test case: .*?source (\d+)x(\d+) \(w x h\), ", output, re.S)  # hypothesis' note
    assert shrunk, f"no shrunk failing example printed:\n{output[-4000:]}"
    w, h = int(shrunk[1]), int(shrunk[2])
    assert max(h, w) <= 256, f"failure not shrunk toward a small source: {w}x{h}"
