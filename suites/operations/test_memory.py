"""Memory headroom: with every model, instance and version of the repository loaded and each model run once
at its largest batch (the working set, not the load-time footprint, whatever ran before), the device keeps
room to spare (a GPU host: free GPU memory; a CPU host: the server's and its stubs' RSS under a budget)."""

from __future__ import annotations

import pytest

from harness.metrics import prometheus
from harness.operations.memory import gpu_problems, host_budget, host_usage, human, run_each_at_max_batch


def test_memory_headroom_with_everything_loaded(pytestconfig, triton_server, repository, callable_models, operations_notes,
                                               record_property):
    min_free = pytestconfig.getoption("--min-free-memory")
    not_run = run_each_at_max_batch(triton_server.endpoints.grpc, repository, [v.name for v in callable_models])
    operations_notes.extend(f"memory: {line}" for line in not_run)
    lines, short = gpu_problems(prometheus.scrape(triton_server.endpoints.metrics), min_free)
    if lines:
        record_property("gpu_memory", lines)
        operations_notes.extend(f"GPU memory with everything loaded: {line}" for line in lines)
        assert not short, (f"GPU memory headroom under {min_free:.0%} free with every model loaded:\n  "
                           + "\n  ".join(short))
        return
    process = getattr(triton_server, "process", None)
    if process is None:
        pytest.skip(f"not tested, because the server's processes are not on this host ({triton_server.describe()}) "
                    f"and it reports no GPU memory metrics")
    usage = host_usage(process.pid, repository)
    budget, source = host_budget(pytestconfig.getoption("--memory-budget"), min_free)
    record_property("host_memory", {"rss_bytes": usage.total, "budget_bytes": budget, "budget": source,
                                    "per_model": usage.per_model})
    operations_notes.append(f"host memory with everything loaded: {human(usage.total)} of a {human(budget)} budget "
                            f"({source}): " + "; ".join(usage.lines()))
    assert usage.total <= budget, (
        f"host memory (CPU host, no GPU metrics): the server and its stubs hold {human(usage.total)} with every model "
        f"loaded, over the budget {human(budget)} ({source}):\n  " + "\n  ".join(usage.lines()))
