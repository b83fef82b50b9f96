"""`yts load`: measure one model under load with Locust's master and workers (or the native generator,
or both, alternating, for a comparison), and say how each load process fared.

    yts load --model yts_null --workers 2 --concurrency 8               # echo model, embedded server
    yts load --repo reference --model yolo_raw --engine both --repeat 2  # the reference CPU server
    yts load --triton-url HOST:8000,8001 --model M --workers 4 --remote-workers 8 --master-bind 0.0.0.0
    yts load --worker --master MASTER_HOST[:5557]                       # on each other load machine

The master runs here with `--workers` local worker processes; with `--remote-workers M` it also waits
for M workers started elsewhere with `--worker --master HOST` (they get the request and the server's
address from the master, so that address must be one they reach: pass --triton-url). The summary says
how many workers reported and each one's client CPU; `--out FILE` keeps every result (LoadResult JSON)
with the command line."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _payload(config, repository: Path | None):
    """The model's request, sized over its repository; the inputs the repository's yts.toml declares for it
    ([inputs.NAME]) hold the values of the image sent, as the suites send them."""
    from harness.load import payload_from_config
    from harness.repository.layouts import read_layout
    from harness.repository.manifest import load_manifest
    from harness.repository.sizing import Sizer, read_configs

    configs = {**(read_configs(repository) if repository else {}), config.name: config}
    layout = read_layout(config, load_manifest(repository).layout(config.name), config.name) if repository else None
    return payload_from_config(config, sizer=Sizer(configs, repository), layout=layout)


def _cpus(text: str) -> set[int]:
    cpus = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pin(server_pid: int, server_cpus: set[int], client_cpus: set[int]) -> int:
    """--pin: every thread of the server's process group (tritonserver and its Python backend stubs) on
    `server_cpus`, this process (and so every load process it starts) on `client_cpus`, so that on a
    small host the engines are compared on what they measure, not on the cores they take from the server."""
    threads = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != server_pid:
                continue
            for task in (entry / "task").iterdir():
                os.sched_setaffinity(int(task.name), server_cpus)
                threads += 1
        except (OSError, IndexError, ValueError):
            pass
    os.sched_setaffinity(0, client_cpus)
    return threads


class Target:
    """The server under load: one the user runs (--triton-url), or the embedded one on a scratch copy of
    --repo ("reference": the reference repository built for this machine), always with the echo model."""

    def __init__(self, args):
        self.server = None
        self.repository = None
        self._temporary = None
        if args.triton_url:
            http, _, grpc = args.triton_url.partition(",")
            host = http.rsplit(":", 1)[0]
            self.http, self.grpc = http, (grpc if ":" in grpc else f"{host}:{grpc}") if grpc else None
            if self.grpc is None:
                raise SystemExit("yts load: --triton-url needs HOST:HTTP_PORT,GRPC_PORT (statistics come over gRPC)")
            return
        from harness.load.null_model import write_null_model
        from harness.repository.scratch import scratch_copy
        from harness.servers import ServerSettings, create_server

        if args.repo:
            if args.repo == "reference":
                from harness.hostinfo import reference_device
                from harness.reference import build_reference_repository

                source = build_reference_repository(reference_device("auto")[0])
            else:
                source = Path(args.repo)
            self.repository = scratch_copy(source)
        else:
            import tempfile

            self._temporary = tempfile.TemporaryDirectory(prefix="yts-load-")
            self.repository = Path(self._temporary.name)
        write_null_model(self.repository)
        models = tuple(dict.fromkeys((args.model, "yts_null")))
        self.server = create_server("process", ServerSettings(repository=self.repository, load_models=models,
                                                              startup_timeout=args.startup_timeout)).start()
        self.http, self.grpc = self.server.endpoints.http, self.server.endpoints.grpc
        if args.pin:
            server_cpus, _, client_cpus = args.pin.partition(":")
            threads = pin(self.server.process.pid, _cpus(server_cpus), _cpus(client_cpus))
            print(f"[yts load] pinned: server ({threads} threads) on CPUs {server_cpus}, load processes on {client_cpus}")

    def config(self, model: str):
        if self.repository is not None:
            from harness.checks.model import completed_config

            return completed_config(self.repository / model)
        import tritonclient.http as httpclient

        from harness.repository.config import from_json

        client = httpclient.InferenceServerClient(self.http)
        try:
            return from_json(client.get_model_config(model))
        finally:
            client.close()

    def stop(self):
        if self.server is not None:
            self.server.stop()
        if self._temporary is not None:
            self._temporary.cleanup()


def settings_from(args, processes: int):
    from harness.load import LoadSettings

    return LoadSettings(mode=args.mode, concurrency=args.concurrency, rate=args.rate, window_s=args.window,
                        warmup_s=args.warmup, max_windows=args.max_windows, processes=processes,
                        stability_threshold=args.stability_threshold)


def measure(args, target: Target, spec, engine: str):
    from harness.load import run_load
    from harness.load.locust_engine import run_locust
    from harness.load.server_stats import StatisticsProbe

    probe = StatisticsProbe(target.grpc, spec.payload.model)
    try:
        if engine == "native":
            processes = args.native_processes or args.workers
            if args.mode == "concurrency":
                processes = min(processes, args.concurrency)
            return run_load(spec, settings_from(args, processes), probe)
        return run_locust(spec, settings_from(args, args.workers + args.remote_workers), probe, workers=args.workers,
                          remote_workers=args.remote_workers, bind=args.master_bind, port=args.master_port,
                          connect_timeout_s=args.connect_timeout)
    finally:
        probe.close()


def _row(result) -> dict:
    from harness.load.server_stats import split

    server = result.server_stats
    return {"engine": result.engine.get("name"), "throughput": round(result.throughput, 2),
            "p50_ms": round(result.latency_ms["p50"], 3), "p99_ms": round(result.latency_ms["p99"], 3),
            "client_cpu": round(result.client_cpu, 3),
            "workers_cpu": [w["client_cpu"] for w in result.engine.get("workers", [])],
            "errors": result.errors, "stable": result.stable,
            "server_requests": split(server["start"], server["end"], result.model)["requests"] if server.get("end") else None}


def compare(results) -> dict:
    """Locust over native, per round (the rounds alternate native, Locust, so each pair shares the host's
    weather) and the median over rounds; the best of each engine too. A shared host drifts: read the
    per-round ratios, not only the best."""
    import statistics

    native = [r for r in results if r.engine.get("name") == "native"]
    locust = [r for r in results if r.engine.get("name") == "locust"]
    if not native or not locust:
        return {}

    def ratios(a, b) -> dict:
        return {"throughput": round(b.throughput / a.throughput, 4) if a.throughput else None,
                "p50": round(b.latency_ms["p50"] / a.latency_ms["p50"], 4) if a.latency_ms["p50"] else None,
                "p99": round(b.latency_ms["p99"] / a.latency_ms["p99"], 4) if a.latency_ms["p99"] else None}

    rounds = [ratios(a, b) for a, b in zip(native, locust)]
    median = {key: round(statistics.median(r[key] for r in rounds if r[key] is not None), 4) for key in rounds[0]}
    best = ratios(max(native, key=lambda r: r.throughput), max(locust, key=lambda r: r.throughput))
    return {"rounds": rounds, "median": median, "best_of_each": best}


def run(args) -> int:
    if args.worker:
        if not args.master:
            print("yts load --worker needs --master HOST[:PORT]", file=sys.stderr)
            return 2
        from harness.load.locust_engine import worker_command

        command = worker_command(args.master)
        os.execv(command[0], command)  # this process becomes the worker: Ctrl-C and SIGTERM reach it directly
    from harness.load import ClientSpec
    from harness.load.locust_engine import describe_engine
    from harness.repository.manifest import ManifestError

    previous = signal.signal(signal.SIGTERM, _interrupt)
    target = None
    results = []
    try:
        target = Target(args)
        config = target.config(args.model)
        payload = _payload(config, target.repository)
        url = target.grpc if args.protocol == "grpc" else target.http
        spec = ClientSpec(args.protocol, url, payload)
        engines = ["native", "locust"] if args.engine == "both" else [args.engine]
        for repeat in range(args.repeat):
            for engine in engines:
                result = measure(args, target, spec, engine)
                results.append(result)
                print(f"[yts load] {engine}{f' (round {repeat + 1})' if args.repeat > 1 else ''}: {result.describe()}")
                print("  " + describe_engine(result).replace("\n", "\n  "))
                for warning in result.warnings:
                    print(f"  warning: {warning}")
                if result.error_messages:
                    print("  errors: " + "; ".join(result.error_messages))
        comparison = compare(results)
        if comparison:
            for i, r in enumerate(comparison["rounds"], 1):
                print(f"[yts load] round {i} locust / native: throughput {r['throughput']:.3f}, p50 {r['p50']:.3f}, "
                      f"p99 {r['p99']:.3f}")
            m = comparison["median"]
            print(f"[yts load] median over rounds: throughput {m['throughput']:.3f}, p50 {m['p50']:.3f}, p99 {m['p99']:.3f}")
        if args.out:
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({
                "command": "yts " + shlex.join(args.argv if args.argv is not None else sys.argv[1:]), "datetime": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "loadavg_after": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
                "summary": [_row(r) for r in results], "comparison": comparison,
                "results": [r.to_dict() for r in results]}, indent=1, default=float))
            print(f"[yts load] results: {out}")
        return 0 if all(r.errors == 0 for r in results) else 1
    except ManifestError as error:
        print(f"[yts load] {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[yts load] interrupted: load processes and server stopped", file=sys.stderr)
        return 130
    finally:
        if target is not None:
            target.stop()
        signal.signal(signal.SIGTERM, previous)


def register(subparsers) -> None:
    parser = subparsers.add_parser("load", help="measure a model under load: Locust master + workers (or the native "
                                                "generator, or both), the native generator's windows and percentiles",
                                   description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    where = parser.add_argument_group("server (default: the embedded server with the echo model yts_null)")
    where.add_argument("--triton-url", default=None, metavar="HOST:HTTP,GRPC", help="a running server")
    where.add_argument("--repo", default=None, help="repository to serve on the embedded server (scratch copy); "
                                                    "'reference': the reference repository built for this machine")
    where.add_argument("--model", default="yts_null", help="model to load (default: the echo model yts_null)")
    where.add_argument("--protocol", default="grpc", choices=("grpc", "http", "null"),
                       help="null: no request at all, the engine's own ceiling")
    where.add_argument("--startup-timeout", type=float, default=180.0)
    where.add_argument("--pin", default=None, metavar="SERVER_CPUS:CLIENT_CPUS",
                       help="embedded server only: pin the server's threads and the load processes to separate CPUs, "
                            "e.g. 0:1 (Linux)")
    engine = parser.add_argument_group("engine")
    engine.add_argument("--engine", default="locust", choices=("locust", "native", "both"),
                        help="both: native then Locust at the same settings, --repeat times, and their ratios")
    engine.add_argument("--workers", type=int, default=2, help="local Locust worker processes (default 2)")
    engine.add_argument("--remote-workers", type=int, default=0,
                        help="Locust workers the master also waits for, started elsewhere with --worker --master HOST")
    engine.add_argument("--master-bind", default="127.0.0.1",
                        help="interface the master listens on (0.0.0.0 for workers on other machines)")
    engine.add_argument("--master-port", type=int, default=0, help="default: any free port; 5557 with --remote-workers")
    engine.add_argument("--connect-timeout", type=float, default=60.0, help="seconds to wait for every worker")
    engine.add_argument("--native-processes", type=int, default=None, help="native generator processes (default: --workers)")
    engine.add_argument("--repeat", type=int, default=1, help="rounds (with --engine both: native, locust, native, ...)")
    engine.add_argument("--worker", action="store_true", help="be a Locust worker of the master at --master")
    engine.add_argument("--master", default=None, metavar="HOST[:PORT]", help="with --worker: the master (port 5557)")
    load = parser.add_argument_group("load (the native generator's settings)")
    load.add_argument("--mode", default="concurrency", choices=("concurrency", "poisson", "constant"))
    load.add_argument("--concurrency", type=int, default=8, help="closed loop: requests always outstanding (users)")
    load.add_argument("--rate", type=float, default=0.0, help="open loop: arrivals per second over all workers")
    load.add_argument("--window", type=float, default=2.0, help="measurement window, seconds")
    load.add_argument("--warmup", type=float, default=1.0)
    load.add_argument("--max-windows", type=int, default=6)
    load.add_argument("--stability-threshold", type=float, default=0.10)
    parser.add_argument("--out", default=None, help="write every result and the comparison here (JSON)")
    parser.set_defaults(func=run, argv=None)


def main(argv=None) -> int:
    """`python -m harness.load.cli ...`, until harness/cli.py lists this module."""
    import argparse

    parser = argparse.ArgumentParser(prog="yts")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = argv
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
