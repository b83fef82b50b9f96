"""The distributed load engine: Locust's master and workers, measured like the native generator.

`run_locust(spec, settings, probe)` is `run_load`'s twin: it starts a Locust master and `workers` local
worker processes (`python -m harness.load.locust_node`; more may connect from other machines:
`remote_workers`), and returns the same LoadResult — windows, perf_analyzer's stability rule,
percentiles from the raw latencies, error counts — with `engine` naming every worker and its client CPU.
The calling process never imports Locust (gevent would patch it); the processes it starts die with it
(PR_SET_PDEATHSIG), on Ctrl-C and SIGTERM it stops them, master first so the workers hear `quit`.

Why gRPC in gevent's cooperative mode: tritonclient's gRPC client blocks the whole gevent hub (one
request at a time per process); `grpc.experimental.gevent.init_gevent()` makes a blocking RPC yield.
Measured on the echo model (benchmarks/results/README.md, issue 24): it costs more client CPU per
request than the native asyncio client; the HTTP user (geventhttpclient, Triton's binary-tensor body)
costs less. Both are here: the protocol is the ClientSpec's."""

from __future__ import annotations

import json
import os
import pickle
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from harness.load.clients import ClientSpec
from harness.load.generator import LoadResult, LoadSettings, warn_overhead

ANNOUNCE = "YTS_LOCUST "
USERS = {"grpc": "gRPC ModelInfer, request serialised once, grpc's gevent cooperative mode",
         "http": "HTTP binary-tensor POST, body serialised once, geventhttpclient",
         "null": "no request (the engine's own ceiling)"}


class LocustRunError(RuntimeError):
    """The master or a worker failed; the message carries its error and log tail."""


def wire_plan(spec: ClientSpec, settings: LoadSettings) -> dict:
    """What every worker needs, in plain values (it travels as a Locust message): the request's bytes,
    serialised here once, and where to send them."""
    plan = {"protocol": spec.protocol, "url": spec.url, "model": spec.payload.model if spec.payload else None,
            "timeout_s": spec.timeout_s, "body": b"", "header_length": 0}
    if spec.protocol == "grpc":
        from harness.load.clients import infer_request

        plan["body"] = infer_request(spec.payload).SerializeToString()
    elif spec.protocol == "http":
        from harness.load.wrk import request_body

        plan["body"], plan["header_length"] = request_body(spec.payload)
    elif spec.protocol != "null":
        raise ValueError(f"unknown protocol {spec.protocol!r} (grpc, http, null)")
    return plan


def _log_dir(log_dir: Path | None) -> Path:
    if log_dir is None:
        from harness.paths import cache_dir

        log_dir = cache_dir("logs")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def node_command(role: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "harness.load.locust_node", role, *args]


PARENT_PID = "YTS_LOCUST_PARENT_PID"  # the environment variable naming the launcher a node dies with


