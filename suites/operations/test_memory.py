"""Memory headroom: with every model, instance and version of the repository loaded and each model run once
at its largest batch (the working set, not the load-time footprint, whatever ran before), the device keeps
room to spare (a GPU host: free GPU memory; a CPU host: the server's and its stubs' RSS under a budget). Each
model's cost is then measured by unloading it alone and loading it again (a server in explicit mode)."""

from __future__ import annotations

import pytest

from harness.metrics import prometheus
from harness.operations.memory import gpu_problems, host_budget, host_usage, human, run_each_at_max_batch, unload_costs

GPU_SETTLE_S = 5.0  # Triton refreshes nv_gpu_memory_used_bytes every 2 s
HOST_SETTLE_S = 1.5


def test_memory_headroom_with_everything_loaded(pytestconfig, triton_server, repository, callable_models, payloads,
                                               operations_notes, record_property):
    min_free = pytestconfig.getoption("--min-free-memory")
    not_run = run_each_at_max_batch(triton_server.endpoints.grpc, payloads, [v.name for v in callable_models])
    operations_notes.extend(f"memory: {line}" for line in not_run)
    metrics = triton_server.endpoints.metrics
    lines, short = gpu_problems(prometheus.scrape(metrics), min_free)
    if lines:
        record_property("gpu_memory", lines)
        operations_notes.extend(f"GPU memory with everything loaded: {line}" for line in lines)
        costs = model_costs(triton_server, operations_notes, record_property, GPU_SETTLE_S,
                            lambda: prometheus.scrape(metrics).value("nv_gpu_memory_used_bytes"))
        assert not short, (f"GPU memory headroom under {min_free:.0%} free with every model loaded:\n  "
                           + "\n  ".join(short) + costs)
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
    costs = model_costs(triton_server, operations_notes, record_property, HOST_SETTLE_S,
                        lambda: host_usage(process.pid, repository).total)
    assert usage.total <= budget, (
        f"host memory (CPU host, no GPU metrics): the server and its stubs hold {human(usage.total)} with every model "
        f"loaded, over the budget {human(budget)} ({source}):\n  " + "\n  ".join(usage.lines()) + costs)


def model_costs(triton_server, operations_notes, record_property, settle_s, used) -> str:
    """Each model's unload delta, noted and recorded; the line for a failure message ('' when not measured)."""
    if triton_server.kind == "url":
        operations_notes.append(f"memory per model: not measured, because this run did not start the server "
                                f"({triton_server.describe()}): unloading its models would disturb whoever it serves")
        return ""
    if not triton_server.controls_repository:
        operations_notes.append("memory per model: not measured, because the server does not take load/unload "
                                f"(model control mode {triton_server.settings.model_control})")
        return ""
    costs = unload_costs(triton_server, used, settle_s)
    record_property("memory_per_model", costs)
    line = "memory per model (unloaded one after another, then loaded again): " + ", ".join(
        f"{model} {human(cost)}" for model, cost in sorted(costs.items(), key=lambda kv: -kv[1]))
    operations_notes.append(line)
    return "\n" + line
