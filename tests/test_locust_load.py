"""The Locust engine (harness.load.locust_engine, issue #24) against a real Triton: a master and two worker
processes count exactly what the server's statistics API counts; closed loop, constant and Poisson
arrivals; the result has the native generator's schema; errors are counted and named; a worker started
the way another machine starts one (`yts load --worker --master HOST:PORT`) joins; and no Locust process
outlives `yts load` stopped by Ctrl-C, SIGTERM or SIGKILL. Functional checks only: how Locust's numbers
compare with the native generator's is a measurement (benchmarks/results/README.md), never a timed test.
~60 s on 2 cores (each run starts three Python processes)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.load import ClientSpec, LoadSettings, payload_from_config, run_load
from harness.load.locust_engine import LocustRun, run_locust
from harness.load.null_model import write_null_model
from harness.load.payload import Payload
from harness.load.results import load_result, read_raw, write_raw
from harness.load.server_stats import StatisticsProbe, delta
from harness.repository.config import read_config
from harness.servers import ServerSettings, create_server
from harness.servers.base import free_port

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(window_s=0.5, warmup_s=0.3, max_windows=4)
pytestmark = pytest.mark.filterwarnings("ignore::harness.load.generator.ClientOverheadWarning")  # 2 shared cores
NODE = b"harness.load.locust_node"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repository = tmp_path_factory.mktemp("locust") / "models"
    write_null_model(repository)
    with create_server("process", ServerSettings(repository=repository)) as server:
        server.payload = payload_from_config(read_config(repository / "yts_null"))
        yield server


def _served(server, run):
    """(result, requests the server answered successfully during `run`)."""
    probe = StatisticsProbe(server.endpoints.grpc, "yts_null")
    try:
        before = probe()
        result = run(probe)
        after = probe()
    finally:
        probe.close()
    return result, delta(before, after, "yts_null")["success"][0]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_master_and_two_workers_count_what_the_server_counts(server, protocol):
    url = server.endpoints.grpc if protocol == "grpc" else server.endpoints.http
    spec = ClientSpec(protocol, url, server.payload)
    result, served = _served(server, lambda probe: run_locust(spec, LoadSettings(concurrency=4, **FAST), probe, workers=2))
    engine = result.engine
    assert engine["name"] == "locust" and engine["workers_expected"] == engine["workers_reported"] == 2
    assert result.errors == 0 and result.completed > 0, result.error_messages
    assert engine["requests"]["completed"] == served, (engine["requests"], served)
    assert engine["requests"]["errors"] == engine["requests"]["unfinished"] == 0
    assert sum(w["completed"] for w in engine["workers"]) == served
    assert [w["users"] for w in engine["workers"]] == [2, 2]
    assert all(w["client_cpu"] > 0 and w["pid"] > 0 for w in engine["workers"]), engine["workers"]
    assert result.settings["processes"] == 2 and 3 <= len(result.windows) <= 4
    lat = result.latency_ms
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert result.server_stats["start"] and result.server_stats["end"]  # the master's own probe


@pytest.mark.parametrize("mode", ["poisson", "constant"])
def test_open_loop_arrivals_follow_the_rate(server, mode):
    spec = ClientSpec("grpc", server.endpoints.grpc, server.payload)
    result, served = _served(server, lambda probe: run_locust(spec, LoadSettings(mode=mode, rate=100, **FAST), probe))
    assert result.errors == 0, result.error_messages
    assert 0.6 < result.throughput / 100 < 1.4, result.describe()
    assert result.settings["mode"] == mode and result.late_sends >= 0
    assert [w["users"] for w in result.engine["workers"]] == [1, 1]  # one arrival process per worker
    assert result.engine["requests"]["completed"] == served


def test_results_have_the_native_schema(server, tmp_path):
    spec = ClientSpec("grpc", server.endpoints.grpc, server.payload)
    settings = LoadSettings(concurrency=2, processes=2, **FAST)
    native, locust = run_load(spec, settings).to_dict(), run_locust(spec, settings, workers=2).to_dict()
    assert set(native) == set(locust)
    for key in ("settings", "latency_ms"):
        assert set(native[key]) == set(locust[key]), key
    assert set(native["windows"][0]) == set(locust["windows"][0])
    assert native["engine"]["name"] == "native" and locust["engine"]["name"] == "locust"
    for data in (native, locust):
        assert {"id", "client_cpu"} <= set(data["engine"]["workers"][0])
        again = load_result(read_raw(write_raw(tmp_path, data["engine"]["name"], data)))
        assert again.to_dict() == json.loads(json.dumps(data))
        assert len(again.latencies_ms) == again.completed


def test_errors_are_counted_and_named(server):
    wrong = Payload("no_such_model", server.payload.tensors)
    result = run_locust(ClientSpec("grpc", server.endpoints.grpc, wrong), LoadSettings(concurrency=2, **FAST))
    assert result.completed == 0 and result.errors > 0 and not result.stable
    assert any("no_such_model" in message for message in result.error_messages), result.error_messages
    assert result.engine["requests"]["errors"] >= result.errors


def test_a_worker_started_as_on_another_machine_joins(server):
    """`yts load --worker --master HOST:PORT` (here 127.0.0.1) is the second of two workers."""
    port = free_port()
    spec = ClientSpec("grpc", server.endpoints.grpc, server.payload)
    with LocustRun(spec, LoadSettings(concurrency=2, processes=2, **FAST), workers=1, remote_workers=1, port=port) as run:
        remote = subprocess.Popen([sys.executable, "-m", "harness.load.cli", "load", "--worker", "--master",
                                   f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            result = run.wait()
            assert remote.wait(timeout=30) == 0  # the master's quit ends the remote worker too
        finally:
            if remote.poll() is None:
                remote.kill()
    assert result.engine["workers_reported"] == 2 and result.errors == 0, result.engine
    assert remote.pid in {w["pid"] for w in result.engine["workers"]}  # exec'd: the worker is that process


def _locust_children(parent: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and NODE in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"])
def test_no_locust_process_outlives_yts_load(server, signum):
    command = [sys.executable, "-m", "harness.load.cli", "load", "--triton-url",
               f"{server.endpoints.http},{server.endpoints.grpc}", "--workers", "2", "--concurrency", "2",
               "--window", "1", "--max-windows", "60", "--stability-threshold", "0"]
    cli = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        nodes: set[int] = set()
        while len(nodes) < 3 and time.monotonic() < deadline and cli.poll() is None:
            nodes |= _locust_children(cli.pid)
            time.sleep(0.2)
        if len(nodes) < 3 and cli.poll() is not None:  # exited before its nodes were seen: say how, with what it printed
            pytest.fail(f"yts load exited ({cli.returncode}) with {len(nodes)} Locust nodes seen:\n"
                        f"{cli.stdout.read().decode(errors='replace')[-3000:]}")
        assert len(nodes) == 3, f"expected a master and two workers under yts load within 60 s; found {nodes}"
        time.sleep(2)  # under load
        cli.send_signal(signum)
        cli.wait(timeout=15)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in nodes) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in nodes if _alive(pid)], "Locust processes outlived yts load"
        if signum != signal.SIGKILL:
            assert cli.returncode == 130, cli.stdout.read().decode(errors="replace")
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.stdout.close()
