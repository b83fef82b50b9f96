"""One Locust process of the distributed engine: `python -m harness.load.locust_node master|worker ...`,
started by harness.load.locust_engine (or `yts load --worker` on another machine). Nothing else imports
this module: gevent patches the process before socket or threading are imported anywhere, and gRPC runs
in its gevent cooperative mode (grpc.experimental.gevent), without which a blocking RPC stops every
other user of the process.

Worker: `TritonUser`s send the request serialised once (the ModelInferRequest bytes of
harness.load.clients.infer_request, or the binary-tensor HTTP body wrk posts); every request fires
Locust's `request` event, and a listener keeps the raw (begin, end, ok) of each — Locust's own
percentiles are bucket-rounded — cut into the native generator's windows and sent to the master as
custom messages. Closed loop: one user per outstanding request; open loop: one arrival process per
worker (constant or Poisson), a greenlet per request, as the native generator does it.

Master: the native generator's control loop over those messages — the same merge, stability rule,
percentiles and LoadResult (harness.load.generator.merge_window / summarise) — then the result as JSON."""

from gevent import monkey

monkey.patch_all()

import grpc  # noqa: E402
import grpc.experimental.gevent as grpc_gevent  # noqa: E402

grpc_gevent.init_gevent()

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pickle  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
from gevent.event import Event  # noqa: E402
from gevent.queue import Empty, Queue  # noqa: E402

import locust  # noqa: E402
from locust import User, constant, task  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.rpc import Message  # noqa: E402
from locust.runners import STATE_MISSING  # noqa: E402

ANNOUNCE = "YTS_LOCUST "  # the master's stdout lines for the launcher: one JSON object each
GRPC_METHOD = "/inference.GRPCInferenceService/ModelInfer"
OPEN_LOOP_CONNECTIONS = 128  # open loop: HTTP connections / gRPC completion threads per worker (native: 64 HTTP)


# ---- issuing one request -----------------------------------------------------------------------

class GrpcIssuer:
    """One channel per worker process, the serialised ModelInferRequest sent as bytes (no protobuf
    built, no reply decoded): harness.load.clients.GrpcClient on gevent instead of asyncio.

    In gevent mode each blocking RPC waits for its completion in a thread of the hub's threadpool, whose
    default of 10 threads would cap a worker at 10 outstanding requests (measured: 32 users on the echo
    model, 1,950/s with 10 threads, 2,650/s with 40): the pool gets one thread per user, and some."""

    def __init__(self, plan: dict, connections: int):
        gevent.get_hub().threadpool.maxsize = max(10, connections + 8)
        self._channel = grpc.insecure_channel(plan["url"], options=[("grpc.max_send_message_length", -1),
                                                                     ("grpc.max_receive_message_length", -1)])
        self._infer = self._channel.unary_unary(GRPC_METHOD)
        self._body = plan["body"]
        self._timeout = plan["timeout_s"]

    def issue(self) -> None:
        try:
            self._infer(self._body, timeout=self._timeout)
        except grpc.RpcError as error:
            raise RuntimeError(f"[{error.code().name}] {error.details()}") from None


class HttpIssuer:
    """POST /v2/models/MODEL/infer with the binary-tensor body (harness.load.wrk.request_body) over
    geventhttpclient, the client tritonclient.http itself is built on: one connection per user."""

    def __init__(self, plan: dict, connections: int):
        from geventhttpclient import HTTPClient

        host, port = plan["url"].removeprefix("http://").rsplit(":", 1)
        self._client = HTTPClient(host, int(port), concurrency=max(1, connections),
                                  connection_timeout=plan["timeout_s"], network_timeout=plan["timeout_s"])
        self._path = f"/v2/models/{plan['model']}/infer"
        self._body = plan["body"]
        self._headers = {"Inference-Header-Content-Length": str(plan["header_length"]),
                         "Content-Type": "application/octet-stream"}

    def issue(self) -> None:
        response = self._client.post(self._path, body=self._body, headers=self._headers)
        data = response.read()
        if response.status_code != 200:
            try:
                text = json.loads(data).get("error", "")
            except (ValueError, AttributeError):
                text = data[:200].decode(errors="replace")
            raise RuntimeError(f"[HTTP {response.status_code}] {text}")


