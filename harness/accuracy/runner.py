"""Runs a candidate over the evaluation set once and keeps what every level needs: per-image detections
in source pixels (at the low mAP threshold for raw candidates, at the model's own threshold for an
end-to-end one) and, for the first `tensor_images`, the raw output tensors. Levels then compare runs."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from harness.accuracy.candidates import EndToEndCandidate, RawCandidate
from harness.accuracy.evalset import EvalSet
from harness.metrics.coco import Detections
from harness.vision.pipeline import DetectionPipeline


@dataclass
class Run:
    name: str
    precision: str
    kind: str
    conf: float  # detections below it were never produced
    detections: dict[int, np.ndarray] = field(default_factory=dict)  # image id -> rows [k, 6]
    raw: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    answers: dict[int, object] = field(default_factory=dict)  # a served end-to-end model's answers, as given
    seconds: float = 0.0

    def at(self, conf: float) -> dict[int, np.ndarray]:
        """Detections above `conf` (NMS keeps higher scores first, so filtering equals re-decoding)."""
        if conf < self.conf - 1e-9:
            raise ValueError(f"{self.name}: ran at conf {self.conf}, cannot give detections at {conf}")
        return {i: rows[rows[:, 4] > conf] for i, rows in self.detections.items()}

    def coco(self, conf: float) -> list[Detections]:
        return [Detections(i, rows[:, :4], rows[:, 4], rows[:, 5].astype(int)) for i, rows in self.at(conf).items()]

    def raw_batch(self, ids: list[int]) -> dict[str, np.ndarray]:
        names = self.raw[ids[0]].keys()
        return {n: np.concatenate([self.raw[i][n] for i in ids]) for n in names}


def run(candidate: RawCandidate | EndToEndCandidate, evalset: EvalSet, *, imgsz: int, conf: float, iou: float,
        max_det: int, tensor_images: int, lossless: bool = False) -> Run:
    """`lossless`: an end-to-end candidate gets each image as a PNG of the reference's decoded pixels
    (EvalImage.lossless) instead of the set's own encoding."""
    started = time.perf_counter()
    if isinstance(candidate, EndToEndCandidate):
        out = Run(candidate.name, candidate.precision, "e2e", candidate.conf)
        for image in evalset.images:
            rows, answer = candidate.detect_answer(image.lossless() if lossless else image.encoded())
            out.detections[image.id] = np.asarray(rows, dtype=np.float32).reshape(-1, 6)
            if answer is not None:
                out.answers[image.id] = answer
    else:
        out = Run(candidate.name, candidate.precision, "raw", conf)
        pipeline = DetectionPipeline(imgsz=imgsz, conf=conf, iou=iou, max_det=max_det)
        for n, image in enumerate(evalset.images):
            batch, metas = pipeline.preprocess([image.rgb()])
            raw = candidate.infer(batch)
            if n < tensor_images:
                out.raw[image.id] = raw
            primary = raw[next(iter(raw))]
            detections, num = pipeline.postprocess(primary, metas)
            out.detections[image.id] = detections[0, : int(num[0])]
    out.seconds = time.perf_counter() - started
    return out
