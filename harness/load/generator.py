"""The load engine: closed loop (N requests always outstanding, perf_analyzer's concurrency mode) or
open loop (Poisson or constant arrivals, MLPerf's Server scenario), measured in windows until the
last three agree (perf_analyzer's stability rule), optionally spread over worker processes when one
core cannot keep up. Scenarios are settings, not code paths; the engine only sees ClientSpec.issue."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue as queue_module
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.load.clients import ClientSpec
from harness.load.stats import WindowStats, is_stable, latency_table

MODES = ("concurrency", "poisson", "constant")


class ClientOverheadWarning(UserWarning):
    """The generator itself was busy enough to cap the numbers (perf_analyzer warns above 50 %)."""


@dataclass
class LoadSettings:
    mode: str = "concurrency"
    concurrency: int = 1
    rate: float = 0.0  # open loop: requests per second
    window_s: float = 2.0
    warmup_s: float = 1.0
    stability_count: int = 3
    stability_threshold: float = 0.10
    stability_latency: str = "avg"  # perf_analyzer checks the average unless a percentile is asked for
    max_windows: int = 10
    processes: int = 1
    seed: int = 0
    late_threshold_s: float = 0.002  # open loop: a send this far behind its schedule counts as late
    max_outstanding: int = 4096  # open loop: beyond this, arrivals are dropped and counted as errors
    overhead_warn: float = 0.5

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {MODES}")
        if self.mode == "concurrency" and self.concurrency < 1:
            raise ValueError("concurrency must be ≥ 1")
        if self.mode != "concurrency" and self.rate <= 0:
            raise ValueError(f"open loop ({self.mode}) needs rate > 0")
        if self.processes < 1 or (self.mode == "concurrency" and self.processes > self.concurrency):
            raise ValueError(f"processes must be between 1 and the concurrency ({self.concurrency})")
        if self.max_windows < self.stability_count:
            raise ValueError("max_windows must be ≥ stability_count")


@dataclass
class LoadResult:
    """A finished run. The summary covers the last `stability_count` windows; `latencies_ms` are
    their raw per-request latencies, so gates and re-judging need nothing else."""

    protocol: str
    model: str | None
    settings: dict
    windows: list[WindowStats]
    stable: bool
    throughput: float
    latency_ms: dict[str, float]
    completed: int
    errors: int
    late_sends: int
    client_cpu: float  # busiest worker process: CPU seconds per wall second
    latencies_ms: list[float]
    error_messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    server_stats: dict = field(default_factory=dict)  # {"start": snapshot, "end": snapshot} over the summary span
    # Which engine measured and each of its load processes: {"name": "native" | "locust", "workers": [{"id",
    # "client_cpu", ...}], ...}; the same keys whichever engine ran (harness.load.locust_engine adds its own).
    engine: dict = field(default_factory=dict)
    gpu: dict = field(default_factory=dict)  # harness.load.gpu_usage's summary over the run, {} without GPU metrics

    def to_dict(self) -> dict:
        data = asdict(self)
        data["windows"] = [w.to_dict() for w in self.windows]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> LoadResult:
        data = dict(data)
        data["windows"] = [WindowStats(**w) for w in data["windows"]]
        data.setdefault("engine", {})  # results written before the fields existed
        data.setdefault("gpu", {})
        return cls(**data)

    def describe(self) -> str:
        lat = self.latency_ms
        knob = f"concurrency {self.settings['concurrency']}" if self.settings["mode"] == "concurrency" else \
            f"{self.settings['mode']} {self.settings['rate']:g}/s"
        return (f"{self.model} {self.protocol} {knob}: {self.throughput:.1f} infer/s, p50 {lat['p50']:.1f} ms, "
                f"p95 {lat['p95']:.1f} ms, p99 {lat['p99']:.1f} ms, errors {self.errors}, "
                f"{'stable' if self.stable else 'NOT stable'} after {len(self.windows)} windows")


DRAIN_S = 30.0  # at the end of a run, how long the requests in flight may take to be answered before they are cancelled


def run_load(spec: ClientSpec, settings: LoadSettings, probe=None, started: threading.Event | None = None) -> LoadResult:
    """Measure until stable or max_windows. `probe()` (e.g. a server_stats.StatisticsProbe) is
    called at every window boundary; its snapshots around the summary span go into the result.
    `started` is set when every worker is ready and the clock starts (another load can line up with it)."""
    ctx = multiprocessing.get_context("spawn")
    messages = ctx.Queue()
    stop = ctx.Event()
    go = ctx.Event()
    t0 = ctx.Value("q", 0)
    shares = _shares(settings)
    workers = []
    for worker_id, share in enumerate(shares):
        args = (worker_id, spec, settings, share, t0, go, stop, messages)
        if settings.processes == 1:
            workers.append(threading.Thread(target=_worker_main, args=args, daemon=True))
        else:
            workers.append(ctx.Process(target=_worker_main, args=args, daemon=True))
    for worker in workers:
        worker.start()
    try:
        result = _control(spec, settings, probe, workers, messages, stop, go, t0, started)
        warn_overhead(result, settings, f"raise processes (now {settings.processes})")
        return result
    finally:
        stop.set()
        go.set()
        for worker in workers:
            worker.join(timeout=30)
            if isinstance(worker, multiprocessing.process.BaseProcess) and worker.is_alive():
                worker.kill()


def _shares(settings: LoadSettings) -> list[float]:
    n = settings.processes
    if settings.mode == "concurrency":
        return [settings.concurrency // n + (1 if i < settings.concurrency % n else 0) for i in range(n)]
    return [settings.rate / n] * n


def _get(messages, kind: str, timeout: float, workers=()):
    deadline = time.monotonic() + timeout
    while True:
        try:
            message = messages.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
        except queue_module.Empty:
            dead = [w for w in workers if isinstance(w, multiprocessing.process.BaseProcess) and w.exitcode is not None]
            if dead:
                raise RuntimeError(f"load worker process exited with code {dead[0].exitcode} before sending {kind!r}") from None
            if time.monotonic() < deadline:
                continue
            raise TimeoutError(f"load workers sent no {kind!r} message within {timeout:.0f} s") from None
        if message[0] == "failed":
            raise RuntimeError(f"load worker {message[1]} failed: {message[2]}")
        if message[0] == kind:
            return message
        if time.monotonic() > deadline:
            raise TimeoutError(f"load workers sent no {kind!r} message within {timeout:.0f} s")


def _control(spec, settings, probe, workers, messages, stop, go, t0, started=None) -> LoadResult:
    n_workers = len(workers)
    for _ in range(n_workers):
        _get(messages, "ready", timeout=120, workers=workers)
    start_ns = time.monotonic_ns() + 50_000_000
    t0.value = start_ns
    go.set()
    if started is not None:
        started.set()
    window_ns = int(settings.window_s * 1e9)
    first_ns = start_ns + int(settings.warmup_s * 1e9)
    pending: dict[int, list] = {}
    snapshots: dict[int, dict] = {}
    windows: list[WindowStats] = []
    records: list[tuple[np.ndarray, int]] = []  # per window: latencies (s), errors
    errors_seen: list[str] = []
    stable = False
    k = -1
    while True:
        boundary = first_ns + (k + 1) * window_ns
        _sleep_until(boundary)
        if probe is not None:
            snapshots[k + 1] = probe()
        while len(pending.get(k, [])) < n_workers:
            message = _get(messages, "window", timeout=settings.window_s * 5 + 60, workers=workers)
            pending.setdefault(message[2], []).append(message)
        if k >= 0:
            window, lat, errs, cpus = merge_window(k, pending.pop(k), settings, first_ns, window_ns)
            windows.append(window)
            records.append((lat, errs, cpus))
            stable = is_stable(windows, settings.stability_count, settings.stability_threshold, settings.stability_latency)
            if stable or len(windows) >= settings.max_windows:
                break
        else:
            pending.pop(k)
        k += 1
    stop.set()
    for _ in range(n_workers):
        try:
            done = _get(messages, "done", timeout=60)
            errors_seen.extend(m for m in done[2] if m not in errors_seen)
        except TimeoutError:
            break
    result = summarise(spec.protocol, spec.payload.model if spec.payload else None, settings, windows, records,
                       stable, snapshots, errors_seen[:5])
    result.engine = {"name": "native", **result.engine}
    return result


def merge_window(k, parts, settings, first_ns, window_ns):
    """One window from every worker's part ("window", worker_id, k, latencies_s, errors, cpu_s, late):
    the merged statistics, the raw latencies, the error count and each worker's CPU (seconds per second).
    Both engines merge through here."""
    lat = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0)
    errors = sum(p[4] for p in parts)
    cpus = {p[1]: p[5] / settings.window_s for p in parts}
    cpu = max(cpus.values(), default=0.0)
    late = sum(p[6] for p in parts)
    window = WindowStats(index=k, start_s=(first_ns + k * window_ns) / 1e9, duration_s=settings.window_s,
                         completed=int(lat.size), errors=int(errors), throughput=lat.size / settings.window_s,
                         latency_ms=latency_table(lat), client_cpu=float(cpu), late_sends=int(late))
    return window, lat, errors, cpus


def summarise(protocol, model, settings, windows, records, stable, snapshots, error_messages,
              remedy: str | None = None) -> LoadResult:
    """The result over the last `stability_count` windows (records: per window (latencies_s, errors,
    {worker: cpu})); `engine.workers` holds each worker's mean CPU over that span."""
    count = min(settings.stability_count, len(windows))
    span = windows[-count:]
    latencies = np.concatenate([r[0] for r in records[-count:]])
    duration = sum(w.duration_s for w in span)
    last = windows[-1].index
    notes = []
    cpu = max(w.client_cpu for w in span)
    per_worker: dict = {}
    for record in records[-count:]:
        for worker, value in record[2].items():
            per_worker.setdefault(worker, []).append(value)
    engine = {"workers": [{"id": worker, "client_cpu": round(float(np.mean(values)), 4)}
                          for worker, values in sorted(per_worker.items(), key=lambda item: str(item[0]))]}
    if cpu > settings.overhead_warn:
        notes.append(f"client overhead: the busiest load process used {cpu:.0%} of a core "
                     f"(> {settings.overhead_warn:.0%}); the generator may be the bottleneck — "
                     + (remedy or f"raise processes (now {settings.processes})"))
    if not stable:
        notes.append(f"not stable: the last {settings.stability_count} of {len(windows)} windows differ by more "
                     f"than ±{settings.stability_threshold:.0%} in throughput or latency")
    late = sum(w.late_sends for w in span)
    if late:
        notes.append(f"{late} sends left later than {settings.late_threshold_s * 1e3:g} ms after their schedule")
    server = {}
    if snapshots:
        server = {"start": snapshots.get(last - count + 1), "end": snapshots.get(last + 1)}
    return LoadResult(
        protocol=protocol, model=model, settings=asdict(settings),
        windows=windows, stable=stable, throughput=latencies.size / duration if duration else 0.0,
        latency_ms=latency_table(latencies), completed=int(latencies.size),
        errors=int(sum(w.errors for w in span)), late_sends=int(late), client_cpu=float(cpu),
        latencies_ms=[round(float(v) * 1e3, 4) for v in latencies], error_messages=error_messages,
        warnings=notes, server_stats=server, engine=engine,
    )


