"""Load-generator results in pytest-benchmark's JSON: the per-request latencies become the benchmark's
rounds (so min/mean/median/IQR and --benchmark-compare work on request latency, across runs), and
extra_info carries the percentile table, throughput, stability verdict, server split and more."""

from __future__ import annotations

from harness.load.generator import LoadResult


def record(benchmark, result: LoadResult, **extra) -> None:
    from pytest_benchmark.stats import Stats

    benchmark.pedantic(lambda: None, rounds=1, iterations=1)  # marks the fixture used; stats replaced below
    stats = Stats()
    for latency_ms in result.latencies_ms:
        stats.update(latency_ms / 1e3)
    if result.latencies_ms:
        benchmark.stats.stats = stats
    benchmark.extra_info.update(summary(result))
    benchmark.extra_info.update(extra)


def summary(result: LoadResult) -> dict:
    return {
        "model": result.model, "protocol": result.protocol, "mode": result.settings["mode"],
        "concurrency": result.settings["concurrency"], "rate": result.settings["rate"],
        "throughput": round(result.throughput, 3), "latency_ms": {k: round(v, 3) for k, v in result.latency_ms.items()},
        "completed": result.completed, "errors": result.errors, "late_sends": result.late_sends,
        "stable": result.stable, "windows": len(result.windows), "client_cpu": round(result.client_cpu, 3),
        "warnings": result.warnings,
        **({"gpu": result.gpu} if result.gpu else {}),
    }
