"""yolo_e2e on a CUDA device: encoded images in, detection rows in source pixels out, one batch through
nvJPEG, the device letterbox, the engine's CUDA graphs and the batched NMS, on the instance's own CUDA
stream. Per-request thresholds ride along as per-image vectors; a bad image fails its own request.
Each batch leaves its stages' seconds in `stage_seconds` (GPU time between events on the stream)."""

from __future__ import annotations

from typing import Sequence

import torch

from harness.vision.gpu.decode import decode_batch
from harness.vision.gpu.image import decode_images, gpu_decoder
from harness.vision.gpu.letterbox import DeviceLetterbox
from harness.vision.image import DEFAULT_MAX_PIXELS
from harness.vision.pipeline import Job
from harness.vision.stages import StageClock, StreamStageClock


class DevicePipeline:
    def __init__(self, engine, imgsz: int, max_batch: int, rows: int, *, max_pixels: int = DEFAULT_MAX_PIXELS,
                 graph_batches: Sequence[int] = ()):
        self.engine = engine
        self.device = engine.device
        self.rows = rows
        self.max_pixels = max_pixels
        self.letterbox = DeviceLetterbox(imgsz, max_batch, self.device, dtype=engine.compute_dtype)
        self.stream = torch.cuda.Stream(self.device) if self.device.startswith("cuda") else None
        self.graph_batches = []
        if graph_batches and self.stream is not None:
            with torch.cuda.stream(self.stream):
                self.graph_batches = engine.capture([b for b in graph_batches if b <= max_batch], self.letterbox.target)
        self.decoder = gpu_decoder() if self.stream is not None else "PIL on CPU"
        self.clock = StageClock()

    @property
    def stage_seconds(self) -> dict[str, float]:
        """The last batch's seconds per stage (waits for its events on a GPU)."""
        return self.clock.seconds

    def describe(self) -> str:
        return (f"{self.engine.name} {self.engine.precision} on {self.device}, decode {self.decoder}, "
                f"CUDA graphs for batches {self.graph_batches or 'none'}")

    def detect(self, jobs: Sequence[Job]) -> list:
        """Per job: (detections [b, rows, 6] float32, num_detections [b, 1] int32) as CPU tensors, or
        the exception that failed it (ValueError: the request's own images)."""
        if self.stream is None:
            self.clock = StageClock()
            return self._detect(jobs)
        self.clock = StreamStageClock()
        with torch.cuda.stream(self.stream):
            return self._detect(jobs)

    def _detect(self, jobs: Sequence[Job]) -> list:
        results: list = [None] * len(jobs)
        flat = [blob for job in jobs for blob in job.blobs]
        try:
            with self.clock("decode"):
                decoded = decode_images(flat, "cpu" if self.stream is None else self.device, self.max_pixels)
        except Exception as error:  # noqa: BLE001 -- a decoder fault (not a bad image) fails this batch only
            return [RuntimeError(f"image decoding failed on a batch of {len(flat)}: {error}") for _ in jobs]
        images, owners, start = [], [], 0
        for index, job in enumerate(jobs):
            mine = decoded[start: start + len(job.blobs)]
            start += len(job.blobs)
            bad = next(((k, e) for k, e in enumerate(mine) if isinstance(e, ValueError)), None)
            if bad is not None:
                results[index] = ValueError(f"image {bad[0] + 1} of {len(mine)}: {bad[1]}")
            elif not mine:
                results[index] = ValueError("request has no images")
            else:
                images.extend(mine)
                owners.append(index)
        if not images:
            return results
        try:
            with torch.inference_mode():
                detections, num = self._run(images, [jobs[i] for i in owners])
        except Exception as error:  # noqa: BLE001 -- the batch's requests fail, the model stays up
            for index in owners:
                results[index] = RuntimeError(f"inference failed on a batch of {len(images)}: {error}")
            return results
        start = 0
        for index in owners:
            count = len(jobs[index].blobs)
            results[index] = (detections[start: start + count], num[start: start + count, None])
            start += count
        return results

    def _run(self, images, jobs):
        per_image = [(job.conf, job.iou, job.max_det) for job in jobs for _ in job.blobs]
        conf, iou, max_det = (torch.tensor(column, dtype=dtype, device=self.device)
                              for column, dtype in zip(zip(*per_image), (torch.float32, torch.float64, torch.int64)))
        with self.clock("letterbox"):
            batch, metas = self.letterbox.batch(images)
        with self.clock("inference"):
            raw = self.engine.forward(batch)
        with self.clock("nms"):  # with restoring the boxes to source pixels and the copy out
            detections, num = decode_batch(raw, conf, iou, max_det, self.rows)  # iou in float64, as numpy compares it
            detections = self.letterbox.restore(detections.contiguous(), num, metas)
            return detections.cpu(), num.cpu()