def warn_overhead(result: LoadResult, settings: LoadSettings, remedy: str) -> None:
    """perf_analyzer's warning, raised where the caller runs (not in a load process)."""
    if result.client_cpu > settings.overhead_warn:
        warnings.warn(f"client overhead: the busiest load process used {result.client_cpu:.0%} of a core "
                      f"(> {settings.overhead_warn:.0%}); the generator may be the bottleneck — {remedy}",
                      ClientOverheadWarning, stacklevel=3)


def _sleep_until(deadline_ns: int) -> None:
    delay = (deadline_ns - time.monotonic_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)


# ---- worker side -------------------------------------------------------------------------------

def _worker_main(worker_id, spec, settings, share, t0, go, stop, messages) -> None:
    try:
        asyncio.run(_worker(worker_id, spec, settings, share, t0, go, stop, messages))
    except BaseException as error:  # reported to the controller, which raises it
        messages.put(("failed", worker_id, f"{type(error).__name__}: {error}"))


async def _worker(worker_id, spec, settings, share, t0, go, stop, messages) -> None:
    client = spec.build(int(share) if settings.mode == "concurrency" else 64)
    buffer: list[tuple[int, int, bool]] = []
    error_messages: list[str] = []
    late = [0]
    stopping = asyncio.Event()
    messages.put(("ready", worker_id))
    while not go.wait(0.05):
        await asyncio.sleep(0)
    start_ns = t0.value

    async def one(scheduled_ns: int | None) -> None:
        begin = time.monotonic_ns() if scheduled_ns is None else scheduled_ns
        ok = True
        try:
            await client.issue()
        except Exception as error:  # an error response is a measurement, not a crash
            ok = False
            text = f"{type(error).__name__}: {error}"[:300]
            if text not in error_messages and len(error_messages) < 5:
                error_messages.append(text)
        buffer.append((begin, time.monotonic_ns(), ok))

    in_flight: set[asyncio.Task] = set()  # the open loop's requests not answered yet

    async def closed_loop() -> None:
        while not stopping.is_set():
            await one(None)

    async def open_loop() -> None:
        rng = np.random.default_rng(settings.seed + worker_id)
        rate = float(share)
        next_ns = start_ns
        while not stopping.is_set():
            gap = rng.exponential(1.0 / rate) if settings.mode == "poisson" else 1.0 / rate
            next_ns += int(gap * 1e9)
            delay = (next_ns - time.monotonic_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if (time.monotonic_ns() - next_ns) / 1e9 > settings.late_threshold_s:
                late[0] += 1
            if len(in_flight) >= settings.max_outstanding:
                buffer.append((next_ns, time.monotonic_ns(), False))
                continue
            task = asyncio.get_running_loop().create_task(one(next_ns))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)

    if settings.mode == "concurrency":
        tasks = [asyncio.create_task(closed_loop()) for _ in range(int(share))]
    else:
        tasks = [asyncio.create_task(open_loop())]

    window_ns = int(settings.window_s * 1e9)
    boundary = start_ns + int(settings.warmup_s * 1e9)
    k = -1
    cpu = time.process_time()
    while True:
        while time.monotonic_ns() < boundary and not stop.is_set():
            await asyncio.sleep(min(0.05, max(0.0, (boundary - time.monotonic_ns()) / 1e9)))
        if stop.is_set():
            break
        done = [r for r in buffer if r[1] < boundary]
        buffer[:] = [r for r in buffer if r[1] >= boundary]
        ok = np.array([(r[1] - r[0]) / 1e9 for r in done if r[2]], dtype=np.float64)
        now_cpu = time.process_time()
        messages.put(("window", worker_id, k, ok, len(done) - ok.size, now_cpu - cpu, late[0]))
        cpu, late[0] = now_cpu, 0
        k += 1
        boundary += window_ns
    stopping.set()
    if settings.mode != "concurrency":
        for task in tasks:  # the open loop's scheduler, asleep until its next arrival: its requests are tasks of their own
            task.cancel()
    await _drain(tasks, in_flight)
    await client.close()
    messages.put(("done", worker_id, error_messages))