class NullIssuer:
    """The do-nothing system: the engine's own ceiling."""

    def issue(self) -> None:
        gevent.sleep(0)


# ---- worker ------------------------------------------------------------------------------------

class WorkerSide:
    """What one worker process knows: the plan from the master, its raw records, its totals."""

    def __init__(self):
        self.environment = None
        self.runner = None
        self.plan: dict | None = None
        self.issuer = None
        self.go = Event()
        self.stopping = Event()
        self.start_ns = 0
        self.buffer: list[tuple[int, int, bool]] = []
        self.completed = 0
        self.errors = 0
        self.error_messages: list[str] = []
        self.late = 0
        self.in_flight = 0
        self.cpu_start = 0.0

    # the request event: every request of this process, whoever fired it
    def on_request(self, request_type=None, name=None, response_time=0.0, exception=None, context=None, **_):
        context = context or {}
        end = context.get("end_ns") or time.monotonic_ns()
        begin = context.get("begin_ns") or end - int(response_time * 1e6)
        ok = exception is None
        self.buffer.append((begin, end, ok))
        if ok:
            self.completed += 1
        else:
            self.errors += 1
            text = f"{type(exception).__name__}: {exception}"[:300]
            if text not in self.error_messages and len(self.error_messages) < 5:
                self.error_messages.append(text)

    def issue_one(self, scheduled_ns: int | None, counted: bool = False) -> None:
        """One request and its event. `counted`: already in `in_flight` (an open-loop arrival is counted
        when its greenlet is spawned, so a stop cannot report before it runs)."""
        begin = time.monotonic_ns() if scheduled_ns is None else scheduled_ns
        error = None
        if not counted:
            self.in_flight += 1
        try:
            self.issuer.issue()
        except Exception as caught:  # an error answer is a measurement, not a crash
            error = caught
        finally:
            self.in_flight -= 1
        end = time.monotonic_ns()
        self.environment.events.request.fire(
            request_type=self.plan["protocol"], name=self.plan["model"] or "null", response_time=(end - begin) / 1e6,
            response_length=0, response=None, context={"begin_ns": begin, "end_ns": end}, exception=error,
            start_time=None, url=None)

    def closed_loop(self) -> None:
        while not self.stopping.is_set():
            self.issue_one(None)

    def open_loop(self, user_index: int) -> None:
        settings = self.plan["settings"]
        rate = settings["rate"] / self.plan["users_total"]
        rng = np.random.default_rng(settings["seed"] + self.plan["index"] * 1000 + user_index)
        next_ns = self.start_ns
        outstanding: set = set()
        while not self.stopping.is_set():
            gap = rng.exponential(1.0 / rate) if settings["mode"] == "poisson" else 1.0 / rate
            next_ns += int(gap * 1e9)
            delay = (next_ns - time.monotonic_ns()) / 1e9
            if delay > 0 and self.stopping.wait(delay):
                break
            if (time.monotonic_ns() - next_ns) / 1e9 > settings["late_threshold_s"]:
                self.late += 1
            if len(outstanding) >= settings["max_outstanding"]:
                self.environment.events.request.fire(
                    request_type=self.plan["protocol"], name=self.plan["model"] or "null", response_time=0.0,
                    response_length=0, response=None, context={"begin_ns": next_ns, "end_ns": time.monotonic_ns()},
                    exception=RuntimeError(f"dropped: {len(outstanding)} requests outstanding"), start_time=None, url=None)
                continue
            self.in_flight += 1
            greenlet = gevent.spawn(self.issue_one, next_ns, True)
            outstanding.add(greenlet)
            greenlet.link(outstanding.discard)
        gevent.joinall(list(outstanding), timeout=self.plan["timeout_s"])

    def cut_windows(self) -> None:
        """The native worker's window loop: at each boundary, the records completed before it go to
        the master as one window (the first, k = -1, is the warm-up)."""
        settings = self.plan["settings"]
        window_ns = int(settings["window_s"] * 1e9)
        boundary = self.start_ns + int(settings["warmup_s"] * 1e9)
        k = -1
        cpu = time.process_time()
        while not self.stopping.wait(max(0.0, (boundary - time.monotonic_ns()) / 1e9)):
            if time.monotonic_ns() < boundary:
                continue
            done = [r for r in self.buffer if r[1] < boundary]
            self.buffer[:] = [r for r in self.buffer if r[1] >= boundary]
            ok = np.array([(r[1] - r[0]) / 1e9 for r in done if r[2]], dtype=np.float64)
            now_cpu = time.process_time()
            self.runner.send_message("yts_window", {"k": k, "latencies": ok.tobytes(), "errors": len(done) - ok.size,
                                                    "cpu_s": now_cpu - cpu, "late": self.late})
            cpu, self.late = now_cpu, 0
            k += 1
            boundary += window_ns

    # custom messages from the master
    def on_plan(self, environment, msg, **_):
        try:
            self.plan = msg.data
            protocol = self.plan["protocol"]
            if protocol == "grpc":
                self.issuer = GrpcIssuer(self.plan, self.plan["connections"])
            elif protocol == "http":
                self.issuer = HttpIssuer(self.plan, self.plan["connections"])
            elif protocol == "null":
                self.issuer = NullIssuer()
            else:
                raise ValueError(f"unknown protocol {protocol!r}")
            self.runner.send_message("yts_ready", {"host": socket.gethostname(), "pid": os.getpid()})
        except Exception as error:
            self.runner.send_message("yts_failed", {"error": f"{type(error).__name__}: {error}"})

    def on_go(self, environment, msg, **_):
        self.start_ns = time.monotonic_ns() + int(msg.data["lead_s"] * 1e9)
        self.cpu_start = time.process_time()
        gevent.spawn(self._start_at)

    def _start_at(self):
        gevent.sleep(max(0.0, (self.start_ns - time.monotonic_ns()) / 1e9))
        self.go.set()
        self.cut_windows()

    def on_stop(self, environment, msg, **_):
        """Stop issuing, let every request in flight finish (each one is counted), then report."""
        self.stopping.set()
        deadline = time.monotonic() + self.plan["timeout_s"]
        while self.in_flight and time.monotonic() < deadline:
            gevent.sleep(0.01)
        wall = max(1e-9, (time.monotonic_ns() - self.start_ns) / 1e9)
        self.runner.send_message("yts_done", {
            "completed": self.completed, "errors": self.errors, "error_messages": self.error_messages,
            "in_flight": self.in_flight, "cpu": (time.process_time() - self.cpu_start) / wall})


