"""The batching suite's options, registered by harness.plugin (a suite conftest's options are unknown
when pytest runs from testpaths): one group, one prefix, like pytest-benchmark's own."""

from __future__ import annotations

import pytest


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("yts-batching", "yolo-triton-suite batching suite (pytest --benchmark-only)")
    add = group.addoption
    add("--batching-models", default=None, help="comma-separated models to measure (default: every non-ensemble model)")
    add("--batching-protocol", default="grpc", choices=("grpc", "http"), help="client protocol for the measurements")
    add("--batching-window", type=float, default=2.0, help="measurement window, seconds (perf_analyzer: 5)")
    add("--batching-warmup", type=float, default=1.0, help="seconds of load before the first window counts")
    add("--batching-max-windows", type=int, default=6, help="windows per point before giving up on stability")
    add("--batching-processes", type=int, default=1, help="load generator processes")
    add("--batching-shared-memory", default="auto", choices=("auto", "system", "none"),
        help="gRPC tensors through Triton's system shared memory instead of the wire (perf_analyzer's "
             "--shared-memory): auto = for tensor requests of 1 MB or more to a server on this host")
    add("--batching-max-concurrency", type=int, default=16, help="cap on 2 × preferred batch size")
    add("--latency-budget-ms", type=float, default=100.0,
        help="the concurrency sweep stops once p99 passes this; the knee is the best throughput within it")
    add("--batching-max-sweep-concurrency", type=int, default=1024,
        help="the concurrency sweep doubles up to this at most (it stops earlier once throughput plateaus)")
    add("--batching-gain-min", type=float, default=None,
        help="least throughput gain batching must bring (default: 1.5 for KIND_GPU models; 0.7 for CPU ones, "
             "where a compute-bound detector gains nothing — 0.77-0.98x measured for the reference on 2 cores — "
             "so the gate only catches batching that costs throughput; pass 1.5 to demand a CPU gain)")
    add("--batching-fidelity-tolerance", type=float, default=0.5,
        help="fail when our throughput / wrk's leaves 1 ± this (goal: 0.05; default generous for shared CPUs)")
    add("--batching-fidelity-model", default=None, help="model for the wrk comparison (default: first batching one)")
    add("--batching-latency-bound-ms", type=float, default=None, help="also search the best concurrency with p99 ≤ this")
    add("--batching-poisson-fractions", default="0.5,0.7,0.9",
        help="open-loop sweep: Poisson arrivals at these fractions of the saturated closed-loop throughput")
    add("--batching-audit-inputs", type=int, default=16, help="distinct inputs of the TEST01-style audit")
    add("--batching-audit-rounds", type=int, default=4, help="times each audit input is sent under load")
    add("--batching-audit-sample", type=int, default=32, help="answers under load compared with the sequential ones")
    add("--batching-audit-atol", type=float, default=1e-3,
        help="audit tolerance (absolute; rtol 1e-3): batched and single execution may round differently")
