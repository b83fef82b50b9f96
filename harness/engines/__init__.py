"""Engines layer: one interface over ONNX Runtime, PyTorch and TensorRT, each reporting its I/O signature.

Python-backend models have no file to read: their I/O is what config.pbtxt declares (the repository
layer handles them)."""

from __future__ import annotations

from pathlib import Path

from harness.engines.signature import Profile, Signature, TensorSpec

__all__ = ["Profile", "Signature", "TensorSpec", "read_signature", "open_engine"]


def read_signature(path: str | Path) -> Signature:
    """Signature of a model file by its type: .onnx (ONNX graph), .plan/.engine (TensorRT)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        from harness.engines.onnx_signature import onnx_signature

        return onnx_signature(path)
    if suffix in (".plan", ".engine"):
        from harness.engines.tensorrt_runtime import plan_signature

        return plan_signature(path)
    raise ValueError(f"{path}: no signature reader for {suffix!r} files (.onnx, .plan); Python-backend models declare their I/O in config.pbtxt")


def open_engine(path: str | Path, *, runtime: str = "onnxruntime", device: str = "cpu", **options):
    """The engine for a model file: runtime is "onnxruntime", "torch" or "tensorrt"."""
    if runtime == "onnxruntime":
        from harness.engines.ort import OrtEngine

        return OrtEngine(path, device=device, **options)
    if runtime == "torch":
        from harness.engines.torch_engine import TorchEngine

        return TorchEngine(path, device=None if device == "auto" else device, **options)
    if runtime == "tensorrt":
        from harness.engines.tensorrt_runtime import TensorRTEngine

        return TensorRTEngine(path, device=device if device.startswith("cuda") else "cuda:0", **options)
    raise ValueError(f"unknown runtime {runtime!r} (onnxruntime, torch, tensorrt)")
