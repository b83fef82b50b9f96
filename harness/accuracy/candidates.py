"""What the accuracy suite judges, behind two small interfaces:

- a raw candidate runs letterboxed batches and returns the raw tensors (FP16/INT8 ONNX through ONNX
  Runtime, a TensorRT plan, a served raw-tensor model): the harness does pre- and post-processing, so a
  difference is the model's;
- an end-to-end candidate takes an encoded image and returns detections in source pixels (a served
  end-to-end model or ensemble, or a local pipeline built from a preprocessing configuration): a
  difference may be its pre/post-processing, which is what served-vs-local checks are for.

`PreprocessConfig` states a deployment's preprocessing as settings (channel order, scale, pad value,
letterbox offset), so a broken deployment is a configuration in fixtures/accuracy/, not code."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.vision.letterbox import PAD_VALUE, Letterbox, LetterboxMeta
from harness.vision.pipeline import LocalPipeline


@dataclass(frozen=True)
class PreprocessConfig:
    channel_order: str = "rgb"  # what the model is fed; ultralytics trains on RGB
    divide_by_255: bool = True
    pad_value: int = PAD_VALUE
    undo_letterbox_offset: bool = True  # restore: subtract the padding before dividing by the ratio

    def __post_init__(self):
        if self.channel_order not in ("rgb", "bgr"):
            raise ValueError(f"channel_order {self.channel_order!r}: rgb or bgr")

    def letterbox(self) -> Letterbox:
        return ConfiguredLetterbox(self)


class ConfiguredLetterbox(Letterbox):
    def __init__(self, config: PreprocessConfig):
        self.config = config
        self.pad_value = config.pad_value

    def to_tensor(self, canvas: np.ndarray) -> np.ndarray:
        chw = canvas.transpose(2, 0, 1)
        if self.config.channel_order == "bgr":
            chw = chw[::-1]
        scale = np.float32(255.0) if self.config.divide_by_255 else np.float32(1.0)
        return np.ascontiguousarray(np.divide(chw, scale, dtype=np.float32))

    def restore_boxes(self, boxes_xyxy: np.ndarray, meta: LetterboxMeta, clip: bool = True) -> np.ndarray:
        if self.config.undo_letterbox_offset:
            return super().restore_boxes(boxes_xyxy, meta, clip)
        no_offset = LetterboxMeta(meta.source_shape, meta.output_shape, meta.ratio, meta.resized_shape, (0, 0, 0, 0))
        return super().restore_boxes(boxes_xyxy, no_offset, clip)


@dataclass
class RawCandidate:
    """`infer(batch [N,3,H,W] float32) -> {output name: array}`; `engine` is a harness Engine or a
    ServedRawModel (anything with infer(dict) -> dict and an input name)."""

    name: str
    precision: str
    engine: object
    input_name: str = "images"
    origin: str = "local"  # local | served
    artifact: object = None  # the model file, when there is one (coverage reads its sidecar)
    output: object = None  # its raw OutputLayout, when read: a segmentation head's mask rows are cut off
    kind: str = field(default="raw", init=False)

    def infer(self, batch: np.ndarray) -> dict[str, np.ndarray]:
        from harness.vision.detections import raw_detection_rows

        outputs = self.engine.infer({self.input_name: batch})
        if self.output is not None and self.output.masks:
            name = self.output.names["raw"]
            outputs = {**outputs, name: raw_detection_rows(outputs[name], self.output)}
        return outputs


@dataclass
class EndToEndCandidate:
    """`detect(encoded image) -> rows [k, 6]` x1, y1, x2, y2, score, class in source pixels."""

    name: str
    precision: str
    detector: object  # a LocalPipeline or a served model's client (harness.vision.served.EndToEndClient)
    conf: float
    origin: str = "local"
    artifact: object = None
    kind: str = field(default="e2e", init=False)

    def detect(self, encoded: bytes) -> np.ndarray:
        return self.detect_answer(encoded)[0]

    def detect_answer(self, encoded: bytes) -> tuple[np.ndarray, object]:
        """(rows, the served model's answer as given, or None): kept so the boxes can be decoded again
        under another box format when they do not match (harness.accuracy.box_mixups)."""
        if isinstance(self.detector, LocalPipeline):
            detections, num = self.detector([encoded])
            return detections[0, : int(num[0])], None
        if hasattr(self.detector, "answer"):
            answer = self.detector.answer(encoded)
            return self.detector.decode(answer), answer
        return self.detector.detect(encoded), None


def pipeline_candidate(name: str, model_path, config: PreprocessConfig, *, imgsz: int, conf: float, iou: float,
                       max_det: int, precision: str = "fp32") -> EndToEndCandidate:
    """A local end-to-end deployment of `model_path` with the given preprocessing."""
    pipeline = LocalPipeline(model_path, imgsz=imgsz, conf=conf, iou=iou, max_det=max_det, letterbox=config.letterbox())
    return EndToEndCandidate(name, precision, pipeline, conf, artifact=model_path)
