"""How much a deployment serves: the closed-loop concurrency sweep doubles the requests in flight until
throughput stops rising or the tail latency passes its budget, instead of stopping at a fixed level (the
H100 sweep stopped at 16 and reported a fifth of what the same deployment serves at 160-256).

The rule, from the points measured so far:
- plateau: the last two doublings together raised throughput by less than PLATEAU (5 %);
- budget: p99 passed the latency budget (--latency-budget-ms);
- ceiling: the next doubling would pass `max_concurrency`.
The saturating concurrency is the first that reached within PLATEAU of the best throughput; the knee is
the best throughput whose p99 stayed within the budget. When the busiest load process used half a core
or more (BUSY_CLIENT), the next points get twice the processes (up to `max_processes`): the client must not be the wall."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

PLATEAU = 0.05
# CPU seconds per wall second of the busiest load process from which it is the wall: a Python gRPC client is GIL-bound
# well below one core. H100, yolo_e2e at 256 in flight: one process at 0.68 of a core measured 4,222 img/s, p99 174 ms;
# 8 processes (benchmarks/probes/saturation.py, same call) 4,624 img/s, p99 104 ms (benchmarks/results, 2026-12-07).
BUSY_CLIENT = 0.5


@dataclass(frozen=True)
class Point:
    concurrency: int
    processes: int
    throughput: float
    p99_ms: float
    client_cpu: float
    extra: dict = field(default_factory=dict)  # what the sweep records beside (p50/p95, batch, GPU utilisation)

    def to_dict(self) -> dict:
        return {"concurrency": self.concurrency, "processes": self.processes, "throughput": self.throughput,
                "p99_ms": self.p99_ms, "client_cpu": self.client_cpu, **self.extra}


@dataclass
class Capacity:
    points: list[Point]
    stopped: str  # why the sweep stopped: "plateau", "latency budget", "concurrency ceiling"
    budget_ms: float

    @property
    def best(self) -> Point:
        return max(self.points, key=lambda p: p.throughput)

    @property
    def saturating(self) -> Point:
        """The first point within PLATEAU of the best throughput."""
        return next(p for p in self.points if p.throughput >= (1 - PLATEAU) * self.best.throughput)

    @property
    def knee(self) -> Point | None:
        """The best throughput whose p99 stayed within the budget (None: no point did)."""
        within = [p for p in self.points if p.p99_ms <= self.budget_ms]
        return max(within, key=lambda p: p.throughput) if within else None

    def to_dict(self) -> dict:
        knee = self.knee
        return {"stopped": self.stopped, "budget_ms": self.budget_ms if math.isfinite(self.budget_ms) else None,
                "saturating_concurrency": self.saturating.concurrency, "saturated_throughput": self.best.throughput,
                "knee": knee.to_dict() if knee else None, "points": [p.to_dict() for p in self.points]}


def plateaued(points: list[Point]) -> bool:
    """The last two doublings raised throughput by less than PLATEAU together."""
    return len(points) >= 3 and points[-1].throughput < (1 + PLATEAU) * points[-3].throughput


def find_capacity(measure: Callable[[int, int], Point], budget_ms: float, max_concurrency: int,
                  max_processes: int = 1, start: int = 1) -> Capacity:
    """Closed-loop points at start, 2 x start, ... (`measure(concurrency, processes)`) until the rule stops."""
    points: list[Point] = []
    concurrency, processes = start, 1
    while True:
        point = measure(concurrency, min(processes, concurrency))
        points.append(point)
        if point.p99_ms > budget_ms:
            return Capacity(points, "latency budget", budget_ms)
        if plateaued(points):
            return Capacity(points, "plateau", budget_ms)
        if concurrency * 2 > max_concurrency:
            return Capacity(points, "concurrency ceiling", budget_ms)
        if point.client_cpu >= BUSY_CLIENT:
            processes = min(max_processes, point.processes * 2)
        concurrency *= 2