WORKER = WorkerSide()


class TritonUser(User):
    """A Locust user of the plan the master sent: waits for the common start, then runs closed loop
    (one request outstanding) or one open-loop arrival process, until the master says stop."""

    wait_time = constant(0)
    _count = 0

    @task
    def load(self):
        TritonUser._count += 1
        index = TritonUser._count - 1
        WORKER.go.wait()
        if WORKER.plan["settings"]["mode"] == "concurrency":
            WORKER.closed_loop()
        else:
            WORKER.open_loop(index)
        while True:  # the task must not return (Locust would run it again): idle until the master stops us
            gevent.sleep(3600)


def worker_main(master: str) -> int:
    host, _, port = master.rpartition(":") if ":" in master else (master, "", "5557")
    environment = Environment(user_classes=[TritonUser])
    runner = environment.create_worker_runner(host, int(port))
    WORKER.environment, WORKER.runner = environment, runner
    environment.events.request.add_listener(WORKER.on_request)
    runner.register_message("yts_plan", WORKER.on_plan)
    runner.register_message("yts_go", WORKER.on_go)
    runner.register_message("yts_stop", WORKER.on_stop, concurrent=True)

    def leave(*_):  # tell the master, then go (it fails the run naming this worker)
        try:
            runner.client.send(Message("quit", None, runner.client_id))
            gevent.sleep(0.2)
        finally:
            os._exit(143)

    gevent.signal_handler(signal.SIGTERM, leave)
    gevent.signal_handler(signal.SIGINT, leave)
    runner.greenlet.join()
    return 0


# ---- master ------------------------------------------------------------------------------------

