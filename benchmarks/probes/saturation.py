"""yolo_e2e's saturated throughput measured by a client other than the suite's, so the batching suite's
figure can be checked in the same call (issue 31: `pytest suites --benchmark-only`'s saturated throughput
within 10 % of this). Independent where it matters: tritonclient's own asyncio gRPC client (InferInput,
`infer`: a request built per call, every reply parsed), in processes and coroutines of its own, counted by
the client and, over the same window, by Triton's statistics (successful requests); nothing of harness.load
measures here. What it shares with the suite is what must be the same to compare: the served deployment
(the reference build for this host, harness.reference, started by harness.servers) and the request
(harness.load.payload's JPEG for yolo_e2e's BYTES input).

With --suite-json (pytest-benchmark's JSON of the batching suite) it measures at the concurrency where
the suite's sweep found its best throughput and at twice that, and writes the comparison: the suite's
saturated throughput over this client's at the same concurrency (`ratio`, `within_10_percent`), and what
doubling the concurrency still adds (the suite calls it saturated when that is under 5 %, unless its
latency budget stopped it first). Exit 1 when the two disagree by more than 10 %. Without it, the
concurrencies given. Starts its own server (--repo, default the reference build) unless --url names one;
another model with --model; runs on CPU too (tests/test_probes.py, on fixtures/batching/batched).

    python -m benchmarks.probes.saturation --out OUT.json --suite-json benchmark.json
    python -m benchmarks.probes.saturation --out OUT.json --concurrency 64,128,256 [--url 127.0.0.1:8001]"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.probes.card import int_list, probe_arguments, write_record

MODEL = "yolo_e2e"
AGREEMENT = 0.10  # issue 31's acceptance: the suite's saturated throughput within 10 % of this probe's


def suite_capacity(path: Path, model: str) -> dict | None:
    """What the batching suite's concurrency sweep found for `model` in pytest-benchmark's JSON
    (test_concurrency_sweep's extra_info: `capacity` and the `sweep` points), or None when it holds none."""
    for entry in json.loads(Path(path).read_text()).get("benchmarks", []):
        info = entry.get("extra_info") or {}
        if info.get("model") == model and "capacity" in info and info.get("sweep"):
            best = max(info["sweep"], key=lambda p: p["throughput"])
            found = info["capacity"]
            return {"test": entry.get("name"), "saturated_throughput": found["saturated_throughput"],
                    "best_concurrency": best["concurrency"], "best_processes": best.get("processes"),
                    "saturating_concurrency": found.get("saturating_concurrency"), "knee": found.get("knee"),
                    "stopped": found.get("stopped"), "budget_ms": found.get("budget_ms")}
    return None


def compare(suite: dict, points: list[dict]) -> dict:
    """The suite's saturated throughput against this probe's at the same concurrency, and what twice the
    concurrency gives this probe."""
    same = next(p for p in points if p["concurrency"] == suite["best_concurrency"])
    ratio = suite["saturated_throughput"] / same["throughput"] if same["throughput"] else float("inf")
    more = [p for p in points if p["concurrency"] > same["concurrency"]]
    gain = max(p["throughput"] for p in more) / same["throughput"] - 1 if more and same["throughput"] else None
    return {"concurrency": same["concurrency"], "suite_throughput": suite["saturated_throughput"],
            "probe_throughput": same["throughput"], "ratio": round(ratio, 3), "within_10_percent": abs(ratio - 1) <= AGREEMENT,
            "probe_gain_at_more_concurrency": None if gain is None else round(gain, 3)}


def _request(payload):
    import tritonclient.grpc.aio as grpcclient

    inputs = []
    for tensor in payload.tensors:
        infer_input = grpcclient.InferInput(tensor.name, tensor.shape, tensor.datatype)
        infer_input.set_data_from_numpy(tensor.array)
        inputs.append(infer_input)
    return inputs


async def _closed_loop(url: str, payload, users: int, warmup_s: float, seconds: float, barrier) -> dict:
    """`users` coroutines, each sending the next request when its last is answered; latencies of the
    requests answered inside [start + warmup, start + warmup + seconds]."""
    import tritonclient.grpc.aio as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(url)
    inputs = _request(payload)
    await client.infer(payload.model, inputs)  # connected and answering before the clock starts
    barrier.wait()
    start, cpu_start = time.monotonic(), time.process_time()
    begin, end = start + warmup_s, start + warmup_s + seconds
    latencies, errors, first_error = [], 0, None

    async def user():
        nonlocal errors, first_error
        while (sent := time.monotonic()) < end:
            try:
                await client.infer(payload.model, inputs)
            except InferenceServerException as error:
                errors += 1
                first_error = first_error or str(error)
                continue
            answered = time.monotonic()
            if begin <= answered <= end:
                latencies.append((answered - sent) * 1e3)

    await asyncio.gather(*(user() for _ in range(users)))
    cpu = (time.process_time() - cpu_start) / (time.monotonic() - start)
    await client.close()
    return {"latencies_ms": latencies, "errors": errors, "first_error": first_error, "cpu": cpu}


def _client_process(url, payload, users, warmup_s, seconds, barrier, results) -> None:
    try:
        results.put(asyncio.run(_closed_loop(url, payload, users, warmup_s, seconds, barrier)))
    except BaseException as error:  # noqa: BLE001 -- the parent reports it; a silent death would hang the barrier
        barrier.abort()
        results.put({"failed": f"{type(error).__name__}: {error}"})


def _server_successes(url: str, model: str) -> int:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    try:
        stats = client.get_inference_statistics(model, as_json=True)["model_stats"]
    finally:
        client.close()
    return sum(int(s.get("inference_stats", {}).get("success", {}).get("count", 0)) for s in stats)


def measure(url: str, payload, concurrency: int, processes: int, warmup_s: float, seconds: float) -> dict:
    """One closed-loop point: `concurrency` requests in flight from `processes` processes."""
    processes = max(1, min(processes, concurrency))
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(processes + 1), spawn.Queue()
    users = [concurrency // processes + (index < concurrency % processes) for index in range(processes)]
    workers = [spawn.Process(target=_client_process, args=(url, payload, n, warmup_s, seconds, barrier, results))
               for n in users]
    try:
        for worker in workers:
            worker.start()
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            try:
                reason = results.get(timeout=10).get("failed")
            except queue.Empty:
                reason = "not ready within 120 s"
            raise RuntimeError(f"a client process failed before the start: {reason}") from None
        time.sleep(warmup_s)
        before = _server_successes(url, payload.model)
        time.sleep(seconds)
        after = _server_successes(url, payload.model)
        done = [results.get(timeout=120 + seconds) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()
    failed = [d["failed"] for d in done if "failed" in d]
    if failed:
        raise RuntimeError(f"a client process failed: {failed[0]}")
    latencies = np.concatenate([np.asarray(d["latencies_ms"], dtype=np.float64) for d in done])
    point = {"concurrency": concurrency, "processes": processes, "seconds": seconds,
             "completed": int(latencies.size), "throughput": round(latencies.size / seconds, 2),
             "server_successes": after - before, "server_throughput": round((after - before) / seconds, 2),
             "errors": sum(d["errors"] for d in done), "first_error": next((d["first_error"] for d in done if d["first_error"]), None),
             "busiest_client_cpu": round(max(d["cpu"] for d in done), 3)}
    if latencies.size:
        point["latency_ms"] = {f"p{q}": round(float(np.percentile(latencies, q)), 3) for q in (50, 95, 99)}
    print(f"  {payload.model} c{concurrency} ({processes} processes): {point['throughput']} infer/s "
          f"(Triton counted {point['server_throughput']}), p99 {point.get('latency_ms', {}).get('p99')} ms", flush=True)
    return point


@contextlib.contextmanager
def served(model: str, repo: Path | None, device: str, startup_timeout: float, log_dir: Path | None):
    """A scratch copy of `repo` (default: the reference build for `device`, as the suites build it), a
    process server loading `model` only: yields its gRPC address and the model's payload; stopped on the
    way out."""
    from harness.hostinfo import has_gpu, reference_device
    from harness.load.payload import payload_from_config
    from harness.reference import build_reference_repository
    from harness.repository.config import read_config
    from harness.repository.scratch import scratch_copy
    from harness.servers.base import ServerSettings
    from harness.servers.process import ProcessServer

    repository = scratch_copy(repo or build_reference_repository(reference_device(device)[0]))
    server = ProcessServer(ServerSettings(repository=repository, load_models=(model,), startup_timeout=startup_timeout,
                                          gpus=has_gpu(), log_dir=log_dir))
    try:
        server.start()
        yield server.endpoints.grpc, payload_from_config(read_config(repository / model))
    finally:
        server.stop()


def _served_payload(url: str, model: str):
    """The model's request, from the config a running server reports."""
    import tritonclient.grpc as grpcclient

    from harness.load.payload import payload_from_config

    client = grpcclient.InferenceServerClient(url)
    try:
        return payload_from_config(client.get_model_config(model).config)
    finally:
        client.close()



def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--suite-json", type=Path, help="pytest-benchmark JSON of the batching suite: measure where its "
                        "sweep found its best throughput and at twice that, and compare")
    parser.add_argument("--concurrency", type=int_list, default=[64, 128, 256], help="without --suite-json")
    parser.add_argument("--processes", type=int, default=0,
                        help="client processes a point (0: concurrency / 16, at most half this host's cores, up to 8)")
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window of each point")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--url", help="gRPC HOST:PORT of a server already serving the model (default: start one)")
    parser.add_argument("--repo", type=Path, help="the repository to serve (default: the reference build)")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto", help="which reference build to serve")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--log-dir", type=Path, help="where the server's log goes")
    return parser.parse_args(argv)


