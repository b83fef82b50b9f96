"""Per-stage durations a model exports through the Python backend's custom metrics, read for ANY model:
a counter family whose samples carry `model` and `stage` labels, its unit named by the family's suffix
(`_seconds`, `_ms`, `_us`). The stages of a request should add up to the compute time Triton itself
measured for the model (nv_inference_compute_infer_duration_us): a stage left out, or one counted in the
wrong unit, shows up as a coverage outside the bounds."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from harness.metrics.prometheus import Snapshot, delta

UNITS_US = {"seconds": 1e6, "ms": 1e3, "us": 1.0}
COMPUTE = "nv_inference_compute_infer_duration_us"
HOW_TO_ADD = ("export a pb_utils.MetricFamily COUNTER named like yts_model_stage_seconds with labels "
              "model and stage, incremented by each stage's duration; reference_repo/yolo_e2e/model.py does")


def _unit_us(family: str) -> float | None:
    base = family.removesuffix("_total")
    return next((scale for suffix, scale in UNITS_US.items() if base.endswith("_" + suffix)), None)


def stage_series(snapshot: Snapshot) -> dict[str, dict[str, tuple[str, frozenset]]]:
    """model -> stage -> the sample key of its counter (families with a model and a stage label)."""
    found: dict[str, dict[str, tuple[str, frozenset]]] = {}
    for key in snapshot.samples:
        name, labels = key
        labels = dict(labels)
        if "stage" in labels and "model" in labels and _unit_us(name) is not None:
            found.setdefault(labels["model"], {})[labels["stage"]] = key
    return found


@dataclass(frozen=True)
class Breakdown:
    model: str
    stages_us: dict[str, float]  # stage -> microseconds spent over the measured requests
    compute_us: float  # Triton's compute_infer for the same requests
    requests: int

    @property
    def coverage(self) -> float:
        return sum(self.stages_us.values()) / self.compute_us if self.compute_us else float("inf")

    def table_row(self) -> str:
        stages = ", ".join(f"{s} {v / 1000 / max(self.requests, 1):.2f} ms" for s, v in self.stages_us.items())
        return (f"{self.model}: {stages}; sum {sum(self.stages_us.values()) / 1000 / max(self.requests, 1):.2f} ms/request "
                f"vs compute_infer {self.compute_us / 1000 / max(self.requests, 1):.2f} ms/request "
                f"(coverage {self.coverage:.0%}, {self.requests} requests)")

    def problem(self, low: float, high: float) -> str | None:
        if low <= self.coverage <= high:
            return None
        hint = ("the stages report more time than the model spent: a stage counted twice or in the wrong unit "
                "(milliseconds as seconds?)" if self.coverage > high else
                "a stage that takes time is missing from the stage metrics")
        return f"{self.model}: stages add up to {self.coverage:.0%} of Triton's compute_infer time, outside [{low:.0%}, {high:.0%}]: {hint}"


def breakdown(model: str, before: Snapshot, after: Snapshot, requests: int) -> Breakdown:
    series = stage_series(after).get(model, {})
    stages = {stage: (after.samples[key] - before.samples.get(key, 0.0)) * _unit_us(key[0])
              for stage, key in series.items()}
    return Breakdown(model, stages, delta(before, after, COMPUTE, model=model), requests)


WARMUP_CAP_S = 60.0


def warm_up(send_one: Callable[[], object], count: int, cap_s: float = WARMUP_CAP_S) -> int:
    """Requests one at a time until `count` in a row (a model's instances) take at most twice the fastest so far,
    `cap_s` at most; returns how many were sent. The first request each instance executes pays its start-up
    (nvJPEG's handle, cuDNN's algorithm search: ~500 ms a request on the H100's cold yolo_e2e). Requests sent at
    once do not warm every instance: the dynamic batcher merges them into one execution on one instance."""
    fastest, in_a_row, sent = float("inf"), 0, 0
    deadline = time.monotonic() + cap_s
    while in_a_row < count and time.monotonic() < deadline:
        started = time.monotonic()
        send_one()
        took, sent = time.monotonic() - started, sent + 1
        if took < fastest / 2:  # much faster than any before: those were all cold
            in_a_row = 1
        else:
            in_a_row = in_a_row + 1 if took <= 2 * fastest else 0
        fastest = min(fastest, took)
    return sent
