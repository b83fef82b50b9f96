"""Store an ONNX graph's float weights as fp16 on disk and get the plain fp32 graph back.

The reference model is committed once, at half size: ultralytics' checkpoint holds fp16 weights, so
storing them fp16 loses nothing. Packed, each large FLOAT initializer becomes FLOAT16 feeding a
Cast(to=FLOAT), so the graph still computes in fp32; unpacking folds those Casts away and is the FP32
reference every variant is built from."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PACKED_SUFFIX = "__fp16"
CAST_PREFIX = "unpack_fp16/"
MIN_ELEMENTS = 16  # tiny tensors (shapes, scalars) are left as they are


def pack_fp16_weights(model: onnx.ModelProto, *, min_elements: int = MIN_ELEMENTS) -> onnx.ModelProto:
    """Copy of `model` with FLOAT initializers of >= min_elements stored FLOAT16 behind Cast(to=FLOAT)."""
    packed = onnx.ModelProto()
    packed.CopyFrom(model)
    graph = packed.graph
    graph_inputs = {i.name for i in graph.input}
    kept, casts = [], []
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT or init.name in graph_inputs or int(np.prod(init.dims)) < min_elements:
            kept.append(init)
            continue
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name + PACKED_SUFFIX)
        kept.append(half)
        casts.append(helper.make_node("Cast", [half.name], [init.name], name=CAST_PREFIX + init.name, to=TensorProto.FLOAT))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return packed


def unpack_fp32_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """Inverse of pack_fp16_weights: fp32 initializers under their original names, no weight Casts."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}
    users: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            users[name] = users.get(name, 0) + 1
    folded: dict[str, onnx.TensorProto] = {}
    drop_nodes = set()
    for k, node in enumerate(graph.node):
        src = node.input[0] if node.op_type == "Cast" and node.input else None
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        if (src in inits and inits[src].data_type == TensorProto.FLOAT16 and to == TensorProto.FLOAT
                and users.get(src) == 1):
            folded[src] = numpy_helper.from_array(numpy_helper.to_array(inits[src]).astype(np.float32), node.output[0])
            drop_nodes.add(k)
    new_inits = [folded.get(i.name, i) for i in graph.initializer]
    new_nodes = [n for k, n in enumerate(graph.node) if k not in drop_nodes]
    del graph.initializer[:]
    graph.initializer.extend(new_inits)
    del graph.node[:]
    graph.node.extend(new_nodes)
    return out
