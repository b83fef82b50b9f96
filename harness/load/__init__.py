"""Load generation (perf_analyzer's and MLPerf loadgen's jobs, on tritonclient's asyncio clients),
batching verdicts from the statistics API, and wrk as the independent reference."""

from harness.load.clients import ClientSpec, LoadClient
from harness.load.generator import LoadResult, LoadSettings, run_load, search_latency_bound, sweep
from harness.load.payload import Payload, RepositoryPayloads, payload_from_config

__all__ = ["ClientSpec", "LoadClient", "LoadResult", "LoadSettings", "Payload", "RepositoryPayloads", "payload_from_config",
           "run_load", "search_latency_bound", "sweep"]
