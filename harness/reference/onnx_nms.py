"""NMS in the graph: the reference detector with its post-processing as ONNX NonMaxSuppression, one
model file that answers [N, max_det, 6] x1, y1, x2, y2, score, class rows in canvas pixels, padded
with zeros (the layout of Ultralytics' `nms=True` export). Built with onnx's helper API and merged
onto the detector with onnx.compose, so the same file is served natively (platform onnxruntime_onnx,
an NGC image) and here through the reference's yolo_raw Python model running ONNX Runtime.

Class-aware as ultralytics' non_max_suppression: each anchor keeps its best class, boxes are shifted
by class * MAX_WH, and one single-class NonMaxSuppression runs over all images of the batch; each
selection's row inside its image is its rank among that image's selections (ONNX Runtime returns
them image by image, best score first).

`build_repository` writes the variant repository (`yts reference --post onnx-nms --out DIR`): kept out
of the default reference repository (CI time), built on demand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, compose, helper, numpy_helper

from tritonclient.grpc import model_config_pb2 as pb

from harness.vision.nms import MAX_WH

OUTPUT = "output0"
SERVED = "yolo_onnx_nms"  # the Python backend running ONNX Runtime here; SERVED_native: platform onnxruntime_onnx


def _const(name: str, value, dtype=np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def nms_graph(nc: int, anchors: int, conf: float, iou: float, max_det: int, *,
              center_point_box: int = 1, raw: str = "raw") -> onnx.ModelProto:
    """raw [N, 4 + nc, anchors] (cx, cy, w, h, class scores) -> OUTPUT [N, max_det, 6]. `center_point_box`
    tells NonMaxSuppression the boxes are cx, cy, w, h (1, right for YOLO) or y1, x1, y2, x2 (0)."""
    n = helper.make_node
    inits = [
        _const("k4", [4]), _const("k4e", [4 + nc]), _const("k0", [0]), _const("k1", [1]), _const("k2", [2]),
        _const("max_out", [max_det]), _const("iou", [iou], np.float32), _const("conf", [conf], np.float32),
        _const("max_wh", MAX_WH, np.float32), _const("half", 0.5, np.float32), _const("zero_f", 0.0, np.float32),
        _const("max_det", max_det), _const("shape_k1", [-1, 1]),
        _const("rows_shape", [-1, max_det, 6]), _const("one_i", 1),
    ]
    nodes = [
        n("Slice", [raw, "k0", "k4", "k1"], ["xywh_t"]),                    # [N, 4, A]
        n("Slice", [raw, "k4", "k4e", "k1"], ["cls_scores"]),               # [N, nc, A]
        n("Transpose", ["xywh_t"], ["xywh"], perm=[0, 2, 1]),              # [N, A, 4]
        n("ReduceMax", ["cls_scores"], ["best"], axes=[1], keepdims=1),      # [N, 1, A]
        n("ArgMax", ["cls_scores"], ["cls_i"], axis=1, keepdims=0),         # [N, A]
        n("Cast", ["cls_i"], ["cls"], to=TensorProto.FLOAT),
        n("Mul", ["cls", "max_wh"], ["offset1"]),
        n("Unsqueeze", ["offset1", "k2"], ["offset"]),                     # [N, A, 1]
        n("Concat", ["offset", "offset", "zero_col", "zero_col"], ["shift"], axis=2),
        n("Mul", ["offset", "zero_f"], ["zero_col"]),
        n("Add", ["xywh", "shift"], ["shifted"]),
        n("NonMaxSuppression", ["shifted", "best", "max_out", "iou", "conf"], ["selected"],
          center_point_box=center_point_box),                                # [K, 3] image, class, anchor
        n("Gather", ["selected", "k0"], ["img_k"], axis=1),                 # [K, 1]
        n("Gather", ["selected", "k2"], ["anchor_k"], axis=1),              # [K, 1]
        n("Concat", ["img_k", "anchor_k"], ["where"], axis=1),              # [K, 2]
        n("GatherND", ["xywh", "where"], ["box_k"]),                        # [K, 4]
        n("Squeeze", ["best", "k1"], ["best2"]),                            # [N, A]
        n("GatherND", ["best2", "where"], ["score_k"]),                     # [K]
        n("GatherND", ["cls", "where"], ["cls_k"]),                         # [K]
        n("Slice", ["box_k", "k0", "k2", "k1"], ["centre"]),
        n("Slice", ["box_k", "k2", "k4", "k1"], ["size"]),
        n("Mul", ["size", "half"], ["half_size"]),
        n("Sub", ["centre", "half_size"], ["top_left"]),
        n("Add", ["centre", "half_size"], ["bottom_right"]),
        n("Unsqueeze", ["score_k", "k1"], ["score_col"]),
        n("Unsqueeze", ["cls_k", "k1"], ["cls_col"]),
        n("Concat", ["top_left", "bottom_right", "score_col", "cls_col"], ["rows_k"], axis=1),  # [K, 6]
        # rank of each selection inside its image: how many earlier selections belong to an earlier image
        n("Transpose", ["img_k"], ["img_row"], perm=[1, 0]),                # [1, K]
        n("Less", ["img_row", "img_k"], ["earlier"]),                       # [K, K]: j's image < i's image
        n("Cast", ["earlier"], ["earlier_i"], to=TensorProto.INT64),
        n("ReduceSum", ["earlier_i", "k1"], ["before"], keepdims=1),      # [K, 1]
        n("Shape", ["selected"], ["sel_shape"]),
        n("Gather", ["sel_shape", "k0"], ["k_count"]),
        n("Squeeze", ["k_count"], ["k_scalar"]),
        n("Range", ["zero_i", "k_scalar", "one_i"], ["position"]),
        n("Reshape", ["position", "shape_k1"], ["position_col"]),
        n("Sub", ["position_col", "before"], ["rank"]),
        n("Mul", ["img_k", "max_det"], ["image_base"]),
        n("Add", ["image_base", "rank"], ["slot"]),                         # [K, 1]
        # an all-zero [N * max_det, 6] canvas, the selections scattered into their slots
        n("Shape", [raw], ["raw_shape"]),
        n("Gather", ["raw_shape", "k0"], ["batch"]),
        n("Mul", ["batch", "max_out"], ["slots"]),
        n("Concat", ["slots", "six"], ["canvas_shape"], axis=0),
        n("ConstantOfShape", ["canvas_shape"], ["canvas"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
        n("ScatterND", ["canvas", "slot", "rows_k"], ["filled"]),
        n("Reshape", ["filled", "rows_shape"], [OUTPUT]),
    ]
    inits += [_const("zero_i", 0), _const("six", [6])]
    graph = helper.make_graph(
        _topological(nodes, {raw} | {i.name for i in inits}), "yolo_nms",
        [helper.make_tensor_value_info(raw, TensorProto.FLOAT, ["N", 4 + nc, anchors])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["N", max_det, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _topological(nodes: list, available: set[str]) -> list:
    """The nodes in an order where every input is produced before it is used."""
    ordered, pending, have = [], list(nodes), set(available)
    while pending:
        ready = [node for node in pending if all(i in have for i in node.input if i)]
        if not ready:
            raise ValueError(f"nodes with unmet inputs: {[p.op_type for p in pending]}")
        for node in ready:
            ordered.append(node)
            have.update(node.output)
            pending.remove(node)
    return ordered


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
        node.output[:] = [new if o == old else o for o in node.output]
    for value in graph.output:
        if value.name == old:
            value.name = new


def detector_with_nms(detector: Path, out: Path, conf: float, iou: float, max_det: int, *,
                      center_point_box: int = 1) -> Path:
    """The detector ONNX with the NMS graph merged onto its output: images [N, 3, H, W] -> OUTPUT."""
    model = onnx.load(str(detector))
    (raw,) = model.graph.output
    dims = [d.dim_value for d in raw.type.tensor_type.shape.dim]
    _rename(model.graph, raw.name, "detector_raw")
    post = compose.add_prefix(nms_graph(dims[1] - 4, dims[2], conf, iou, max_det, center_point_box=center_point_box),
                              "nms_")
    _rename(post.graph, "nms_" + OUTPUT, OUTPUT)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 17:
        model = onnx.version_converter.convert_version(model, 17)
    post.ir_version = model.ir_version
    merged = compose.merge_models(model, post, io_map=[("detector_raw", "nms_raw")])
    onnx.checker.check_model(merged)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(merged, str(out))
    return out


def variant_config(name: str, imgsz: int, max_det: int, native: bool) -> pb.ModelConfig:
    """The variant's config: images FP32 [3, S, S] (the client letterboxes) -> OUTPUT [max_det, 6]."""
    from harness.reference.configs import Target, _batching, _instances, _runtime

    target = Target(device="cpu", imgsz=imgsz, max_det=max_det)
    config = pb.ModelConfig(name=name, **({"platform": "onnxruntime_onnx"} if native else {"backend": "python"}))
    config.input.add(name="images", data_type=pb.TYPE_FP32, dims=[3, imgsz, imgsz])
    config.output.add(name=OUTPUT, data_type=pb.TYPE_FP32, dims=[max_det, 6])
    _batching(config, target, delay_us=2000)
    _instances(config, target)
    if not native:
        _runtime(config, target)
    return config


