"""The operations suite's options (registered by harness.plugin, so that `pytest suites` knows them)."""

from __future__ import annotations

import os

import pytest


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("yts operations")
    group.addoption("--memory-budget", default=os.environ.get("YTS_MEMORY_BUDGET"), metavar="SIZE",
                    help="CPU host: the most memory (RSS, e.g. 6GiB) the server and its stubs may hold with every "
                         "model loaded (default: host memory less --min-free-memory)")
    group.addoption("--min-free-memory", type=float, default=float(os.environ.get("YTS_MIN_FREE_MEMORY", "0.2")),
                    metavar="FRACTION", help="GPU host: free GPU memory left with everything loaded (default 0.2)")
    group.addoption("--stage-coverage", default=os.environ.get("YTS_STAGE_COVERAGE", "0.8,1.05"), metavar="LO,HI",
                    help="bounds of a model's stage metrics summed over Triton's compute_infer time (default 0.8,1.05)")
    group.addoption("--cotenancy-bound", type=float, default=float(os.environ.get("YTS_COTENANCY_BOUND", "3.0")),
                    metavar="X", help="a light model's p99 beside a saturated one, at most X times its solo p99 (default 3: "
                                      "a fair split of shared compute already doubles it)")
    group.addoption("--cotenancy-trials", type=int, default=int(os.environ.get("YTS_COTENANCY_TRIALS", "2")),
                    metavar="N", help="measure co-tenancy up to N times while the ratio is over the bound; the best "
                                      "trial decides (default 2: one re-measurement of a noisy result)")
    group.addoption("--growth-bound", default=os.environ.get("YTS_GROWTH_BOUND", "64KiB"), metavar="SIZE",
                    help="the most memory a process may grow by per request under steady traffic, after a warm-up "
                         "(the slope of its memory against requests served; default 64KiB: 4.4x the most the "
                         "reference grew, a fifth of a raw model keeping each output)")
    group.addoption("--growth-requests", type=int, default=int(os.environ.get("YTS_GROWTH_REQUESTS", "0")) or None,
                    metavar="N", help="requests measured per model for memory growth (default 1000 on a CPU host, "
                                      "5000 where the server's processes hold GPU memory)")
    group.addoption("--growth-budget", type=float, default=float(os.environ.get("YTS_GROWTH_BUDGET", "30")),
                    metavar="S", help="seconds of traffic for the memory-growth check: models are driven cheapest "
                                      "first while they fit (default 30)")
