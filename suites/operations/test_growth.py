"""Memory growth per request, per process: under steady traffic, after a warm-up, neither the server nor any
model's stub may grow by more than --growth-bound bytes a request (the slope of a least-squares line of its
memory against requests served). Headroom measured once passes a stub that keeps a little of every request;
this sees it before the host runs out. Models are driven cheapest first while they fit --growth-budget."""

from __future__ import annotations

import pytest

from harness.operations.growth import gpu_memory_by_pid, per_request, survey
from harness.operations.memory import parse_size, stub_processes
from harness.repository.pipeline import pipeline_step_of

CPU_REQUESTS, GPU_REQUESTS = 1000, 5000  # GPU memory moves in allocator blocks of 2-20 MiB: more requests to resolve a slope
WARMUP = 0.2  # of the measured requests, served first unsampled


def test_memory_does_not_grow_per_request(pytestconfig, triton_server, repository, manifest, payloads, operations_notes,
                                          record_property):
    import tritonclient.http as httpclient

    process = getattr(triton_server, "process", None)
    if process is None:
        pytest.skip(f"not tested, because the server's processes are not on this host ({triton_server.describe()})")
    bound = parse_size(pytestconfig.getoption("--growth-bound"))
    on_gpu = bool(gpu_memory_by_pid().keys() & {process.pid, *(p.pid for p, _ in stub_processes(process.pid, repository))})
    requests = pytestconfig.getoption("--growth-requests") or (GPU_REQUESTS if on_gpu else CPU_REQUESTS)
    warmup = int(requests * WARMUP)
    client = httpclient.InferenceServerClient(triton_server.endpoints.http)
    try:
        ready = sorted({e["name"] for e in client.get_model_repository_index() if e.get("state") == "READY"})
    finally:
        client.close()
    models = [m for m in ready if manifest.role(m) != "skip"
              and not pipeline_step_of(repository, m, manifest)]  # a step is driven through its ensemble
    results, notes = survey(triton_server.endpoints.grpc, process.pid, repository, payloads, models, warmup, requests,
                            pytestconfig.getoption("--growth-budget"))
    operations_notes.extend(f"memory growth: {line}" for line in notes)
    record_property("memory_growth", {g.model: {f"{s.process} {s.kind}": {
        "bytes_per_request": round(s.slope()), "requests": s.requests, "bytes": s.used} for s in g.series} for g in results})
    if not results:
        pytest.skip("not tested, because no model could be driven: " + ("; ".join(notes) or "none is READY"))
    grown = [f"{series.line()} while {growth.model} was driven" for growth in results for series in growth.over(bound)]
    assert not grown, (
        f"memory grows per request (least-squares slope over {requests:,} requests after {warmup:,} of warm-up; "
        f"bound {per_request(bound)}, --growth-bound {pytestconfig.getoption('--growth-bound')}):\n  "
        + "\n  ".join(grown) + "\n  (a process that keeps something of each request grows until the host runs out)")

