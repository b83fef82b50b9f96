"""TensorRT builder and runtime. The builder is not installable on the project's CPU machines
(shared/PLATFORM.md): there the module must import and refuse to build with a clear reason; on a host
with TensorRT and a GPU the real build, signature and run are checked against ONNX Runtime."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from harness.engines import tensorrt_build
from harness.engines.base import EngineUnavailable

HAS_TENSORRT = importlib.util.find_spec("tensorrt") is not None


@pytest.mark.skipif(HAS_TENSORRT, reason="tensorrt is installed: the real build test runs instead")
def test_builder_without_tensorrt_says_why(tmp_path):
    with pytest.raises(EngineUnavailable, match="TensorRT builder"):
        tensorrt_build.build_plan(tmp_path / "model.onnx", tmp_path / "model.plan")


@pytest.mark.skipif(HAS_TENSORRT, reason="tensorrt is installed")
def test_plan_signature_without_tensorrt_says_why(tmp_path):
    from harness.engines import read_signature

    (tmp_path / "model.plan").write_bytes(b"")
    with pytest.raises(EngineUnavailable, match="TensorRT Python API not installed"):
        read_signature(tmp_path / "model.plan")


@pytest.mark.tensorrt
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_build_plan_signature_profile_and_outputs(tmp_path, precision, record_property):
    if not HAS_TENSORRT:
        pytest.skip("TensorRT builder not installed (not on PyPI here; shared/PLATFORM.md)")
    torch = pytest.importorskip("torch", reason="TensorRTEngine uses torch CUDA buffers")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from test_variants import build  # the same per-session cache helpers

    from harness.engines import read_signature
    from harness.engines.artifacts import ArtifactCache
    from harness.engines.ort import OrtEngine
    from harness.engines.tensorrt_runtime import TensorRTEngine
    from test_variants import _source

    cache = ArtifactCache(root=tmp_path / "artifacts", source=_source())
    name = "trt-fp16-dyn-640" if precision == "fp16" else "trt-int8-day+night-minmax-qint8-dyn-640"
    plan = build(cache, name).path
    sidecar = json.loads(plan.with_suffix(".json").read_text())
    assert sidecar["precision"] == precision and sidecar["tensorrt_version"] and sidecar["compute_capability"]
    signature = read_signature(plan)
    (image,) = signature.inputs
    assert image.shape == (-1, 3, 640, 640)
    (profile,) = signature.profiles
    assert (profile.min[0], profile.opt[0], profile.max[0]) == tensorrt_build.DEFAULT_BATCH_RANGE
    x = np.random.default_rng(0).random((2, 3, 640, 640), dtype=np.float32)
    ours = TensorRTEngine(plan).infer({"images": x})["output0"]
    reference = OrtEngine(build(cache, "fp32-dyn-640").path).infer({"images": x})["output0"]
    record_property(f"trt_{precision}_box_abs_max_px", float(np.abs(ours[:, :4] - reference[:, :4]).max()))
    assert np.abs(ours[:, :4] - reference[:, :4]).max() < 16.0