def processes_for(concurrency: int, requested: int = 0) -> int:
    return requested or max(1, min(8, (os.cpu_count() or 2) // 2, concurrency // 16))


def run(args: argparse.Namespace) -> dict:
    suite = suite_capacity(args.suite_json, args.model) if args.suite_json else None
    if args.suite_json and suite is None:
        raise SystemExit(f"{args.suite_json}: no concurrency sweep of {args.model} in it (did test_concurrency_sweep run?)")
    levels = [suite["best_concurrency"], 2 * suite["best_concurrency"]] if suite else args.concurrency
    with contextlib.ExitStack() as stack:
        if args.url:
            url, payload = args.url, _served_payload(args.url, args.model)
        else:
            url, payload = stack.enter_context(served(args.model, args.repo, args.device, args.startup_timeout, args.log_dir))
        points = [measure(url, payload, c, processes_for(c, args.processes), args.warmup_s, args.seconds) for c in levels]
    best = max(points, key=lambda p: p["throughput"])
    result: dict = {"model": args.model, "client": "tritonclient.grpc.aio, closed loop", "request_bytes": payload.nbytes,
                    "points": points, "best": {"concurrency": best["concurrency"], "throughput": best["throughput"]}}
    if suite:
        result["suite"] = suite
        result["comparison"] = compare(suite, points)
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    result = run(args)
    write_record(args.out, "saturation", args, result)
    comparison = result.get("comparison")
    if comparison:
        print(f"[saturation] {args.model} at concurrency {comparison['concurrency']}: the suite {comparison['suite_throughput']:.1f}"
              f" infer/s, this probe {comparison['probe_throughput']:.1f}: ratio {comparison['ratio']:.3f} "
              f"({'within' if comparison['within_10_percent'] else 'NOT within'} 10 %)", flush=True)
        return 0 if comparison["within_10_percent"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
