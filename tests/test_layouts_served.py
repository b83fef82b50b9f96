"""The layouts fixture repository (fixtures/layouts/) through a real server, both directions: the correct
EfficientNMS-style model (tensor in, NMS outputs) and the correct UINT8-pixels model (server-side
letterbox, rows out) pass the accuracy suite's box, mAP and served-vs-local checks, the served letterbox
property and the protocol suite, like any end-to-end model; the broken ones (xywh boxes where nothing
declares the box format and xyxy is assumed, normalised boxes never scaled back) fail the accuracy suite with
a message naming the cause and the declaration that fits (`box_format = "xywh"`), and the same xywh model
with that declaration passes.

Speed: the reference FP32 ONNX at 320 comes from the artifact cache (built once); three pytester runs,
each with its own process server: accuracy ~20 s, letterbox ~10 s, protocol ~15 s on two cores (the
accuracy test measured 47 s at load ~5 with five candidates, 29 s with the four before
yolo_nms_xywh_declared)."""

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
QUICK = paths.FIXTURES / "accuracy" / "profiles" / "quick.toml"
IMGSZ = 320  # the quick profile's


def _builder():
    return load_module(paths.FIXTURES / "layouts" / "build.py")


@pytest.fixture(scope="module")
def builder():
    return _builder()


@pytest.fixture(scope="module")
def onnx(builder):
    try:
        return builder.reference_onnx(IMGSZ)
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")


def run(pytester, *args: str):
    pytester.chdir()
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", f"--rootdir={ROOT}", "-c", str(ROOT / "pytest.ini"),
                                         "-rfs", timeout=900)


def outcomes(result) -> dict[str, str]:
    out = {}
    for line in result.outlines:
        match = re.match(r"^\S+::(\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", line)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def test_accuracy_judges_nms_and_pixel_layouts_and_names_the_broken_boxes(pytester, tmp_path, builder, onnx):
    repo = builder.build(tmp_path / "models", onnx, IMGSZ)
    candidates = [a for name in ("yolo_nms", "yolo_pixels", "yolo_nms_xywh", "yolo_pixels_normalized", "yolo_nms_xywh_declared")
                  for a in ("--accuracy-candidate", f"served:{name}")]
    result = run(pytester, str(ROOT / "suites" / "accuracy"), "--repo", str(repo), "--profile", str(QUICK),
                 "--accuracy-reference", str(onnx), "-v", *candidates)
    verdicts, text = outcomes(result), result.stdout.str()
    for name in ("yolo_nms", "yolo_pixels", "yolo_nms_xywh_declared"):
        for check in ("test_boxes", "test_end_to_end_matches_local_run", "test_map"):
            assert verdicts.get(f"{check}[served:{name}]") == "PASSED", f"{check}[{name}]: {verdicts}\n{text[-4000:]}"
    for name in ("yolo_nms_xywh", "yolo_pixels_normalized"):
        for check in ("test_boxes", "test_end_to_end_matches_local_run"):
            assert verdicts.get(f"{check}[served:{name}]") == "FAILED", f"{check}[{name}]: {verdicts}\n{text[-4000:]}"
    assert ("yolo_nms_xywh: the model writes x, y, w, h (top-left corner, width, height) where x1, y1, x2, y2 (corners) "
            "is assumed (nothing declares box_format): read as xywh in pixels, its boxes match the reference") in text, text[-4000:]
    assert '[layout.yolo_nms_xywh] box_format = "xywh"' in text, text[-4000:]
    assert ("yolo_pixels_normalized: the boxes are normalised (fractions of the image) and never scaled back to pixels: "
            "read as xyxy normalised, its boxes match the reference") in text, text[-4000:]


def test_served_letterbox_and_protocol_pass_on_the_correct_layouts(pytester, tmp_path, builder, onnx):
    repo = builder.build(tmp_path / "models", onnx, IMGSZ, models=builder.CORRECT)
    letterbox = run(pytester, str(ROOT / "suites" / "letterbox" / "test_served.py"), "--repo", str(repo), "-v")
    verdicts = outcomes(letterbox)
    assert verdicts == {"test_returned_box_maps_back_to_the_drawn_object[yolo_nms]": "PASSED",
                        "test_returned_box_maps_back_to_the_drawn_object[yolo_pixels]": "PASSED"}, letterbox.stdout.str()[-4000:]
    protocol = run(pytester, str(ROOT / "suites" / "protocol"), "--repo", str(repo), "-q")
    assert protocol.ret == pytest.ExitCode.OK, protocol.stdout.str()[-4000:]
    protocol.stdout.fnmatch_lines(["*bad-input catalogue: * judged on this repository, * conform, 0 do not*"])