def start_node(role: str, args: list[str], log: Path, stdout=None) -> subprocess.Popen:
    with open(log, "wb") as handle:
        # No preexec_fn: a fork in a process where gRPC runs restarts its poller in the child, which dies of
        # EBADF once close_fds closed the epoll descriptor (grpc/grpc#43055: a worker exited -6 before exec);
        # without one Python starts the node with vfork. The node ties itself to this process (PARENT_PID).
        return subprocess.Popen(node_command(role, *args), stdout=stdout or handle, stderr=handle,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", PARENT_PID: str(os.getpid())})


def stop_nodes(processes: list[subprocess.Popen], grace_s: float = 5.0) -> None:
    """SIGTERM each (the master first: it tells its workers to quit), then SIGKILL what is left."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + grace_s
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class LocustRun:
    """One master and its local workers, as processes of this one. Usable as a context manager;
    `wait()` returns the master's result."""

    def __init__(self, spec: ClientSpec, settings: LoadSettings, probe=None, workers: int = 2, remote_workers: int = 0,
                 bind: str = "127.0.0.1", port: int = 0, log_dir: Path | None = None, connect_timeout_s: float = 60.0):
        if workers + remote_workers < 1:
            raise ValueError("a Locust run needs at least one worker")
        if settings.mode == "concurrency" and settings.concurrency < workers + remote_workers:
            raise ValueError(f"concurrency {settings.concurrency} is less than the {workers + remote_workers} workers")
        if remote_workers and port == 0:
            port = 5557  # Locust's default: what `yts load --worker --master HOST` connects to
        self.spec, self.settings, self.workers, self.remote_workers = spec, settings, workers, remote_workers
        self.log_dir = _log_dir(log_dir)
        self._scratch = tempfile.TemporaryDirectory(prefix="yts-locust-")
        scratch = Path(self._scratch.name)
        plan = {"wire": wire_plan(spec, settings), "settings": asdict(settings), "user": USERS[spec.protocol],
                "probe": {"url": probe.url, "model": probe.model} if probe is not None else None}
        (scratch / "plan.pkl").write_bytes(pickle.dumps(plan))
        self.out = scratch / "result.json"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.master_log = self.log_dir / f"locust-{stamp}-{os.getpid()}-master.log"
        self.worker_logs: list[Path] = []
        self.processes: list[subprocess.Popen] = []
        self.master = start_node("master", ["--plan", str(scratch / "plan.pkl"), "--out", str(self.out),
                                            "--expect-workers", str(workers + remote_workers), "--bind", bind,
                                            "--port", str(port), "--connect-timeout", str(connect_timeout_s)],
                                 self.master_log, stdout=subprocess.PIPE)
        self.processes.append(self.master)
        self.port = self._listening(timeout_s=120)["port"]
        for i in range(workers):
            log = self.log_dir / f"locust-{stamp}-{os.getpid()}-worker{i}.log"
            self.worker_logs.append(log)
            self.processes.append(start_node("worker", ["--master", f"127.0.0.1:{self.port}"], log))

    def _announcements(self, timeout_s: float):
        """The master's YTS_LOCUST lines, as they come; ends at EOF or timeout."""
        selector = selectors.DefaultSelector()
        selector.register(self.master.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not selector.select(timeout=0.5):
                    self._check_workers()
                    continue
                line = self.master.stdout.readline()
                if not line:
                    return
                text = line.decode(errors="replace").strip()
                if text.startswith(ANNOUNCE):
                    yield json.loads(text.removeprefix(ANNOUNCE))
        finally:
            selector.close()

    def _check_workers(self) -> None:
        for process, log in zip(self.processes[1:], self.worker_logs):
            # exit 0: the master told it to quit (a worker lost mid-run is the master's to report)
            if process.poll() not in (None, 0):
                raise LocustRunError(f"Locust worker (pid {process.pid}) exited with code {process.returncode} "
                                     f"during the run; its log {log}:\n{_tail(log)}")

    def _listening(self, timeout_s: float) -> dict:
        for event in self._announcements(timeout_s):
            if event.get("event") == "listening":
                return event
        self.close()
        raise LocustRunError(f"the Locust master did not start (exit code {self.master.poll()}); its log "
                             f"{self.master_log}:\n{_tail(self.master_log)}")

    def wait(self) -> LoadResult:
        s = self.settings
        budget = 180 + (s.warmup_s + s.window_s * s.max_windows) * 3 + self.spec.timeout_s
        for event in self._announcements(budget):
            if event.get("event") == "done":
                break
        else:
            raise LocustRunError(f"the Locust master gave no result within {budget:.0f} s (exit code "
                                 f"{self.master.poll()}); its log {self.master_log}:\n{_tail(self.master_log)}")
        self.master.wait(timeout=30)
        data = json.loads(self.out.read_text()) if self.out.exists() else {"error": "no result file"}
        if "error" in data:
            raise LocustRunError(f"the Locust run failed: {data['error']}\nmaster log {self.master_log}:\n"
                                 f"{_tail(self.master_log, 15)}")
        return LoadResult.from_dict(data)

    def close(self) -> None:
        stop_nodes(self.processes)
        if self.master.stdout is not None:
            self.master.stdout.close()
        self._scratch.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_locust(spec: ClientSpec, settings: LoadSettings, probe=None, workers: int = 2, **options) -> LoadResult:
    """Measure with Locust until stable or max_windows, exactly as run_load does. `probe`: a
    server_stats.StatisticsProbe (the master builds its own from its url and model). `settings.processes`
    is set to the number of workers, as the native engine records its processes."""
    total = workers + options.get("remote_workers", 0)
    settings = LoadSettings(**{**asdict(settings), "processes": total})
    with LocustRun(spec, settings, probe, workers=workers, **options) as run:
        result = run.wait()
    warn_overhead(result, settings, f"add Locust workers (now {total})")
    return result


def describe_engine(result: LoadResult) -> str:
    """One line per load process: how many reported, each one's client CPU (CPU seconds per second)."""
    engine = result.engine
    if engine.get("name") != "locust":
        workers = engine.get("workers", [])
        return (f"native: {len(workers)} load process(es); client CPU "
                + ", ".join(f"process {w['id']} {w['client_cpu']:.0%}" for w in workers))
    lines = [f"locust {engine['version']}: {engine['workers_reported']} of {engine['workers_expected']} workers "
             f"reported; {engine['requests']['completed']} requests completed, {engine['requests']['errors']} failed "
             f"over the whole run; master CPU {engine['master']['cpu']:.0%}"]
    for w in engine["workers"]:
        lines.append(f"  worker {w['id']} ({w['host']} pid {w['pid']}, {w['users']} users): client CPU "
                     f"{w['client_cpu']:.0%} over the measured windows, {w['run_cpu']:.0%} over the run; "
                     f"{w['completed']} completed, {w['errors']} failed")
    return "\n".join(lines)


def worker_command(master: str) -> list[str]:
    """What `yts load --worker --master HOST[:PORT]` executes on another machine."""
    return node_command("worker", "--master", master)
