"""NMS in the graph: each ONNX NonMaxSuppression's box format, IoU and score thresholds and keep count,
judged for YOLO detections (harness.checks.onnx_nms); models without one are not applicable."""

from harness.checks.onnx_nms import check_onnx_nms


def test_onnx_nms(entry, judge):
    judge(check_onnx_nms, entry)