async def _drain(loops: list[asyncio.Task], in_flight: set[asyncio.Task]) -> None:
    """Let the requests in flight be answered (a closed loop ends after its own, the open loop stops sending),
    as perf_analyzer waits for its outstanding requests; only what is still unanswered after DRAIN_S is
    cancelled. Cancelling gRPC calls mid-flight leaves the server executing them for nobody (the next
    measurement on that server starts behind a backlog), and a Triton server aborted in gRPC core ("ASSERTION
    FAILED: prior > 0", sync.cc) while a run of this generator ended (CI, 2026-12-06; Triton's own reports of
    such aborts around cancelled requests: triton-inference-server/server#7016, #7368)."""
    deadline = time.monotonic() + DRAIN_S
    _, left = await asyncio.wait(loops, timeout=DRAIN_S)
    pending = set(in_flight)
    if pending:
        _, still = await asyncio.wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        left |= still
    for task in left:
        task.cancel()
    await asyncio.gather(*loops, *pending, return_exceptions=True)


def sweep(spec: ClientSpec, settings: LoadSettings, concurrencies, probe=None, run=None) -> list[LoadResult]:
    """perf_analyzer's --concurrency-range: one stable measurement per concurrency. `run`: the engine
    (default run_load; e.g. a Locust run, harness.load.locust_engine.run_locust)."""
    run = run or run_load
    results = []
    for concurrency in concurrencies:
        point = LoadSettings(**{**asdict(settings), "mode": "concurrency", "concurrency": int(concurrency),
                                "processes": min(settings.processes, int(concurrency))})
        results.append(run(spec, point, probe))
    return results


def search_latency_bound(spec: ClientSpec, settings: LoadSettings, bound_ms: float, key: str = "p99",
                         max_concurrency: int = 64, probe=None, run=None) -> tuple[LoadResult | None, list[LoadResult]]:
    """The highest-throughput concurrency whose `key` latency stays ≤ bound_ms: double until the
    bound breaks, then bisect between the last good and the first bad concurrency."""
    tried: dict[int, LoadResult] = {}

    def measure(c: int) -> LoadResult:
        if c not in tried:
            tried[c] = sweep(spec, settings, [c], probe, run)[0]
        return tried[c]

    good, bad = 0, None
    c = 1
    while c <= max_concurrency:
        if measure(c).latency_ms[key] <= bound_ms:
            good, c = c, c * 2
        else:
            bad = c
            break
    if bad is not None and good:
        while bad - good > 1:
            mid = (good + bad) // 2
            if measure(mid).latency_ms[key] <= bound_ms:
                good = mid
            else:
                bad = mid
    within = [r for r in tried.values() if r.latency_ms[key] <= bound_ms and r.errors == 0]
    best = max(within, key=lambda r: r.throughput) if within else None
    return best, [tried[c] for c in sorted(tried)]


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
