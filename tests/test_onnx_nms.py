"""NMS in the graph (harness.reference.onnx_nms, fixtures/onnx_nms), both directions:
- the merged graph gives the harness's own decode (class-aware NMS, batched) row for row;
- the config suite's onnx_nms check fails the broken models naming the setting and passes the correct one;
- served here through the Python backend running ONNX Runtime, the correct variant passes the accuracy suite's
  boxes / mAP / served-vs-local checks, the served letterbox property and the protocol suite; the
  center_point_box=0 one fails test_boxes; the native onnxruntime_onnx twin is not tested on this host.

Speed: the reference FP32 ONNX at 320 comes from the artifact cache; graph ~5 s, config ~5 s, accuracy ~20 s,
letterbox + protocol ~25 s on two cores."""

from __future__ import annotations

import numpy as np
import pytest

from harness import paths

# Imported before pytester snapshots sys.modules (OpenCV / ONNX Runtime abort when imported twice).
import harness.reference.build  # noqa: F401
import harness.vision.letterbox  # noqa: F401
from tests.conftest import load_module
from tests.test_layouts_served import QUICK, outcomes, run

ROOT = paths.PROJECT_ROOT
IMGSZ = 320


@pytest.fixture(scope="module")
def fixture_builder():
    return load_module(paths.FIXTURES / "onnx_nms" / "build.py")


@pytest.fixture(scope="module")
def detector():
    from harness.engines.artifacts import ArtifactCache, VariantSpec
    from harness.reference.build import source_model

    try:
        return ArtifactCache(source=source_model()).build(VariantSpec("fp32", imgsz=IMGSZ)).path
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")


def test_graph_nms_equals_the_harness_decode(tmp_path, detector):
    import onnxruntime as ort

    from harness.dataset.generate import render_one
    from harness.reference.onnx_nms import detector_with_nms
    from harness.vision.decode import decode_batch
    from harness.vision.pipeline import DetectionPipeline

    images = [render_one(7, slice_name, i, "mixed")[3] for slice_name in ("day", "night") for i in range(2)]
    batch, _ = DetectionPipeline(imgsz=IMGSZ).preprocess(images)
    raw = ort.InferenceSession(str(detector), providers=["CPUExecutionProvider"]).run(None, {"images": batch})[0]
    expected, num = decode_batch(raw, 0.25, 0.7, 300)
    merged = detector_with_nms(detector, tmp_path / "m.onnx", 0.25, 0.7, 300)
    rows = ort.InferenceSession(str(merged), providers=["CPUExecutionProvider"]).run(None, {"images": batch})[0]
    assert rows.shape == (len(images), 300, 6)
    assert num.sum() > 0
    for got, want, n in zip(rows, expected, num):
        kept = got[got[:, 4] > 0]
        assert len(kept) == n
        np.testing.assert_allclose(kept, want[:n], atol=1e-3)


def test_config_check_names_the_broken_nms_settings(pytester, tmp_path, fixture_builder, detector):
    repo = fixture_builder.build(tmp_path / "models", IMGSZ)
    result = run(pytester, str(ROOT / "suites" / "config" / "test_config_onnx_nms.py"), "--repo", str(repo), "-v")
    assert outcomes(result) == {"test_onnx_nms[nms_ok]": "PASSED", "test_onnx_nms[nms_centre]": "FAILED",
                                "test_onnx_nms[nms_iou1]": "FAILED"}, result.stdout.str()[-4000:]
    text = result.stdout.str()
    assert ("center_point_box=0 reads the boxes as y1, x1, y2, x2, but they are the YOLO head's first four channels, "
            "cx, cy, w, h") in text, text[-4000:]
    assert "IoU threshold 1: it never suppresses, every duplicate box is kept" in text, text[-4000:]


@pytest.mark.server
def test_accuracy_judges_the_variant_and_fails_the_wrong_box_format(pytester, tmp_path, fixture_builder, detector):
    repo = fixture_builder.build(tmp_path / "models", IMGSZ, {"nms_ok": {}, "nms_centre": {"center_point_box": 0}})
    result = run(pytester, str(ROOT / "suites" / "accuracy" / "test_accuracy.py"), "--repo", str(repo),
                 "--profile", str(QUICK), "--accuracy-reference", str(detector), "-v",
                 "--accuracy-candidate", "served:nms_ok", "--accuracy-candidate", "served:nms_centre")
    verdicts, text = outcomes(result), result.stdout.str()
    for check in ("test_boxes", "test_map", "test_end_to_end_matches_local_run"):
        assert verdicts.get(f"{check}[served:nms_ok]") == "PASSED", f"{check}: {verdicts}\n{text[-4000:]}"
    assert verdicts.get("test_boxes[served:nms_centre]") == "FAILED", f"{verdicts}\n{text[-4000:]}"


@pytest.mark.server
def test_letterbox_and_protocol_pass_on_the_variant(pytester, tmp_path):
    from harness.reference.onnx_nms import SERVED, build_repository

    repo = build_repository(tmp_path / "models", IMGSZ)
    letterbox = run(pytester, str(ROOT / "suites" / "letterbox" / "test_served.py"), "--repo", str(repo), "-v")
    # the native onnxruntime_onnx variant through the ONNX Runtime adapter (harness.adapters) on the embedded server
    assert outcomes(letterbox) == {f"test_returned_box_maps_back_to_the_drawn_object[{SERVED}]": "PASSED",
                                   f"test_returned_box_maps_back_to_the_drawn_object[{SERVED}_native]": "PASSED"}, \
        letterbox.stdout.str()[-4000:]
    protocol = run(pytester, str(ROOT / "suites" / "protocol"), "--repo", str(repo), "-q")
    assert protocol.ret == pytest.ExitCode.OK, protocol.stdout.str()[-4000:]
    protocol.stdout.fnmatch_lines(["*bad-input catalogue: * judged on this repository, * conform, 0 do not*"])
