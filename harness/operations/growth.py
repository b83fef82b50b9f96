"""Memory growth per request, per process. A stub that keeps something of every request (an output appended
to a list, a cache without a bound) grows until the host runs out, yet holds little when headroom is measured
once. So each model is driven with steady traffic and, after a warm-up, the server and the model's stubs are
sampled every few requests (RSS; on a GPU host also each process's GPU memory, from nvidia-smi): a
least-squares line of a process's memory against the requests served gives its bytes per request, in which a
one-off allocator step (an arena doubling, a pool growing) weighs little beside growth that every request adds."""

from __future__ import annotations

import asyncio
import math
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import psutil

from harness.hostinfo import has_gpu
from harness.load.batching import is_ensemble
from harness.operations.memory import human, stub_processes

PROBE_ROUNDS, PROBE_S = 10, 0.5  # a model's cost is measured before it is driven: it decides whether it fits the budget
SAMPLES = 40  # memory readings over the measured requests


@dataclass
class Series:
    """One process's memory against the requests its model had served."""

    process: str  # "yolo_raw stub (pid 123)", "tritonserver (pid 12)"
    kind: str  # "RSS" | "GPU memory"
    requests: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)

    def slope(self) -> float:
        """Bytes per request: the least-squares line's slope (0 under 3 readings: a process that exited early)."""
        if len(self.requests) < 3:
            return 0.0
        return float(np.polyfit(np.asarray(self.requests, float), np.asarray(self.used, float), 1)[0])

    def line(self) -> str:
        return (f"{self.process} {self.kind} {human(self.used[0])} -> {human(self.used[-1])}: "
                f"{per_request(self.slope())}")


def per_request(nbytes: float) -> str:
    return f"{nbytes / 1024:+.1f} KiB/request"


@dataclass
class Growth:
    model: str  # the model driven
    seconds: float  # its warm-up and measured requests
    series: list[Series]  # the server's and its stubs' readings

    def over(self, bound: float) -> list[Series]:
        return [s for s in self.series if s.slope() > bound]


def gpu_memory_by_pid() -> dict[int, int]:
    """Each compute process's GPU memory in bytes from `nvidia-smi --query-compute-apps`; {} on a host without
    an NVIDIA driver."""
    if not has_gpu():
        return {}
    try:
        listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return compute_apps(listed)


def compute_apps(listed: str) -> dict[int, int]:
    """pid -> bytes from nvidia-smi's `pid, used_memory` rows (MiB, no header, no units), summed over the GPUs a
    process uses; a row whose memory the driver does not say (`[N/A]`: MIG, some containers) is left out."""
    used: dict[int, int] = {}
    for row in listed.splitlines():
        pid, _, mib = (cell.strip() for cell in row.partition(","))
        if pid.isdigit() and mib.isdigit():
            used[int(pid)] = used.get(int(pid), 0) + int(mib) * 2**20
    return used


class Sampler:
    """Reads the server's memory and that of the stubs running `models`: RSS always, GPU memory for the
    processes nvidia-smi lists."""

    def __init__(self, server_pid: int, repository: Path, models: set[str]):
        self.processes = {f"tritonserver (pid {server_pid})": psutil.Process(server_pid)}
        for process, owner in stub_processes(server_pid, repository):
            if owner in models:
                self.processes[f"{owner} stub (pid {process.pid})"] = process
        self.series: dict[tuple[str, str], Series] = {}

    def sample(self, served: int) -> None:
        gpu = gpu_memory_by_pid()
        for name, process in self.processes.items():
            try:
                readings = {"RSS": process.memory_info().rss}
            except psutil.NoSuchProcess:
                continue
            if process.pid in gpu:
                readings["GPU memory"] = gpu[process.pid]
            for kind, value in readings.items():
                series = self.series.setdefault((name, kind), Series(name, kind))
                series.requests.append(served)
                series.used.append(value)


async def _serve(client, count: int, concurrency: int) -> None:
    left = count

    async def worker():
        nonlocal left
        while left > 0:
            left -= 1
            await client.issue()

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))


def probe(spec, concurrency: int) -> float:
    """Seconds per request of `spec`'s model at `concurrency`, at best: the fastest of rounds of `concurrency`
    requests (PROBE_ROUNDS, or as many as PROBE_S allows, one at least) after one untimed request. Optimistic on
    purpose (a cold instance or a busy host only slows it down): it rules out what cannot fit the budget even
    so; the warm-up's own pace decides the rest. A request answered with an error raises RuntimeError."""

    async def run() -> float:
        client = spec.build(concurrency)
        try:
            await _serve(client, 1, 1)
            rounds, start = [], time.perf_counter()
            while not rounds or (len(rounds) < PROBE_ROUNDS and time.perf_counter() - start < PROBE_S):
                began = time.perf_counter()
                await _serve(client, concurrency, concurrency)
                rounds.append((time.perf_counter() - began) / concurrency)
            return min(rounds)
        finally:
            await client.close()

    return asyncio.run(run())


