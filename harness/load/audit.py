"""MLPerf TEST01's idea for Triton: responses sampled while the server is under load must equal the
responses to the same inputs sent one at a time. A deployment that caches, short-circuits or mixes up
the requests of a batch passes every throughput check and fails this one.

Inputs are distinct and meaningful: evaluation-set images for image models (letterboxed for tensor
models of [3, H, W] input), seeded random tensors otherwise, so equal answers to different inputs
cannot pass by accident."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.protocol.models import ModelView, good_array, image_request
from harness.protocol.wire import Request, Tensor, send


@dataclass
class AuditResult:
    model: str
    inputs: int
    sent_under_load: int
    sampled: int
    failed_under_load: int
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"model": self.model, "inputs": self.inputs, "sent_under_load": self.sent_under_load,
                "sampled": self.sampled, "failed_under_load": self.failed_under_load,
                "mismatches": len(self.mismatches), "seconds": round(self.seconds, 2)}


def audit_inputs(view: ModelView, count: int, images: Path) -> list[Request]:
    """`count` distinct requests of one item each for this model."""
    paths = sorted(p for p in Path(images).iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    picks = [paths[i] for i in np.linspace(0, len(paths) - 1, min(count, len(paths))).round().astype(int)]
    if view.role == "image":
        return [image_request(view, [p.read_bytes()]) for p in picks]
    shape = view.concrete_shape()
    if view.input.datatype == "FP32" and len(shape) == 4 and shape[1] == 3 and shape[2] == shape[3]:
        from harness.engines.calibration import load_rgb
        from harness.vision.letterbox import letterbox

        arrays = [letterbox(load_rgb(p), shape[2])[0][None] for p in picks]
    else:
        arrays = [good_array(view, 1, seed) for seed in range(count)]
    return [Request(view.name, (Tensor.of(view.input.name, a),)) for a in arrays]


def differences(expected: dict[str, np.ndarray], got: dict[str, np.ndarray], atol: float, rtol: float) -> list[str]:
    problems = []
    for name, want in expected.items():
        have = got.get(name)
        if have is None or have.shape != want.shape:
            problems.append(f"{name}: shape {None if have is None else list(have.shape)} vs {list(want.shape)}")
        elif want.dtype.kind in "fc" and not np.allclose(have, want, atol=atol, rtol=rtol, equal_nan=True):
            problems.append(f"{name}: max |diff| {float(np.nanmax(np.abs(have - want))):.4g} (atol {atol:g}, rtol {rtol:g})")
        elif want.dtype.kind not in "fc" and not np.array_equal(have, want):
            problems.append(f"{name}: differs")
    return problems


def answer_detections(outputs: dict[str, np.ndarray], eval_thresholds: dict) -> np.ndarray | None:
    """The detections an answer holds: a raw head [1, 4 + nc, anchors] decoded as the reference decodes
    (harness.vision.decode at the eval thresholds), or rows [..., 6] (x1, y1, x2, y2, score, class; -1
    padding dropped); None when no output is either."""
    from harness.vision.decode import decode_image

    for value in outputs.values():
        if value.dtype.kind != "f":
            continue
        if value.ndim == 3 and value.shape[0] == 1 and 5 <= value.shape[1] < value.shape[2]:
            return decode_image(value[0], eval_thresholds["conf"], eval_thresholds["iou"], eval_thresholds["max_det"])
        if value.ndim >= 2 and value.shape[-1] == 6:
            rows = value.reshape(-1, 6)
            return rows[rows[:, 4] >= 0]
    return None


class DetectionJudge:
    """For FP16/INT8: answers whose tensors differ are judged by their detections with the precision's
    box gates (a batched execution runs other kernels and rounds differently); a swapped or cached answer
    holds another image's detections and still fails. Answers without detections keep the tensor verdict.
    `within_gates` counts the answers whose tensors differed and whose detections did not."""

    def __init__(self, precision: str, atol: float, rtol: float, box_gates: dict, eval_thresholds: dict):
        self.precision, self.atol, self.rtol = precision, atol, rtol
        self.box_gates, self.eval_thresholds = box_gates, eval_thresholds
        self.within_gates = 0

    def __call__(self, expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> list[str]:
        from harness.accuracy.batched import differs

        problems = differences(expected, got, self.atol, self.rtol)
        want, have = (answer_detections(o, self.eval_thresholds) for o in (expected, got))
        if not problems or want is None or have is None:
            return problems
        boxes = differs(want, have, self.box_gates, self.eval_thresholds["conf"])
        if not boxes:
            self.within_gates += 1
            return []
        return [f"detections beyond the {self.precision} box gates: {'; '.join(boxes)} (tensors: {problems[0]})"]


def run_audit(endpoints, view: ModelView, requests: list[Request], *, clients: int, rounds: int, sample: int,
              atol: float, rtol: float, seed: int = 0, judge=None) -> AuditResult:
    """Sequential answers first (the accuracy run), then `clients` threads send every input `rounds`
    times in shuffled orders (the performance run); `sample` of those answers, chosen at random before
    the run, are compared with the sequential ones: as tensors within atol/rtol, or by `judge(expected,
    got) -> problems` (DetectionJudge)."""
    judge = judge or (lambda expected, got: differences(expected, got, atol, rtol))
    started = time.perf_counter()
    expected = []
    for request in requests:
        answer = send("http", endpoints, request)
        if not answer.ok:
            raise RuntimeError(f"{view.name}: a sequential audit request failed: {answer}")
        expected.append(answer.outputs)
    rng = random.Random(seed)
    schedule = [i for _ in range(rounds) for i in rng.sample(range(len(requests)), len(requests))]
    chosen = set(rng.sample(range(len(schedule)), min(sample, len(schedule))))
    lock, cursor, results = threading.Lock(), [0], []

    def client():
        while True:
            with lock:
                if cursor[0] >= len(schedule):
                    return
                slot = cursor[0]
                cursor[0] += 1
            answer = send("http", endpoints, requests[schedule[slot]])
            with lock:
                results.append((slot, answer))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out = AuditResult(view.name, len(requests), len(results), 0, sum(not a.ok for _, a in results))
    for slot, answer in sorted(results, key=lambda r: r[0]):
        if slot not in chosen or not answer.ok:
            continue
        out.sampled += 1
        index = schedule[slot]
        for problem in judge(expected[index], answer.outputs):
            out.mismatches.append(f"input {index} (request {slot} under load): {problem}")
    out.seconds = time.perf_counter() - started
    return out
