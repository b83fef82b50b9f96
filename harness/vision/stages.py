"""Seconds per pipeline stage of one batch, for yolo_e2e's stage metrics (suites/operations adds them up
against Triton's own compute time for the model).

On the host a stage is the wall time of its block. On a CUDA stream that would be wrong: the host only
queues the letterbox and the engine, and the first read-back (NMS counting its candidates) waits for all of
it, so NMS would absorb the others. There a stage is the GPU time between two CUDA events recorded around
its block on the stream; the events are read once the batch's results are back on the host."""

from __future__ import annotations

import contextlib
import time

STAGES = ("decode", "letterbox", "inference", "nms")


class StageClock:
    """Host wall time per stage: `with clock("decode"): ...` adds the block's duration."""

    def __init__(self):
        self.seconds = {stage: 0.0 for stage in STAGES}

    @contextlib.contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start


class StreamStageClock:
    """GPU time per stage on the current CUDA stream: `with clock("inference"): ...` records an event
    before and after the block's work; `seconds` waits for the last event and sums the intervals."""

    def __init__(self):
        self.marks: dict[str, list] = {stage: [] for stage in STAGES}

    @contextlib.contextmanager
    def __call__(self, stage: str):
        import torch

        start = torch.cuda.Event(enable_timing=True)
        start.record()
        try:
            yield
        finally:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.marks[stage].append((start, end))

    @property
    def seconds(self) -> dict[str, float]:
        out = {}
        for stage, pairs in self.marks.items():
            for _, end in pairs:
                end.synchronize()
            out[stage] = sum(start.elapsed_time(end) for start, end in pairs) / 1000  # elapsed_time is in ms
        return out