class MasterSide:
    def __init__(self, plan: dict, expect: int, bind: str, port: int, connect_timeout_s: float):
        self.plan = plan
        self.expect = expect
        self.connect_timeout_s = connect_timeout_s
        self.inbox: Queue = Queue()
        self.environment = Environment(user_classes=[TritonUser])
        self.runner = self.environment.create_master_runner(bind, port)
        for kind in ("yts_ready", "yts_window", "yts_done", "yts_failed"):
            self.runner.register_message(kind, self._receiver(kind))
        self.index: dict[str, int] = {}
        self.info: dict[int, dict] = {}

    def _receiver(self, kind):
        def receive(environment, msg, **_):
            self.inbox.put((kind, msg.node_id, msg.data))
        return receive

    def _get(self, kind: str, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.inbox.get(timeout=1.0)
            except Empty:
                present = {c.id for c in self.runner.clients.all if c.state != STATE_MISSING}
                gone = [i for node, i in self.index.items() if node not in present]
                if gone:
                    raise RuntimeError(f"Locust worker {', '.join(map(str, gone))} stopped (quit, or its heartbeats "
                                       f"were missed) while the master waited for {kind!r}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Locust workers sent no {kind!r} message within {timeout:.0f} s")
                continue
            if message[0] == "yts_failed":
                raise RuntimeError(f"Locust worker {self.index.get(message[1], message[1])} failed: {message[2]['error']}")
            if message[0] == kind:
                return message
            if time.monotonic() > deadline:
                raise TimeoutError(f"Locust workers sent no {kind!r} message within {timeout:.0f} s")

    def run(self, announce) -> dict:
        from harness.load.generator import LoadSettings, merge_window, summarise
        from harness.load.stats import is_stable

        settings = LoadSettings(**self.plan["settings"])
        announce({"event": "listening", "port": self.runner.server.port, "pid": os.getpid()})
        deadline = time.monotonic() + self.connect_timeout_s
        while self.runner.worker_count < self.expect:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.runner.worker_count} of {self.expect} Locust workers connected within "
                                   f"{self.connect_timeout_s:.0f} s")
            gevent.sleep(0.05)
        nodes = sorted(c.id for c in self.runner.clients.ready)[: self.expect]
        self.index = {node: i for i, node in enumerate(nodes)}
        closed = settings.mode == "concurrency"
        users_total = settings.concurrency if closed else len(nodes)
        per_worker = [users_total // len(nodes) + (1 if i < users_total % len(nodes) else 0) for i in range(len(nodes))]
        for node, i in self.index.items():
            self.runner.send_message("yts_plan", {**self.plan["wire"], "settings": self.plan["settings"], "index": i,
                                                  "users_total": users_total,
                                                  "connections": per_worker[i] if closed else OPEN_LOOP_CONNECTIONS},
                                     client_id=node)
        for _ in nodes:
            _, node, data = self._get("yts_ready", 120)
            self.info[self.index[node]] = {"id": self.index[node], "node": node, **data}
        self.runner.start(users_total, spawn_rate=min(users_total, 100 * len(nodes)))
        lead_s = 0.2
        self.runner.send_message("yts_go", {"lead_s": lead_s})
        start_ns = time.monotonic_ns() + int(lead_s * 1e9)
        cpu0, wall0 = time.process_time(), time.monotonic()

        probe = None
        if self.plan.get("probe"):
            from harness.load.server_stats import StatisticsProbe

            probe = StatisticsProbe(self.plan["probe"]["url"], self.plan["probe"]["model"])
        window_ns = int(settings.window_s * 1e9)
        first_ns = start_ns + int(settings.warmup_s * 1e9)
        pending: dict[int, list] = {}
        snapshots: dict[int, dict] = {}
        windows, records = [], []
        stable = False
        k = -1
        while True:
            boundary = first_ns + (k + 1) * window_ns
            gevent.sleep(max(0.0, (boundary - time.monotonic_ns()) / 1e9))
            if probe is not None:
                snapshots[k + 1] = probe()
            while len(pending.get(k, [])) < len(nodes):
                _, node, data = self._get("yts_window", settings.window_s * 5 + 60)
                part = ("window", self.index[node], data["k"], np.frombuffer(data["latencies"], dtype=np.float64),
                        data["errors"], data["cpu_s"], data["late"])
                pending.setdefault(data["k"], []).append(part)
            if k >= 0:
                window, lat, errors, cpus = merge_window(k, pending.pop(k), settings, first_ns, window_ns)
                windows.append(window)
                records.append((lat, errors, cpus))
                stable = is_stable(windows, settings.stability_count, settings.stability_threshold,
                                   settings.stability_latency)
                if stable or len(windows) >= settings.max_windows:
                    break
            else:
                pending.pop(k)
            k += 1
        if probe is not None:
            probe.close()
        self.runner.send_message("yts_stop", {})
        error_messages, done = [], {}
        for _ in nodes:
            _, node, data = self._get("yts_done", self.plan["wire"]["timeout_s"] + 30)
            done[self.index[node]] = data
            error_messages.extend(m for m in data["error_messages"] if m not in error_messages)
        master_cpu = (time.process_time() - cpu0) / max(1e-9, time.monotonic() - wall0)
        result = summarise(self.plan["wire"]["protocol"], self.plan["wire"]["model"], settings, windows, records,
                           stable, snapshots, error_messages[:5], remedy=f"add Locust workers (now {len(nodes)})")
        span_cpu = {w["id"]: w["client_cpu"] for w in result.engine["workers"]}
        result.engine = {
            "name": "locust", "version": locust.__version__, "user": self.plan["user"],
            "workers_expected": self.expect, "workers_reported": len(done),
            "workers": [{**{k: v for k, v in self.info[i].items() if k != "node"}, "users": per_worker[i],
                         "client_cpu": span_cpu.get(i, 0.0), "run_cpu": round(done[i]["cpu"], 4),
                         "completed": done[i]["completed"], "errors": done[i]["errors"]} for i in sorted(done)],
            "master": {"host": socket.gethostname(), "pid": os.getpid(), "cpu": round(master_cpu, 4)},
            "requests": {"completed": sum(d["completed"] for d in done.values()),
                         "errors": sum(d["errors"] for d in done.values()),
                         "unfinished": sum(d["in_flight"] for d in done.values())},
        }
        return result.to_dict()

    def quit(self) -> None:
        try:
            self.runner.quit()
        except BaseException:  # the workers hear it or miss the heartbeats; either way they go
            pass


def master_main(args) -> int:
    def announce(data: dict) -> None:
        sys.stdout.write(ANNOUNCE + json.dumps(data) + "\n")
        sys.stdout.flush()

    with open(args.plan, "rb") as handle:
        plan = pickle.load(handle)
    master = MasterSide(plan, args.expect_workers, args.bind, args.port, args.connect_timeout)

    def leave(*_):
        master.quit()
        os._exit(143)

    gevent.signal_handler(signal.SIGTERM, leave)
    gevent.signal_handler(signal.SIGINT, leave)
    try:
        result = master.run(announce)
        status = 0
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        status = 1
    with open(args.out, "w") as handle:
        json.dump(result, handle, default=float)
    master.quit()
    announce({"event": "done", "status": status})
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.load.locust_node")
    sub = parser.add_subparsers(dest="role", required=True)
    master = sub.add_parser("master")
    master.add_argument("--plan", required=True)
    master.add_argument("--out", required=True)
    master.add_argument("--expect-workers", type=int, required=True)
    master.add_argument("--bind", default="127.0.0.1")
    master.add_argument("--port", type=int, default=0)
    master.add_argument("--connect-timeout", type=float, default=60.0)
    worker = sub.add_parser("worker")
    worker.add_argument("--master", required=True, help="HOST[:PORT] of the master (port default 5557)")
    args = parser.parse_args(argv)
    return master_main(args) if args.role == "master" else worker_main(args.master)


def die_with_parent() -> None:
    """Started by harness.load.locust_engine (it names itself in PARENT_PID): no Locust process outlives the run,
    even a SIGKILLed one (PR_SET_PDEATHSIG); a parent already gone before the tie was made ends this one too."""
    from harness.load.locust_engine import PARENT_PID

    expected = os.environ.get(PARENT_PID)
    if expected is None:
        return
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != int(expected):
        os._exit(1)


if __name__ == "__main__":
    die_with_parent()
    sys.exit(main())
