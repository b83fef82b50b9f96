"""A real Triton, started each way the harness offers, serves a dynamically batched Python model over
HTTP and gRPC with the right numbers; a broken config fails with Triton's own load error."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from harness.repository.config import read_config, write_config
from harness.servers import ServerSettings, ServerStartError, create_server, docker_available
from tests.conftest import write_scale_add

KINDS = [
    pytest.param("process", id="process"),
    pytest.param("container", id="container", marks=[
        pytest.mark.container,
        pytest.mark.skipif(not docker_available(), reason="no Docker daemon answers"),
    ]),
]


@pytest.fixture(scope="module", params=KINDS)
def server(request, tiny_repository):
    with create_server(request.param, ServerSettings(repository=tiny_repository, startup_timeout=120)) as server:
        yield server


def _http_infer(server, x):
    client = httpclient.InferenceServerClient(server.endpoints.http)
    tensor = httpclient.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    result = client.infer("scale_add", [tensor])
    return result.as_numpy("Y"), result.as_numpy("BATCH")


def _grpc_infer(server, x):
    client = grpcclient.InferenceServerClient(server.endpoints.grpc)
    tensor = grpcclient.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("scale_add", [tensor])
    return result.as_numpy("Y"), result.as_numpy("BATCH")


@pytest.mark.parametrize("infer", [_http_infer, _grpc_infer], ids=["http", "grpc"])
def test_inference_is_numerically_right(server, infer):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    y, _ = infer(server, x)
    np.testing.assert_allclose(y, 2 * x + 1, rtol=0, atol=0)


def test_ports_bound_to_loopback(server):
    for endpoint in (server.endpoints.http, server.endpoints.grpc, server.endpoints.metrics):
        assert endpoint.startswith("127.0.0.1:"), endpoint


def test_dynamic_batching_merges_concurrent_requests(server):
    """16 one-row requests at once with a 20 ms queue delay: execute() must see batches > 1."""
    x = np.ones((1, 4), dtype=np.float32)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        batches = [int(b[0, 0]) for _, b in pool.map(lambda _: _grpc_infer(server, x), range(16))]
    assert max(batches) > 1, f"every request executed alone: batch sizes {batches}"
    stats = grpcclient.InferenceServerClient(server.endpoints.grpc).get_inference_statistics("scale_add", as_json=True)
    model = stats["model_stats"][0]
    assert int(model["inference_count"]) > int(model["execution_count"])


def _invalid_output_dtype(repository):
    model_dir = write_scale_add(repository, name="broken")
    config = read_config(model_dir)
    config.output[0].data_type = 0  # TYPE_INVALID: Triton's own config validation rejects it
    write_config(model_dir, config)


def _missing_model_file(repository):
    write_scale_add(repository, name="broken", default_model_filename="missing.py")


@pytest.mark.parametrize("breakage, reason", [
    (_invalid_output_dtype, "must specify 'data_type'"),
    (_missing_model_file, "missing.py"),  # Triton 2.51 hangs here: caught from its log
])
def test_broken_config_reports_tritons_load_error(tmp_path, breakage, reason):
    repository = tmp_path / "models"
    breakage(repository)
    with pytest.raises(ServerStartError) as failure:
        create_server("process", ServerSettings(repository=repository, startup_timeout=60)).start()
    message = str(failure.value)
    assert "broken" in message and reason in message, message
    assert "did not become live" not in message  # Triton's reason, not a timeout


def test_explicit_loads_side_by_side_and_a_refused_one_named(tmp_path):
    """wait.load: every model READY after it returns; a load Triton refuses raises at once with Triton's reason."""
    from harness.servers import wait

    repository = tmp_path / "models"
    write_scale_add(repository)
    write_scale_add(repository, name="scale_add_2")
    _invalid_output_dtype(repository)
    settings = ServerSettings(repository=repository, model_control="explicit", load_models=(), startup_timeout=60)
    with create_server("process", settings) as server:
        wait.load(server, ["scale_add", "scale_add_2"], timeout=60)
        index = wait.repository_index(server.endpoints.http_url)
        assert {e["name"] for e in index if e.get("state") == "READY"} == {"scale_add", "scale_add_2"}, index
        with pytest.raises(RuntimeError, match=r"Loading 'broken' failed: .*must specify 'data_type'"):
            wait.load(server, ["broken"], timeout=60)


def test_a_port_taken_before_triton_binds_it_is_not_answered_by_another_server(tiny_repository, monkeypatch):
    """The ports are chosen free, then Triton binds them seconds later; meanwhile another process can take one.
    Another Triton there answers the health checks for ours, which then exits "already in use": the harness
    must not take that answer for its own server, and relaunches on fresh ports."""
    import harness.servers.process as process_launcher

    settings = ServerSettings(repository=tiny_repository, startup_timeout=60)
    with create_server("process", settings) as other:
        taken = iter([int(other.endpoints.http.rsplit(":", 1)[1])])
        choose = process_launcher.free_port
        monkeypatch.setattr(process_launcher, "free_port", lambda: next(taken, None) or choose())
        with create_server("process", settings) as server:
            assert server.endpoints.http != other.endpoints.http
            assert server.alive() and server.bound()
            assert f"Started HTTPService at {server.endpoints.http}" in server.log_tail(400)
            client = httpclient.InferenceServerClient(server.endpoints.http)
            assert client.is_server_ready() and client.get_server_metadata()["name"] == "triton"


@pytest.mark.parametrize("kind", KINDS)
def test_environment_reaches_the_server_process(tiny_repository, kind):
    """ServerSettings.environment (the lifecycle suite bounds glibc's malloc arenas with it) is in the
    environment tritonserver runs with, beside what the launcher sets itself."""
    settings = ServerSettings(repository=tiny_repository, environment={"MALLOC_ARENA_MAX": "2"})
    with create_server(kind, settings) as server:
        if kind == "process":
            entries = Path(f"/proc/{server.process.pid}/environ").read_text().split("\0")
        else:
            entries = server.container.get_wrapped_container().attrs["Config"]["Env"]
    environ = dict(entry.split("=", 1) for entry in entries if "=" in entry)
    assert environ["MALLOC_ARENA_MAX"] == "2" and "LD_LIBRARY_PATH" in environ
