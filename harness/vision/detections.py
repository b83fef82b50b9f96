"""Detections from any output layout (harness.repository.layouts): one image's outputs -> rows [k, 6]
x1, y1, x2, y2, score, class in source-image pixels, the form every check compares.

Rows, NMS-inside outputs and JSON text are read the same way: the valid entries (the first `count`, else
those with a score above 0 and a class of 0 or more: EfficientNMS and Ultralytics pad with zeros, the
reference with -1), boxes turned into xyxy from the declared box format, scaled from fractions to pixels
when declared normalised (of the canvas for a tensor input, of the source image otherwise), and, for a
tensor input, taken from the letterboxed canvas back to the source image by the letterbox the client used."""

from __future__ import annotations

import json

import numpy as np

from harness.repository.layouts import JSON, NMS, RAW, ROWS, OutputLayout
from harness.vision.letterbox import LETTERBOX, LetterboxMeta

BOX_KEYS = ("bbox", "box", "boxes", "xyxy", "xywh", "rect")
SCORE_KEYS = ("score", "confidence", "conf", "prob", "probability")
CLASS_KEYS = ("class", "class_id", "cls", "label", "category_id", "category")


def _one(array: np.ndarray, rank: int) -> np.ndarray:
    """One image's array: leading batch dims of 1 dropped down to `rank`."""
    array = np.asarray(array)
    while array.ndim > rank and array.shape[0] == 1:
        array = array[0]
    return array


def _count(outputs: dict[str, np.ndarray], layout: OutputLayout) -> int | None:
    if layout.count is None or layout.count not in outputs:
        return None
    return int(np.asarray(outputs[layout.count]).reshape(-1)[0])


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _json_rows(text: str, name: str) -> np.ndarray:
    """JSON detections -> [k, 6] boxes as written (format not yet converted): a list of objects with a box
    (`bbox`, `box`, ...), a score and a class, or of [x1, y1, x2, y2, score, class] lists."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"output {name!r} is not JSON: {error}: {text[:120]!r}") from None
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if lists else [data]
    rows = []
    for item in data:
        if isinstance(item, (list, tuple)) and len(item) == 6:
            rows.append([float(v) for v in item])
            continue
        if not isinstance(item, dict):
            raise ValueError(f"output {name!r}: a detection is {item!r}, not an object or a 6-list")
        keys = {k.lower(): k for k in item}
        box = next((item[keys[k]] for k in BOX_KEYS if k in keys), None)
        score = next((item[keys[k]] for k in SCORE_KEYS if k in keys), None)
        cls = next((item[keys[k]] for k in CLASS_KEYS if k in keys), None)
        if box is None or score is None or cls is None or len(box) != 4:
            raise ValueError(f"output {name!r}: a detection {item!r} lacks a 4-number box ({'/'.join(BOX_KEYS)}), a score "
                             f"({'/'.join(SCORE_KEYS)}) or a class ({'/'.join(CLASS_KEYS)})")
        rows.append([float(v) for v in box] + [float(score), float(cls)])
    return np.asarray(rows, dtype=np.float64).reshape(-1, 6)


def as_written(layout: OutputLayout, outputs: dict[str, np.ndarray]) -> np.ndarray:
    """The valid detections [k, 6] with boxes as the model wrote them (format and units untouched)."""
    n = _count(outputs, layout)
    if layout.kind == ROWS:
        rows = _one(outputs[layout.names["rows"]], 2).astype(np.float64)
        rows = rows.reshape(-1, rows.shape[-1])[:, :6]  # a segmentation head's mask coefficients follow
    elif layout.kind == NMS:
        boxes = _one(outputs[layout.names["boxes"]], 2).astype(np.float64).reshape(-1, 4)
        scores = _one(outputs[layout.names["scores"]], 1).astype(np.float64).reshape(-1)
        classes = _one(outputs[layout.names["classes"]], 1).astype(np.float64).reshape(-1)
        k = min(len(boxes), len(scores), len(classes))
        rows = np.concatenate([boxes[:k], scores[:k, None], classes[:k, None]], axis=1)
    elif layout.kind == JSON:
        value = np.asarray(outputs[layout.names["json"]], dtype=object).reshape(-1)
        rows = _json_rows(_text(value[0]), layout.names["json"]) if value.size else np.zeros((0, 6))
    else:
        raise ValueError(f"a {layout.kind} output holds no detections")
    if n is not None:
        rows = rows[: max(n, 0)]
        return rows[rows[:, 5] >= 0]
    return rows[(rows[:, 4] > 0) & (rows[:, 5] >= 0)]


def raw_detection_rows(raw: np.ndarray, output: OutputLayout | None) -> np.ndarray:
    """A raw head's output [..., 4 + nc, anchors]: a segmentation head's [..., 4 + nc + M, anchors] without its M
    mask-coefficient rows (harness.repository.layouts: the masks are not tested)."""
    masks = output.masks if output is not None and output.kind == RAW else 0
    return np.asarray(raw)[..., :-masks, :] if masks else raw


def to_xyxy(boxes: np.ndarray, box_format: str) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()
    if box_format == "xywh":
        boxes[:, 2:] += boxes[:, :2]
    elif box_format == "cxcywh":
        half = boxes[:, 2:] / 2
        boxes = np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1)
    elif box_format != "xyxy":
        raise ValueError(f"box format {box_format!r}")
    return boxes


def to_source_rows(layout: OutputLayout, outputs: dict[str, np.ndarray], source_shape: tuple[int, int],
                   meta: LetterboxMeta | None = None) -> np.ndarray:
    """One image's outputs -> rows [k, 6] in source pixels. `meta`: the letterbox the client applied
    (tensor inputs), whose canvas the boxes are in; None when the model saw the source image."""
    rows = as_written(layout, outputs)
    boxes = to_xyxy(rows[:, :4], layout.box_format)
    if layout.box_units == "normalized":
        h, w = meta.output_shape if meta is not None else source_shape
        boxes *= np.array([w, h, w, h], dtype=np.float64)
    if meta is not None:
        boxes = LETTERBOX.restore_boxes(boxes, meta)
    return np.concatenate([boxes, rows[:, 4:]], axis=1).astype(np.float32)


def graph_rows(rows: np.ndarray, metas, max_det: int, restore) -> tuple[np.ndarray, np.ndarray]:
    """A model with NMS in its graph ([N, K, 6] canvas-pixel rows, padded with zeros as Ultralytics' nms=True
    export and harness.reference.onnx_nms write them) -> (detections [N, max_det, 6] in source pixels, padded
    with -1; num [N]), the form DetectionPipeline.postprocess gives. `restore(boxes, meta)`: the letterbox's."""
    detections = np.full((len(rows), max_det, 6), -1.0, dtype=np.float32)
    num = np.zeros(len(rows), dtype=np.int32)
    for i, (image_rows, meta) in enumerate(zip(rows, metas)):
        kept = image_rows[(image_rows[:, 4] > 0) & (image_rows[:, 5] >= 0)][:max_det]
        detections[i, : len(kept)] = np.concatenate([restore(kept[:, :4], meta), kept[:, 4:]], axis=1)
        num[i] = len(kept)
    return detections, num
