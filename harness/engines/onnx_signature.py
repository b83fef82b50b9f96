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
    """Raises ValueError for a file that is no ONNX model: empty (0 bytes), not a protobuf, or a
    protobuf with no graph (protobuf reads an empty file as an empty ModelProto without a word)."""
    source = ""
    if not isinstance(model, onnx.ModelProto):
        source = str(model)
        path = Path(model)
        if path.is_file() and path.stat().st_size == 0:
            raise ValueError(f"{path.name} is empty (0 bytes): not an ONNX model (a failed export or copy?)")
        try:
            model = onnx.load(str(model), load_external_data=False)
        except Exception as error:  # onnx raises DecodeError, or its own errors, for a corrupt file
            raise ValueError(f"{path.name} is corrupt: it does not parse as an ONNX model ({error})") from error
        if not model.graph.node and not model.graph.input and not model.graph.output:
            raise ValueError(f"{path.name} holds no ONNX graph (no nodes, inputs or outputs): empty or corrupt")
    graph = model.graph
    # Initializers listed as graph inputs (old exporters) are weights, not request tensors.
    weights = {init.name for init in graph.initializer}
    inputs = tuple(_spec(v) for v in graph.input if v.name not in weights)
    outputs = tuple(_spec(v) for v in graph.output)
    return Signature(inputs=inputs, outputs=outputs, source=source)
