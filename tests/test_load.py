"""The load generator against a real Triton (the tiny scale_add model and the echo model): both
protocols, both loop kinds, worker processes, errors, windows and the stability rule, the server-side
split, the latency-bounded search, raw results that read back, and wrk posting the same bytes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from harness.load import ClientSpec, LoadSettings, payload_from_config, run_load, search_latency_bound
from harness.load.generator import LoadResult
from harness.load.null_model import write_null_model
from harness.load.payload import Payload
from harness.load.results import load_result, read_raw, write_raw
from harness.load.server_stats import StatisticsProbe, split
from harness.load.stats import WindowStats, is_stable
from harness.load.wrk import request_body, run_wrk
from harness.repository.config import read_config
from harness.servers import ServerSettings, create_server
from tests.conftest import write_scale_add

FAST = dict(window_s=0.5, warmup_s=0.3, max_windows=4)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repository = tmp_path_factory.mktemp("load") / "models"
    write_scale_add(repository)
    write_null_model(repository)
    with create_server("process", ServerSettings(repository=repository)) as server:
        server.payload = payload_from_config(read_config(repository / "scale_add"))
        yield server


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_closed_loop_measures_and_splits_server_time(server, protocol):
    url = server.endpoints.grpc if protocol == "grpc" else server.endpoints.http
    probe = StatisticsProbe(server.endpoints.grpc, "scale_add")
    result = run_load(ClientSpec(protocol, url, server.payload), LoadSettings(concurrency=4, **FAST), probe)
    assert result.errors == 0 and result.completed > 0, result.error_messages
    assert 3 <= len(result.windows) <= 4
    lat = result.latency_ms
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    server_side = split(result.server_stats["start"], result.server_stats["end"], "scale_add")
    assert server_side["requests"] > 0 and server_side["compute_infer_ms"] > 0
    # the server counted about as many requests as the client completed in the same span
    assert 0.5 < server_side["requests"] / result.completed < 2.0, (server_side, result.completed)


def test_open_loop_poisson_follows_the_rate(server):
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, server.payload),
                      LoadSettings(mode="poisson", rate=100, **FAST))
    assert result.errors == 0
    assert 0.6 < result.throughput / 100 < 1.4, result.describe()
    assert result.late_sends >= 0 and result.settings["mode"] == "poisson"


def test_constant_rate_over_two_processes(server):
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, server.payload),
                      LoadSettings(mode="constant", rate=80, processes=2, **FAST))
    assert result.errors == 0
    assert 0.6 < result.throughput / 80 < 1.4, result.describe()


def test_closed_loop_over_two_processes(server):
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, server.payload),
                      LoadSettings(concurrency=4, processes=2, **FAST))
    assert result.errors == 0 and result.completed > 0


def test_errors_are_counted_and_named(server):
    wrong = Payload("no_such_model", server.payload.tensors)
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, wrong), LoadSettings(concurrency=2, **FAST))
    assert result.completed == 0 and result.errors > 0
    assert any("no_such_model" in message for message in result.error_messages), result.error_messages
    assert not result.stable


def test_null_client_measures_the_engine_ceiling():
    result = run_load(ClientSpec("null", ""), LoadSettings(concurrency=4, **FAST))
    assert result.errors == 0 and result.throughput > 1000, result.describe()


def test_echo_model_outruns_scale_add(server):
    """scale_add waits up to 20 ms to fill a batch; the echo model never waits."""
    echo = payload_from_config(read_config(server.settings.repository / "yts_null"))
    spec = lambda payload: ClientSpec("grpc", server.endpoints.grpc, payload)  # noqa: E731
    fast = run_load(spec(echo), LoadSettings(concurrency=1, **FAST))
    slow = run_load(spec(server.payload), LoadSettings(concurrency=1, **FAST))
    assert fast.throughput > slow.throughput, (fast.describe(), slow.describe())


def test_latency_bounded_search(server):
    spec = ClientSpec("grpc", server.endpoints.grpc, server.payload)
    best, tried = search_latency_bound(spec, LoadSettings(**FAST), bound_ms=10_000, max_concurrency=4)
    assert [r.settings["concurrency"] for r in tried] == [1, 2, 4]
    assert best is max(tried, key=lambda r: r.throughput)
    none, tried = search_latency_bound(spec, LoadSettings(**FAST), bound_ms=0.001, max_concurrency=4)
    assert none is None and [r.settings["concurrency"] for r in tried] == [1]


def test_raw_results_read_back(server, tmp_path):
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, server.payload), LoadSettings(concurrency=2, **FAST))
    again = load_result(read_raw(write_raw(tmp_path, "run", result.to_dict())))
    assert isinstance(again, LoadResult) and again.to_dict() == json.loads(json.dumps(result.to_dict()))


def test_wrk_body_is_tritonclients_binary_tensor_body(server):
    body, header_length = request_body(server.payload)
    header = json.loads(body[:header_length])
    assert header["inputs"][0]["parameters"]["binary_data_size"] == server.payload.tensors[0].array.nbytes
    assert len(body) == header_length + server.payload.tensors[0].array.nbytes


# wrk is optional (the README says what it adds); .ci/run installs it, so CI runs this.
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)")
def test_wrk_posts_the_binary_tensor_body(server):
    result = run_wrk(server.endpoints.http, server.payload, connections=2, duration_s=1)
    assert result.errors == 0 and result.requests > 0, result


def _window(i, throughput, latency):
    return WindowStats(i, float(i), 1.0, int(throughput), 0, throughput, {"avg": latency}, 0.1)


def test_stability_rule_is_perf_analyzers():
    """Last three windows, max/min ≤ 1.1 for throughput and latency; a zero window is never stable."""
    assert is_stable([_window(0, 50, 9), _window(1, 100, 10), _window(2, 105, 10.5), _window(3, 109, 10.9)])
    assert not is_stable([_window(0, 100, 10), _window(1, 100, 10)])
    assert not is_stable([_window(0, 100, 10), _window(1, 112, 10), _window(2, 100, 10)])
    assert not is_stable([_window(0, 100, 10), _window(1, 100, 11.5), _window(2, 100, 10)])
    assert not is_stable([_window(0, 0, np.nan), _window(1, 0, np.nan), _window(2, 0, np.nan)])


def test_settings_reject_nonsense():
    with pytest.raises(ValueError, match="rate"):
        LoadSettings(mode="poisson")
    with pytest.raises(ValueError, match="processes"):
        LoadSettings(concurrency=1, processes=2)


@pytest.mark.parametrize("kind", ["tensor", "bytes"])
def test_grpc_request_is_what_tritonclient_sends(server, kind):
    """The load client serialises its ModelInferRequest once from public protobufs; it must be the
    request tritonclient.grpc builds for the same inputs."""
    import tritonclient.grpc as grpcclient
    from tritonclient.grpc._utils import _get_inference_request

    from harness.load.clients import infer_request
    from harness.load.payload import Tensor, encoded_image

    payload = server.payload if kind == "tensor" else Payload("yolo_e2e", (
        Tensor("images", "BYTES", np.array([[encoded_image()], [encoded_image(seed=1)]], dtype=np.object_)),))
    inputs = []
    for tensor in payload.tensors:
        inputs.append(grpcclient.InferInput(tensor.name, tensor.shape, tensor.datatype))
        inputs[-1].set_data_from_numpy(tensor.array)
    theirs = _get_inference_request(payload.model, inputs, "", "", None, 0, False, False, 0, None, None)
    assert infer_request(payload) == theirs


def test_shared_memory_transport_sends_no_tensor_bytes(server):
    """perf_analyzer's --shared-memory system: each load process registers its region, requests carry none
    of the tensor bytes (Triton would refuse an input with neither), and every region is gone afterwards."""
    from pathlib import Path

    from harness.load.clients import infer_request

    body = infer_request(server.payload, region="somewhere")
    assert not body.raw_input_contents and body.inputs[0].parameters["shared_memory_region"].string_param == "somewhere"
    probe = StatisticsProbe(server.endpoints.grpc, "scale_add")
    result = run_load(ClientSpec("grpc", server.endpoints.grpc, server.payload, shared_memory=True),
                      LoadSettings(concurrency=4, processes=2, **FAST), probe)
    assert result.errors == 0 and result.completed > 0, result.error_messages
    assert split(result.server_stats["start"], result.server_stats["end"], "scale_add")["requests"] > 0
    assert not list(Path("/dev/shm").glob("yts-load-*"))
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.endpoints.grpc)
    assert not client.get_system_shared_memory_status(as_json=True).get("regions"), "a region is still registered"
    client.close()
