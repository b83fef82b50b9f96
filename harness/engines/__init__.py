"""Engines layer: one interface over ONNX Runtime, PyTorch and TensorRT, each reporting its I/O signature."""
