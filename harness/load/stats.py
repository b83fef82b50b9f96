"""Window statistics and perf_analyzer's stability rule, as pure functions over raw records, so a
saved run can be judged again without re-measuring."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)


@dataclass
class WindowStats:
    index: int
    start_s: float
    duration_s: float
    completed: int
    errors: int
    throughput: float  # successful requests per second
    latency_ms: dict[str, float]  # avg, p50, p90, p95, p99, min, max
    client_cpu: float  # generator CPU seconds per wall second (1.0 = one core busy)
    late_sends: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def latency_table(latencies_s: np.ndarray) -> dict[str, float]:
    """avg, min, max and p50/p90/p95/p99 in milliseconds (numpy's linear interpolation)."""
    if latencies_s.size == 0:
        return {key: float("nan") for key in ("avg", "min", "max", *(f"p{p}" for p in PERCENTILES))}
    ms = latencies_s * 1e3
    table = {"avg": float(ms.mean()), "min": float(ms.min()), "max": float(ms.max())}
    table.update({f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(ms, PERCENTILES))})
    return table


def is_stable(windows: list[WindowStats], count: int = 3, threshold: float = 0.10, latency_key: str = "avg") -> bool:
    """perf_analyzer: the last `count` windows all completed requests, and for throughput and for
    latency max/min ≤ 1 + threshold."""
    if len(windows) < count:
        return False
    last = windows[-count:]
    throughput = [w.throughput for w in last]
    latency = [w.latency_ms[latency_key] for w in last]
    if min(throughput) <= 0 or not all(np.isfinite(latency)) or min(latency) <= 0:
        return False
    return max(throughput) / min(throughput) <= 1 + threshold and max(latency) / min(latency) <= 1 + threshold
