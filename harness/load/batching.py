"""Whether a model batches, judged twice: from its ModelConfig (can the scheduler ever form a batch?)
and from the statistics API (did it? — the realised batch-size histogram from batch_stats). Also the
"batching off" twin for the gain measurement, written through the ModelConfig writer."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.load import server_stats
from harness.repository.config import ModelConfig, read_config, write_config

TWIN_SUFFIX = "__unbatched"


def config_verdicts(config: ModelConfig) -> list[str]:
    """Reasons the scheduler cannot (usefully) batch this model; empty when it can."""
    reasons = []
    if config.max_batch_size == 0:
        reasons.append(f"{config.name}: max_batch_size is 0 — the model has no batch dimension, Triton never batches it")
    elif config.max_batch_size == 1:
        reasons.append(f"{config.name}: max_batch_size is 1 — every batch holds one request")
    if not config.HasField("dynamic_batching") and not config.HasField("sequence_batching"):
        reasons.append(f"{config.name}: config has no dynamic_batching — the default scheduler executes "
                       "each request on its own")
    elif config.HasField("dynamic_batching"):
        db = config.dynamic_batching
        sizes = list(db.preferred_batch_size)
        if sizes and db.max_queue_delay_microseconds == 0:
            reasons.append(f"{config.name}: preferred_batch_size {sizes} with max_queue_delay_microseconds 0 — the "
                           "scheduler never waits for a preferred batch to fill; batches form only from a backlog")
    return reasons


def repository_batches(configs: dict[str, ModelConfig]) -> bool:
    """Whether the repository uses dynamic batching at all: some model (not an ensemble) with a batch
    dimension (max_batch_size > 0) and a dynamic_batching scheduler, in its completed config (the ONNX
    Runtime backend adds both to a batchable graph whose config says neither)."""
    return any(c.max_batch_size > 0 and c.HasField("dynamic_batching") for c in configs.values() if not is_ensemble(c))


def is_ensemble(config: ModelConfig) -> bool:
    return config.platform == "ensemble" or config.HasField("ensemble_scheduling")


def target_batch(config: ModelConfig) -> int:
    """The batch the scheduler aims for: the largest preferred size, else max_batch_size."""
    sizes = list(config.dynamic_batching.preferred_batch_size) if config.HasField("dynamic_batching") else []
    return max(sizes) if sizes else max(1, config.max_batch_size)


def load_concurrency(config: ModelConfig, cap: int = 64) -> int:
    """Issue 8: under concurrency ≥ 2 × the preferred size the batches must reach it."""
    return max(2, min(cap, 2 * target_batch(config)))


@dataclass
class BatchProfile:
    histogram: dict[int, int]  # batch size → executions
    executions: int
    inferences: int

    @property
    def average(self) -> float:
        return self.inferences / self.executions if self.executions else 0.0

    @property
    def largest(self) -> int:
        return max(self.histogram, default=0)

    def to_dict(self) -> dict:
        return {"histogram": {str(k): v for k, v in self.histogram.items()}, "executions": self.executions,
                "inferences": self.inferences, "average_batch": round(self.average, 3), "largest_batch": self.largest}


def batch_profile(start: dict, end: dict, model: str) -> BatchProfile:
    d = server_stats.delta(start, end, model)
    return BatchProfile(d["batch_stats"], d["execution_count"], d["inference_count"])


def judge_batches(config: ModelConfig, profile: BatchProfile, concurrency: int) -> list[str]:
    """Measured verdict: the average batch exceeds 1 and the largest realised batch reaches the
    smallest preferred size (2 when none is set) — under concurrency ≥ 2 × that size. Where the
    concurrency cap keeps the load below it, half the concurrency: a batch of all the clients needs every
    one of them queued at once, which a fast GPU model never sees (the H100's yolo_raw, preferred 16 at
    concurrency 16: largest batch 10)."""
    problems = []
    sizes = sorted(config.dynamic_batching.preferred_batch_size) if config.HasField("dynamic_batching") else []
    need = (sizes[0] if concurrency >= 2 * sizes[0] else max(2, min(sizes[0], concurrency // 2))) if sizes else 2
    if profile.executions == 0:
        return [f"{config.name}: the statistics API counted no executions during the measurement"]
    if profile.average <= 1.0:
        problems.append(f"{config.name}: average batch {profile.average:.2f} at concurrency {concurrency} — expected > 1; "
                        f"histogram {profile.histogram}")
    if profile.largest < need:
        what = (f"the preferred size {need}" if sizes and need == sizes[0] else
                f"{need} (half the concurrency; the preferred size {sizes[0]} is asked under concurrency ≥ {2 * sizes[0]})"
                if sizes else f"{need}")
        problems.append(f"{config.name}: largest realised batch {profile.largest} never reached {what} at concurrency {concurrency}; "
                        f"histogram {profile.histogram}")
    return problems


GPU_GAIN_MIN = 1.5  # issue 8's default; H200 yolo_e2e measured 1.59x at c8, 2.15x at c64
CPU_GAIN_MIN = 0.7  # ORT on CPU computes a batch of 8 in 8x the time of one: nothing to amortize (0.77-0.98x measured)


def default_gain_min(config: ModelConfig) -> float:
    """What batching can buy depends on the device the instances run on: a GPU is idle between small
    batches, a CPU running a convolutional detector is not."""
    gpu = any(group.kind == group.KIND_GPU for group in config.instance_group)
    return GPU_GAIN_MIN if gpu else CPU_GAIN_MIN


def judge_gain(name: str, on_throughput: float, off_throughput: float, minimum: float) -> list[str]:
    if off_throughput <= 0:
        return [f"{name}: the unbatched twin completed nothing; no gain can be computed"]
    gain = on_throughput / off_throughput
    if gain < minimum:
        return [f"{name}: dynamic batching gains {gain:.2f}× throughput ({on_throughput:.1f} vs "
                f"{off_throughput:.1f} infer/s unbatched) — expected ≥ {minimum:g}×; batches form but execute "
                "costs as much as one request each (does execute() loop over requests one by one?)"]
    return []


def sweep_point(result, model: str) -> dict:
    """One point of a sweep: served throughput, latency percentiles, errors, stability, the average batch
    from the statistics API and the GPU's utilisation (where the server reports it)."""
    start, end = result.server_stats.get("start"), result.server_stats.get("end")
    return {"throughput": result.throughput, "p50_ms": result.latency_ms["p50"], "p95_ms": result.latency_ms["p95"],
            "p99_ms": result.latency_ms["p99"], "errors": result.errors, "stable": result.stable,
            "average_batch": round(batch_profile(start, end, model).average, 3) if end else None,
            **({"gpu_util_pct": result.gpu.get("util_pct_mean")} if result.gpu else {})}


