"""Signature of an ONNX file: what the config suite compares config.pbtxt against."""

from __future__ import annotations

from pathlib import Path

import onnx

from harness.engines.signature import Signature, TensorSpec

# ONNX TensorProto element type -> Triton dtype name (without TYPE_), as in Triton's onnxruntime backend.
ONNX_TO_TRITON = {
    onnx.TensorProto.FLOAT: "FP32",
    onnx.TensorProto.FLOAT16: "FP16",
    onnx.TensorProto.BFLOAT16: "BF16",
    onnx.TensorProto.DOUBLE: "FP64",
    onnx.TensorProto.INT8: "INT8",
    onnx.TensorProto.INT16: "INT16",
    onnx.TensorProto.INT32: "INT32",
    onnx.TensorProto.INT64: "INT64",
    onnx.TensorProto.UINT8: "UINT8",
    onnx.TensorProto.UINT16: "UINT16",
    onnx.TensorProto.UINT32: "UINT32",
    onnx.TensorProto.UINT64: "UINT64",
    onnx.TensorProto.BOOL: "BOOL",
    onnx.TensorProto.STRING: "BYTES",
}


def _spec(value: onnx.ValueInfoProto) -> TensorSpec:
    tensor_type = value.type.tensor_type
    elem = tensor_type.elem_type
    if elem not in ONNX_TO_TRITON:
        raise ValueError(f"{value.name}: ONNX element type {onnx.TensorProto.DataType.Name(elem)} has no Triton dtype")
    # A dim with dim_param ("batch") or neither field set is dynamic: -1, as config.pbtxt writes it.
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
    return TensorSpec(value.name, ONNX_TO_TRITON[elem], shape)


def onnx_signature(model: onnx.ModelProto | str | Path) -> Signature:
    source = ""
    if not isinstance(model, onnx.ModelProto):
        source = str(model)
        model = onnx.load(str(model), load_external_data=False)
    graph = model.graph
    # Initializers listed as graph inputs (old exporters) are weights, not request tensors.
    weights = {init.name for init in graph.initializer}
    inputs = tuple(_spec(v) for v in graph.input if v.name not in weights)
    outputs = tuple(_spec(v) for v in graph.output)
    return Signature(inputs=inputs, outputs=outputs, source=source)