def measure(spec, warmup: int, requests: int, concurrency: int, sampler: Sampler, time_left_s: float) -> Growth | str:
    """Drives `spec`'s model with `concurrency` requests in flight: `warmup` requests unsampled (allocator
    warm-up), then `requests` with `sampler` read every requests/SAMPLES. When the warm-up's second half says
    the requests would take longer than what is left of `time_left_s`, returns why instead, unmeasured."""
    model = spec.payload.model

    async def run() -> Growth | str:
        client = spec.build(concurrency)
        start = time.perf_counter()
        try:
            await _serve(client, warmup - warmup // 2, concurrency)
            half = time.perf_counter()
            await _serve(client, warmup // 2, concurrency)
            each = (time.perf_counter() - half) / max(1, warmup // 2)
            left = time_left_s - (time.perf_counter() - start)
            if each * requests > left:
                return (f"{model}: not measured, because after its warm-up a request takes {each * 1000:.0f} ms: "
                        f"{requests:,} would take {each * requests:.0f} s, over the {max(left, 0):.0f} s left of --growth-budget")
            served, step = 0, max(1, requests // SAMPLES)
            sampler.sample(served)
            while served < requests:
                chunk = min(step, requests - served)
                await _serve(client, chunk, concurrency)
                served += chunk
                sampler.sample(served)
            return Growth(model, time.perf_counter() - start, list(sampler.series.values()))
        finally:
            await client.close()

    return asyncio.run(run())


def stubs_of(configs: dict, model: str) -> set[str]:
    """The models whose stubs serve `model`'s requests: itself, or an ensemble's steps (nested ones followed)."""
    config = configs.get(model)
    if config is None or not is_ensemble(config):
        return {model}
    return {stub for step in config.ensemble_scheduling.step for stub in stubs_of(configs, step.model_name)}


def smallest_output(config) -> str:
    """The output with the fewest elements: the only one the client asks for, so that the time goes to the
    model rather than to moving tensors nobody reads (the stub produces every output all the same; the
    reference's yolo_preprocess returns 4.9 MB a request, half the time of its 1,200)."""
    return min(config.output, key=lambda output: math.prod(abs(d) for d in output.dims)).name


def survey(grpc_url: str, server_pid: int, repository: Path, payloads, models: list[str], warmup: int,
           requests: int, budget_s: float) -> tuple[list[Growth], list[str]]:
    """Each of `models` probed for its cost per request, then measured cheapest first while its projected
    time (warm-up and requests) fits what is left of `budget_s`, with as many requests in flight as it has
    instances, asking for its smallest output (`payloads`: harness.load.RepositoryPayloads). Returns the
    measurements and a line per model (measured, or why not)."""
    from harness.load import ClientSpec
    from harness.operations.cotenancy import instances
    from harness.repository.sizing import RequestTooLarge

    configs = payloads.configs
    specs, cost, notes = {}, {}, []
    for model in (m for m in models if m in configs):
        try:
            payload = payloads(model)
            if configs[model].output:
                payload = replace(payload, outputs=(smallest_output(configs[model]),))
            specs[model] = ClientSpec("grpc", grpc_url, payload)
            cost[model] = probe(specs[model], instances(configs[model]))
        except (RequestTooLarge, RuntimeError) as error:
            notes.append(f"{model}: not measured, because its request cannot be served: {error}")
    results, time_left = [], budget_s
    for model in sorted(cost, key=cost.get):
        started, projected = time.perf_counter(), cost[model] * (warmup + requests)
        if projected > time_left:
            notes.append(f"{model}: not measured, because a request takes {cost[model] * 1000:.0f} ms at best: "
                         f"{warmup + requests:,} would take {projected:.0f} s, over the {max(time_left, 0):.0f} s left "
                         f"of --growth-budget {budget_s:g}")
            continue
        try:
            growth = measure(specs[model], warmup, requests, instances(configs[model]),
                             Sampler(server_pid, repository, stubs_of(configs, model)), time_left)
        except RuntimeError as error:
            growth = f"{model}: not measured, because a request failed under traffic: {error}"
        time_left -= time.perf_counter() - started
        if isinstance(growth, str):
            notes.append(growth)
            continue
        results.append(growth)
        notes.append(f"{model}: {requests:,} requests after {warmup:,} ({growth.seconds:.1f} s): "
                     + "; ".join(s.line() for s in growth.series))
    return results, notes
