"""The concurrency sweep's stopping rule (harness.load.capacity, issue 31 item 3): doubling until throughput
stops rising (< 5 % over two doublings) or p99 passes the latency budget; the saturating concurrency and the
knee named; load processes doubled once the busiest one is busy. The rule on modelled deployments here; on a
served one (fixtures/batching/batched: one instance, batches of up to 8) in tests/test_batching_fixtures.py."""

from __future__ import annotations

from harness.load.capacity import Point, find_capacity


def deployment(saturates_at: int, per_request_ms: float = 10.0, client_cpu: float = 0.1):
    """Throughput grows with the requests in flight up to `saturates_at`, then stays; latency then grows."""
    calls = []

    def measure(concurrency: int, processes: int) -> Point:
        calls.append((concurrency, processes))
        served = 100.0 * min(concurrency, saturates_at)
        return Point(concurrency, processes, served, per_request_ms * max(1.0, concurrency / saturates_at), client_cpu)
    return measure, calls


def test_the_sweep_goes_on_until_throughput_stops_rising():
    measure, calls = deployment(saturates_at=64)
    capacity = find_capacity(measure, budget_ms=100, max_concurrency=4096)
    assert [c for c, _ in calls] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # 128 and 256 add nothing over 64
    assert capacity.stopped == "plateau" and capacity.saturating.concurrency == 64
    assert capacity.best.throughput == 6400 and capacity.knee.concurrency == 64


def test_the_latency_budget_stops_the_sweep_and_bounds_the_knee():
    measure, calls = deployment(saturates_at=8, per_request_ms=30)
    capacity = find_capacity(measure, budget_ms=100, max_concurrency=4096)
    assert capacity.stopped == "latency budget" and calls[-1][0] == 32  # p99 120 ms at 32
    assert capacity.knee.concurrency == 8 and capacity.knee.p99_ms <= 100
    assert capacity.to_dict()["knee"]["concurrency"] == 8


def test_a_busy_client_gets_more_load_processes():
    measure, calls = deployment(saturates_at=16, client_cpu=0.95)
    find_capacity(measure, budget_ms=1000, max_concurrency=4096, max_processes=4)
    assert calls[:4] == [(1, 1), (2, 2), (4, 4), (8, 4)]  # doubled while busy, never over the cap


def test_the_ceiling_stops_a_sweep_that_still_rises():
    measure, _ = deployment(saturates_at=10_000)
    capacity = find_capacity(measure, budget_ms=1e9, max_concurrency=64)
    assert capacity.stopped == "concurrency ceiling" and capacity.points[-1].concurrency == 64
