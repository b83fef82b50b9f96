"""NMS in the graph: every NonMaxSuppression node in a model's ONNX files, judged by what its settings do
to YOLO detections — the box format it reads (`center_point_box` against where the boxes come from), its
IoU threshold, its score threshold and how many boxes it may keep. The same numbers run in Python would
be the accuracy suite's; inside a graph only this check can name them. Models with no such node: not
applicable."""

from __future__ import annotations

from pathlib import Path

from harness.checks.findings import Finding, NotApplicable
from harness.checks.model import ModelEntry

CHECK = "onnx_nms"
# Ops a box tensor passes through unchanged in meaning (shifts, layout moves) on its way to the NMS.
PASS_THROUGH = {"Add", "Sub", "Mul", "Div", "Transpose", "Reshape", "Identity", "Cast", "Unsqueeze", "Squeeze"}


def _constants(graph) -> dict:
    from onnx import numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            values[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return values


def _scalar(values: dict, node, index: int) -> float | None:
    """The constant at input `index`, None when absent (ONNX's default then applies) or computed."""
    if len(node.input) <= index or not node.input[index]:
        return None
    value = values.get(node.input[index])
    return None if value is None or value.size != 1 else float(value.reshape(-1)[0])


def _from_head_xywh(graph, values: dict, tensor: str) -> bool:
    """Whether the boxes are channels 0..4 of a channel-first head ([N, 4 + nc, anchors]: YOLOv8's cx, cy, w, h),
    followed upstream through PASS_THROUGH ops."""
    producers = {o: node for node in graph.node for o in node.output}
    for _ in range(16):
        node = producers.get(tensor)
        if node is None:
            return False
        if node.op_type == "Slice":
            starts, ends, axes = (values.get(node.input[i]) if len(node.input) > i else None for i in (1, 2, 3))
            return (starts is not None and ends is not None and starts.reshape(-1).tolist() == [0]
                    and ends.reshape(-1).tolist() == [4] and (axes is None or axes.reshape(-1).tolist() == [1]))
        if node.op_type not in PASS_THROUGH:
            return False
        tensor = node.input[0]
    return False


def nms_problems(path: Path, rel: str) -> tuple[int, list[str]]:
    """(how many NonMaxSuppression nodes the file has, what is wrong with each)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    graph, values = model.graph, _constants(model.graph)
    nodes = [n for n in graph.node if n.op_type == "NonMaxSuppression"]
    problems = []
    for node in nodes:
        where = f"NonMaxSuppression {node.name or node.output[0]!r} in {rel}"
        centre = next((a.i for a in node.attribute if a.name == "center_point_box"), 0)
        if centre == 0 and _from_head_xywh(graph, values, node.input[0]):
            problems.append(f"{where}: center_point_box=0 reads the boxes as y1, x1, y2, x2, but they are the YOLO head's "
                            "first four channels, cx, cy, w, h: it suppresses by wrong IoUs (duplicates kept, neighbours "
                            "dropped); set center_point_box=1")
        keep, iou, score = (_scalar(values, node, i) for i in (2, 3, 4))
        if len(node.input) <= 2 or not node.input[2] or keep == 0:
            problems.append(f"{where}: max_output_boxes_per_class is {'absent (default 0)' if keep is None else 0}: "
                            "it keeps no box")
        if len(node.input) <= 3 or not node.input[3] or (iou is not None and iou <= 0):
            problems.append(f"{where}: IoU threshold {'absent (default 0)' if iou is None else iou}: every box that "
                            "touches a kept one is suppressed (ultralytics uses 0.7)")
        elif iou is not None and iou >= 1:
            problems.append(f"{where}: IoU threshold {iou:g}: it never suppresses, every duplicate box is kept "
                            "(ultralytics uses 0.7)")
        if score is not None and not 0 <= score < 1:
            problems.append(f"{where}: score threshold {score:g}: "
                            + ("no box scores above it, it keeps nothing" if score >= 1 else "not a probability"))
    return len(nodes), problems


def check_onnx_nms(entry: ModelEntry) -> list[Finding]:
    if entry.config is None or entry.is_ensemble:
        raise NotApplicable("no model file with a graph (an ensemble, or no readable config)")
    files = [f for v in entry.served_versions() for f in sorted((entry.path / str(v)).glob("*.onnx"))]
    findings, seen = [], 0
    for path in files:
        rel = str(path.relative_to(entry.repository))
        count, problems = nms_problems(path, rel)
        seen += count
        findings += [Finding(CHECK, entry.name, rel, problem) for problem in problems]
    if not seen:
        raise NotApplicable("no NonMaxSuppression in its ONNX files (NMS, if any, runs elsewhere)")
    return findings
