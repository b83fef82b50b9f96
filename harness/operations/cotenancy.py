"""Co-tenancy: one model driven to saturation (harness.load's closed loop) while another serves a light
steady stream (constant arrivals); the light model's p99 beside its solo p99 says whether the device is
shared fairly. The settings that protect the light model (or are missing) are read from the configs."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.load import ClientSpec, LoadSettings, RepositoryPayloads, run_load

PROBE = LoadSettings(concurrency=1, window_s=1.0, warmup_s=0.3, stability_count=1, max_windows=1)
LIGHT_LOAD = 0.3  # the light stream keeps its model this busy: steady, never queued behind itself
MIN_SAMPLES = 60  # requests per phase, so that p99 is not simply the one slowest request
LEAD_S = 0.5  # the heavy loop runs this long before the light stream starts beside it
START_SLACK_S = 0.1  # the light stream's own start (a worker thread getting ready) after the lead


def instances(config) -> int:
    return sum(max(group.count, 1) for group in config.instance_group) or 1


def protection(config) -> list[str]:
    """What in `config` shields a co-tenant, present or missing, in words."""
    groups = ", ".join(f"{max(g.count, 1)}x {model_kind(g.kind)}" + (
        f" rate limiter {', '.join(f'{r.name}={r.count}' for r in g.rate_limiter.resources)}"
        if g.rate_limiter.resources else "") for g in config.instance_group) or "default instances"
    has_limiter = any(g.rate_limiter.resources for g in config.instance_group)
    batching = config.dynamic_batching
    queue = batching.default_queue_policy.max_queue_size
    return [f"instances {groups}",
            "rate limiter resources" + ("" if has_limiter else ": none"),
            f"priority levels {batching.priority_levels}" if batching.priority_levels else "priority levels: none",
            f"max queue size {queue}" if queue else "max queue size: unbounded"]


def model_kind(kind: int) -> str:
    from tritonclient.grpc import model_config_pb2

    return model_config_pb2.ModelInstanceGroup.Kind.Name(kind)


@dataclass
class CoTenancy:
    heavy: str
    light: str
    solo_p99_ms: float
    shared_p99_ms: float
    heavy_throughput: float

    @property
    def ratio(self) -> float:
        """Shared over solo p99; infinite when either phase got no answer to measure (a NaN p99) — never NaN,
        which would compare as neither within nor over the bound."""
        if not self.solo_p99_ms or not math.isfinite(self.solo_p99_ms) or not math.isfinite(self.shared_p99_ms):
            return math.inf
        return self.shared_p99_ms / self.solo_p99_ms


def measure(grpc_url: str, payloads: RepositoryPayloads, heavy: str, light: str) -> CoTenancy:
    """Light solo (a steady stream at 30 % of its capacity, MIN_SAMPLES requests at least), then the same while
    `heavy` runs a closed loop of 2 requests per instance: a few seconds each."""
    configs = payloads.configs
    spec = lambda name: ClientSpec("grpc", grpc_url, payloads(name))
    one = run_load(spec(light), PROBE).latency_ms["p50"] / 1000
    rate = min(20.0, LIGHT_LOAD * instances(configs[light]) / one)
    steady = LoadSettings(mode="constant", rate=rate, window_s=max(1.5, 3 * one, MIN_SAMPLES / 2 / rate),
                          warmup_s=0.5, stability_count=2, max_windows=2)
    solo = run_load(spec(light), steady)
    # the heavy loop runs in processes of its own: two grpc.aio event loops in threads of one process can miss
    # each other's completions and hang (grpc/grpc#25364); a CI run waited 300 s on one. The light stream starts
    # LEAD_S after the heavy clock, and the heavy warm-up covers the light one's, so the heavy loop measures
    # exactly the light stream's windows and stops when they end: no window runs for nobody
    concurrency = 2 * instances(configs[heavy])
    saturate = LoadSettings(concurrency=concurrency, window_s=steady.window_s, processes=min(2, concurrency),
                            warmup_s=LEAD_S + steady.warmup_s + START_SLACK_S, stability_count=2, max_windows=2)
    started = threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="yts-cotenancy-heavy")
    heavy_load = pool.submit(run_load, spec(heavy), saturate, started=started)
    try:
        while not started.wait(0.1):
            if heavy_load.done():  # failed before its clock started: its own error says why
                heavy_load.result()
        threading.Event().wait(LEAD_S)
        shared = run_load(spec(light), steady)
        heavy_result = heavy_load.result(timeout=60)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return CoTenancy(heavy, light, solo.latency_ms["p99"], shared.latency_ms["p99"], heavy_result.throughput)
