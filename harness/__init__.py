"""yolo-triton-suite: conformance and benchmark harness for YOLO deployments on Triton."""

__version__ = "0.1.0"
