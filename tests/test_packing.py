"""fp16 weight packing of ONNX graphs: packing halves the file, the packed graph still computes in fp32,
and unpacking gives back a plain fp32 graph equal to the original up to fp16 weight rounding."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.dataset import CLASSES
from harness.engines.packing import pack_fp16_weights, unpack_fp32_weights
from harness.paths import PROJECT_ROOT

REFERENCE = PROJECT_ROOT / "reference_model" / "yolov8n_shapes.onnx"


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def conv_net(rng: np.random.Generator) -> onnx.ModelProto:
    """Two convolutions with fp32 weights that fp16 cannot represent exactly."""
    w1 = rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 16).astype(np.float32)
    w2 = rng.normal(0, 0.3, (8, 16, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "conv_net",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, "h", "w"])],
                              [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def rounded(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with each weight rounded through fp16: what packing may lose, and no more."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16).astype(np.float32), init.name))
    return out


def test_round_trip_equals_original_within_fp16_rounding():
    rng = np.random.default_rng(0)
    m = conv_net(rng)
    packed = pack_fp16_weights(m)
    onnx.checker.check_model(packed)
    assert {i.data_type for i in packed.graph.initializer} == {TensorProto.FLOAT16}
    assert [n.op_type for n in packed.graph.node].count("Cast") == 3
    back = unpack_fp32_weights(packed)
    onnx.checker.check_model(back)
    assert "Cast" not in [n.op_type for n in back.graph.node]
    assert sorted(i.name for i in back.graph.initializer) == ["b1", "w1", "w2"]
    assert {i.data_type for i in back.graph.initializer} == {TensorProto.FLOAT}
    x = rng.random((2, 3, 24, 40), dtype=np.float32)
    ref, out, out_packed = run(m, x), run(back, x), run(packed, x)
    assert out.dtype == out_packed.dtype == np.float32
    np.testing.assert_array_equal(out, out_packed)  # packed computes in fp32 on the same rounded weights
    np.testing.assert_allclose(out, run(rounded(m), x), rtol=0, atol=1e-6)
    err = np.abs(out - ref).max()
    assert 0 < err < 2e-3 * np.abs(ref).max(), f"fp16 rounding error {err:.2e} of outputs up to {np.abs(ref).max():.2f}"


@pytest.fixture(scope="module")
def reference() -> onnx.ModelProto:
    return onnx.load(REFERENCE)


def test_reference_model_contract(reference):
    """Input images [N,3,H,W], output output0 [N,4+nc,anchors], opset 17, no NMS, <= 7 MB."""
    assert REFERENCE.stat().st_size <= 7 * 2**20
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    (inp,), (out,) = reference.graph.input, reference.graph.output
    assert (inp.name, out.name) == ("images", "output0")
    assert dims(inp)[1] == 3 and all(isinstance(d, str) for d in (dims(inp)[0], dims(inp)[2], dims(inp)[3]))
    assert dims(out)[1] == 4 + len(CLASSES)
    assert {o.domain or "": o.version for o in reference.opset_import}[""] == 17
    assert "NonMaxSuppression" not in {n.op_type for n in reference.graph.node}


def test_reference_unpacks_losslessly_and_packs_to_half(reference):
    """The committed weights are fp16 values: unpack then pack reproduces them bit for bit, at half size."""
    fp32 = unpack_fp32_weights(reference)
    assert all(i.data_type != TensorProto.FLOAT16 for i in fp32.graph.initializer)
    repacked = pack_fp16_weights(fp32)
    assert {i.name: i.raw_data for i in repacked.graph.initializer} == {i.name: i.raw_data for i in reference.graph.initializer}
    ratio = reference.ByteSize() / fp32.ByteSize()
    assert 0.45 < ratio < 0.55, f"packed/unpacked size {ratio:.2f}"
    x = np.random.default_rng(1).random((2, 3, 320, 256), dtype=np.float32)
    a, b = run(fp32, x), run(reference, x)
    assert a.shape == (2, 4 + len(CLASSES), (320 // 8) * (256 // 8) + (320 // 16) * (256 // 16) + (320 // 32) * (256 // 32))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-3)
