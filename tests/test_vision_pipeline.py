"""LocalPipeline end to end on a tiny ONNX graph whose raw output is known: bytes and arrays in,
detections in source pixels out, so letterbox, decode, NMS and restore are checked together."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

from harness.vision.pipeline import DetectionPipeline, LocalPipeline

IMGSZ = 320
NC = 3
# Raw anchors in input pixels: cx, cy, w, h, class, score.
ANCHORS = [
    (160, 160, 64, 32, 1, 0.9),  # the object
    (162, 160, 64, 32, 1, 0.8),  # its duplicate, same class: suppressed
    (160, 160, 64, 32, 0, 0.6),  # same place, another class: kept (class-aware)
    (100, 100, 10, 10, 2, 0.1),  # below conf
    (20, 20, 40, 40, 2, 0.5),  # reaches into the letterbox band: clipped on restore
]


def raw_output() -> np.ndarray:
    raw = np.zeros((1, 4 + NC, 16), dtype=np.float32)
    for a, (cx, cy, w, h, c, s) in enumerate(ANCHORS):
        raw[0, :4, a] = cx, cy, w, h
        raw[0, 4 + c, a] = s
    return raw


def constant_head_model() -> onnx.ModelProto:
    """images [N, 3, 320, 320] -> output0 [N, 4 + nc, 16]: the fixed raw output, once per image."""
    raw = numpy_helper.from_array(raw_output(), "raw")
    nodes = [
        helper.make_node("Shape", ["images"], ["shape"], start=0, end=1),
        helper.make_node("Concat", ["shape", "tail"], ["out_shape"], axis=0),
        helper.make_node("Expand", ["raw", "out_shape"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes, "constant_head",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, IMGSZ, IMGSZ])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 4 + NC, 16])],
        initializer=[raw, numpy_helper.from_array(np.array([4 + NC, 16], dtype=np.int64), "tail")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "constant_head.onnx"
    onnx.save(constant_head_model(), str(path))
    return path


def png(h: int, w: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (w, h), (90, 30, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_detections_restored_to_each_source(model_path):
    pipeline = LocalPipeline(model_path, imgsz=IMGSZ, conf=0.25, iou=0.7, max_det=10)
    # 480x640 source: r = 0.5, content 240x320, 40 px bands top and bottom. 320x320 array: identity.
    detections, num = pipeline([png(480, 640), np.zeros((IMGSZ, IMGSZ, 3), np.uint8)])
    assert detections.shape == (2, 10, 6) and num.tolist() == [3, 3]
    np.testing.assert_allclose(detections[0, :3], [
        [256, 208, 384, 272, 0.9, 1],  # ((128, 144, 192, 176) - (0, 40)) / 0.5
        [256, 208, 384, 272, 0.6, 0],
        [0, 0, 80, 0, 0.5, 2],  # (0, 0, 40, 40) -> (0, -80, 80, 0), clipped
    ], rtol=1e-6)
    np.testing.assert_allclose(detections[1, :3, :4], [[128, 144, 192, 176], [128, 144, 192, 176], [0, 0, 40, 40]])
    assert (detections[:, 3:] == -1).all()


def test_served_path_postprocess_is_the_same_code(model_path):
    """A Python-backend model runs DetectionPipeline.preprocess/postprocess around its own runtime."""
    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    local = LocalPipeline(session, imgsz=IMGSZ, max_det=10)
    served = DetectionPipeline(imgsz=IMGSZ, max_det=10)
    batch, metas = served.preprocess([png(200, 100)])
    assert batch.shape == (1, 3, IMGSZ, IMGSZ) and batch.dtype == np.float32
    raw = session.run(None, {"images": batch})[0]
    for got, want in zip(served.postprocess(raw, metas), local([png(200, 100)])):
        np.testing.assert_array_equal(got, want)


def test_fixed_model_size_must_match_imgsz(model_path):
    with pytest.raises(ValueError, match="fixed at"):
        LocalPipeline(model_path, imgsz=640)
