"""Engines layer: signatures read from files, input checks, and each runtime against ONNX Runtime.

Model tests use the committed reference model (reference_model/yolov8n_shapes.onnx) when it exists; before
it lands, $YTS_DEV_MODEL may point at any ultralytics YOLOv8 ONNX export; otherwise they skip."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.engines import read_signature
from harness.engines.artifacts import REFERENCE_MODEL
from harness.engines.base import Engine, EngineUnavailable
from harness.engines.ort import OrtEngine


def source_model() -> Path:
    if REFERENCE_MODEL.exists():
        return REFERENCE_MODEL
    if os.environ.get("YTS_DEV_MODEL"):
        return Path(os.environ["YTS_DEV_MODEL"])
    pytest.skip(f"{REFERENCE_MODEL} not committed yet and $YTS_DEV_MODEL not set")


@pytest.fixture(scope="module")
def fp32_model(tmp_path_factory) -> Path:
    from harness.engines.variants import load_reference

    path = tmp_path_factory.mktemp("engines") / "fp32.onnx"
    onnx.save(load_reference(source_model()), str(path))
    return path


def tiny_graph(path: Path) -> Path:
    """Identity-like graph with the dim kinds a signature must tell apart: named symbolic, unnamed, fixed."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 3, None])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 3, None])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [2])
    shape = helper.make_node("Shape", ["x"], ["s"], start=0, end=2)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"]), shape, helper.make_node("Identity", ["s"], ["idx"])],
                              "tiny", [x], [y, idx])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_onnx_signature_maps_dtypes_and_dynamic_dims(tmp_path):
    signature = read_signature(tiny_graph(tmp_path / "tiny.onnx"))
    assert [(s.name, s.dtype, s.shape) for s in signature.inputs] == [("x", "FP16", (-1, 3, -1))]
    assert [(s.name, s.dtype, s.shape) for s in signature.outputs] == [("y", "FP16", (-1, 3, -1)), ("idx", "INT64", (2,))]
    assert signature.source.endswith("tiny.onnx")


def test_read_signature_refuses_unknown_files(tmp_path):
    with pytest.raises(ValueError, match="config.pbtxt"):
        read_signature(tmp_path / "model.py")


def test_ort_engine_checks_inputs_by_name_and_shape(tmp_path):
    engine = OrtEngine(tiny_graph(tmp_path / "tiny.onnx"))
    assert isinstance(engine, Engine)
    out = engine.infer({"x": np.ones((2, 3, 5), np.float16)})
    assert out["idx"].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"missing \['x'\]"):
        engine.infer({"images": np.ones((2, 3, 5), np.float16)})
    with pytest.raises(ValueError, match=r"expected shape \(-1, 3, -1\)"):
        engine.infer({"x": np.ones((2, 4, 5), np.float16)})


def test_ort_engine_reports_yolo_export_signature(fp32_model):
    engine = OrtEngine(fp32_model)
    (image,) = engine.signature.inputs
    (output,) = engine.signature.outputs
    assert (image.name, image.dtype, image.shape) == ("images", "FP32", (-1, 3, -1, -1))
    assert output.name == "output0" and output.dtype == "FP32"
    assert output.shape[0] == -1 and output.shape[1] > 4 and output.shape[2] == -1
    assert (engine.precision, engine.device) == ("fp32", "cpu")


def test_ort_cuda_provider_absent_is_a_clear_error(fp32_model):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        engine = OrtEngine(fp32_model, device="cuda:0")
        assert engine.device == "cuda:0"
    else:
        with pytest.raises(EngineUnavailable, match="CUDAExecutionProvider"):
            OrtEngine(fp32_model, device="cuda:0")


def _yolo_input(batch: int = 2, size: int = 320) -> np.ndarray:
    return np.random.default_rng(0).random((batch, 3, size, size), dtype=np.float32)


def test_torch_engine_fp32_matches_onnxruntime(fp32_model):
    """The torch graph interpreter is exact against ORT in fp32 (CPU), so fp16 differences on CUDA are
    fp16's, not the interpreter's."""
    pytest.importorskip("torch", reason="torch not installed (the gpu extra); TorchEngine is for GPU hosts")
    from harness.engines.torch_engine import TorchEngine

    x = _yolo_input()
    ours = TorchEngine(fp32_model, device="cpu", precision="fp32").infer({"images": x})["output0"]
    reference = OrtEngine(fp32_model).infer({"images": x})["output0"]
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, atol=1e-3, rtol=1e-4)


def test_torch_engine_fp16_on_cuda(fp32_model, record_property):
    torch = pytest.importorskip("torch", reason="torch not installed (the gpu extra)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: fp16 arithmetic is measured on the GPU host")
    from harness.engines.torch_engine import TorchEngine

    x = _yolo_input(size=640)
    engine = TorchEngine(fp32_model, precision="fp16")
    assert (engine.precision, engine.device) == ("fp16", "cuda:0")
    ours = engine.infer({"images": x})["output0"]
    reference = OrtEngine(fp32_model).infer({"images": x})["output0"]
    box_error = np.abs(ours[:, :4] - reference[:, :4])
    score_error = np.abs(ours[:, 4:] - reference[:, 4:])
    record_property("torch_fp16_box_abs_max_px", float(box_error.max()))
    record_property("torch_fp16_score_abs_max", float(score_error.max()))
    assert box_error.max() < 4.0, f"fp16 box error {box_error.max():.2f} px vs fp32"
    assert score_error.max() < 0.02, f"fp16 class-score error {score_error.max():.4f} vs fp32"


def test_compile_switches_a_c_locale_process_to_utf8_text():
    """Triton's Python stub runs in the C locale; inductor reads its templates with open()'s default
    encoding and fails on ASCII (seen: UnicodeDecodeError at the first torch.compile in a served model)."""
    import subprocess
    import sys

    code = ("import locale; from harness.engines.torch_engine import _utf8_text_files; "
            "before = locale.getencoding(); _utf8_text_files(); print(before, locale.getencoding())")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.split()
    assert before != "UTF-8" and after == "UTF-8", done.stdout