def build_repository(out: Path, imgsz: int = 640, *, conf: float = 0.25, iou: float = 0.7, max_det: int = 300,
                     center_point_box: int = 1, detector: Path | None = None, name: str = SERVED,
                     native: bool = True) -> Path:
    """The NMS-in-the-graph repository in `out`: `name` (the reference's yolo_raw model.py running the merged
    ONNX with ONNX Runtime) and, with `native`, `name`_native (the same file as platform onnxruntime_onnx)."""
    import shutil
    import tempfile

    from harness.reference.build import SOURCES, _vendor, source_model
    from harness.repository.writer import write_model

    if detector is None:
        from harness.engines.artifacts import ArtifactCache, VariantSpec

        detector = ArtifactCache(source=source_model()).build(VariantSpec("fp32", imgsz=imgsz)).path
    out = Path(out)
    staging = Path(tempfile.mkdtemp(prefix="yts-onnx-nms-"))
    try:
        merged = detector_with_nms(detector, staging / "model.onnx", conf, iou, max_det, center_point_box=center_point_box)
        vendored = _vendor(staging / "vendored")
        write_model(out, variant_config(name, imgsz, max_det, native=False),
                    {1: {"model.py": SOURCES / "yolo_raw" / "model.py", "harness": vendored, "model.onnx": merged}})
        if native:
            write_model(out, variant_config(f"{name}_native", imgsz, max_det, native=True), {1: {"model.onnx": merged}})
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
