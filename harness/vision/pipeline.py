"""The detection pipeline: bytes/arrays -> letterbox -> model -> decode + NMS -> restore to source pixels.

`DetectionPipeline` holds the pre- and post-processing without a runtime, so the served end-to-end
model (a Python-backend model.py that runs its own backend) calls the very same `preprocess` and
`postprocess`; `LocalPipeline` adds ONNX Runtime and is the local reference the suites compare a
deployment against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence, Union

import numpy as np

from harness.vision.decode import decode_batch
from harness.vision.image import DEFAULT_MAX_PIXELS, decode_image_bytes
from harness.vision.letterbox import LETTERBOX, Letterbox, LetterboxMeta

ImageInput = Union[bytes, bytearray, memoryview, np.ndarray]


@dataclass(frozen=True)
class Job:
    """One request to the end-to-end model: its encoded images and its thresholds."""

    blobs: Sequence[bytes]
    conf: float
    iou: float
    max_det: int


@dataclass
class DetectionPipeline:
    """Pre/post-processing around any model with YOLOv8's raw output [N, 4 + nc, anchors].

    Defaults are ultralytics' predict defaults (conf 0.25, iou 0.7, max_det 300)."""

    imgsz: int | tuple[int, int] = 640
    conf: float = 0.25
    iou: float = 0.7
    max_det: int = 300
    letterbox: Letterbox = field(default_factory=lambda: LETTERBOX)
    max_pixels: int = DEFAULT_MAX_PIXELS

    def load(self, image: ImageInput) -> np.ndarray:
        """Encoded bytes are decoded; arrays must already be HWC uint8 RGB."""
        if isinstance(image, (bytes, bytearray, memoryview)):
            return decode_image_bytes(bytes(image), self.max_pixels)
        return np.asarray(image)

    def preprocess(self, images: Sequence[ImageInput]) -> tuple[np.ndarray, list[LetterboxMeta]]:
        return self.letterbox.batch([self.load(image) for image in images], self.imgsz)

    def postprocess(self, raw: np.ndarray, metas: Sequence[LetterboxMeta]) -> tuple[np.ndarray, np.ndarray]:
        """Raw output -> (detections [N, max_det, 6] in source pixels, padded with -1; num [N])."""
        detections, num = decode_batch(raw, self.conf, self.iou, self.max_det)
        for rows, n, meta in zip(detections, num, metas):
            rows[:n, :4] = self.letterbox.restore_boxes(rows[:n, :4], meta)
        return detections, num


class LocalPipeline(DetectionPipeline):
    """The local reference: the same processing with ONNX Runtime on CPU as the model runtime."""

    def __init__(self, onnx_path_or_session, imgsz: int | tuple[int, int] = 640, conf: float = 0.25,
                 iou: float = 0.7, max_det: int = 300, **options):
        super().__init__(imgsz=imgsz, conf=conf, iou=iou, max_det=max_det, **options)
        if isinstance(onnx_path_or_session, (str, bytes)) or hasattr(onnx_path_or_session, "__fspath__"):
            import onnxruntime  # only the local reference needs it, not the served model

            onnx_path_or_session = onnxruntime.InferenceSession(
                str(onnx_path_or_session), providers=["CPUExecutionProvider"]
            )
        self.session = onnx_path_or_session
        model_input = self.session.get_inputs()[0]
        self.input_name = model_input.name
        self.output_name = self.session.get_outputs()[0].name
        self.fixed_batch = model_input.shape[0] if isinstance(model_input.shape[0], int) else None
        spatial = model_input.shape[2:4]
        if all(isinstance(d, int) for d in spatial) and tuple(spatial) != _shape(self.imgsz):
            raise ValueError(f"model input {self.input_name} is fixed at {tuple(spatial)} but imgsz is {self.imgsz}")

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Raw output for a letterboxed batch; a model exported with batch 1 is fed image by image."""
        if self.fixed_batch is None or self.fixed_batch == len(batch):
            return self.session.run([self.output_name], {self.input_name: batch})[0]
        if self.fixed_batch != 1:
            raise ValueError(f"model batch is fixed at {self.fixed_batch}, got {len(batch)} images")
        return np.concatenate([self.session.run([self.output_name], {self.input_name: b[None]})[0] for b in batch])

    def __call__(self, images: Sequence[ImageInput]) -> tuple[np.ndarray, np.ndarray]:
        """Images (encoded bytes or HWC uint8 RGB) -> (detections [N, max_det, 6], num [N]). A model with
        NMS in its graph (rows [N, K, 6] out) is read as it answers, not decoded again."""
        batch, metas = self.preprocess(images)
        out = self.infer(batch)
        if out.ndim == 3 and out.shape[-1] == 6 and out.shape[-2] != 6:
            from harness.vision.detections import graph_rows

            return graph_rows(out, metas, self.max_det, self.letterbox.restore_boxes)
        return self.postprocess(out, metas)


def _shape(imgsz: int | tuple[int, int]) -> tuple[int, int]:
    return (imgsz, imgsz) if isinstance(imgsz, int) else tuple(imgsz)