CLIENT_BOUND_UTIL = 50.0  # % of GPU busy: below it on both sides, the load did not reach the GPU


def client_bound(model: str, on_gpu: dict, off_gpu: dict, request_bytes: int, transport: str) -> str | None:
    """Why a batching gain measured on a GPU says nothing about the model — the GPU sat mostly idle with
    batching on and off, so the client's transport was measured (4.9 MB a raw 640 FP32 image) — or None
    (no GPU metrics, or the GPU was busy on one side)."""
    if not on_gpu.get("samples") or not off_gpu.get("samples"):
        return None
    on, off = on_gpu["util_pct_mean"], off_gpu["util_pct_mean"]
    if max(on, off) >= CLIENT_BOUND_UTIL:
        return None
    return (f"{model}: the client cannot feed it ({request_bytes / 1e6:.1f} MB a request, {transport}; the GPU was "
            f"{on:.0f} % busy batched, {off:.0f} % unbatched), so no gain of batching can show from this host; "
            "measure with more load processes (--batching-processes) or hosts (yts load)")


def write_unbatched_twin(repository: Path, name: str) -> str:
    """Copy model `name` to NAME__unbatched with dynamic_batching removed (same files, same instances)."""
    repository = Path(repository)
    twin = name + TWIN_SUFFIX
    target = repository / twin
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(repository / name, target, symlinks=True)
    config = read_config(target)
    config.name = twin
    config.ClearField("dynamic_batching")
    write_config(target, config)
    return twin
