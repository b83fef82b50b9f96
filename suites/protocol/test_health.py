"""Health and metadata are what load balancers and clients act on: live/ready on both protocols,
server and model metadata that agree with each other and with the config, readiness per version,
and responses that carry the datatypes the metadata promises."""

from __future__ import annotations

import numpy as np
import pytest
import requests
import tritonclient.grpc as grpcclient

from harness.protocol.models import RequestTooLarge
from harness.protocol.queue_policy import queue_rejection
from harness.protocol.wire import send
from harness.verdicts import not_applicable

REQUIRED_EXTENSIONS = ("binary_tensor_data", "parameters", "statistics", "model_configuration")


def _get(server, path):
    return requests.get(f"http://{server.endpoints.http}{path}", timeout=10)


def test_live_and_ready(triton_server, grpc_client):
    assert _get(triton_server, "/v2/health/live").status_code == 200, "HTTP /v2/health/live is not 200"
    assert _get(triton_server, "/v2/health/ready").status_code == 200, "HTTP /v2/health/ready is not 200"
    assert grpc_client.is_server_live(), "gRPC ServerLive says not live"
    assert grpc_client.is_server_ready(), "gRPC ServerReady says not ready"


def test_server_metadata(triton_server, grpc_client):
    http = _get(triton_server, "/v2").json()
    grpc = grpc_client.get_server_metadata(as_json=True)
    assert http.get("name") and http.get("version"), f"server metadata lacks name/version: {http}"
    assert (http["name"], http["version"]) == (grpc["name"], grpc["version"]), f"HTTP says {http}, gRPC says {grpc}"
    missing = [e for e in REQUIRED_EXTENSIONS if e not in http.get("extensions", [])]
    assert not missing, f"server lacks extensions {missing} (has {http.get('extensions')})"


def test_model_metadata_agrees_with_config(triton_server, grpc_client, served_models):
    problems = []
    for view in served_models:
        grpc = grpc_client.get_model_metadata(view.name, as_json=True)
        config = _get(triton_server, f"/v2/models/{view.name}/config").json()
        for kind in ("inputs", "outputs"):
            grpc_ports = {p["name"]: (p["datatype"], tuple(int(d) for d in p["shape"])) for p in grpc.get(kind, [])}
            http_ports = {p.name: (p.datatype, p.shape) for p in getattr(view, kind)}
            if grpc_ports != http_ports:
                problems.append(f"{view.name} {kind}: HTTP metadata {http_ports} != gRPC metadata {grpc_ports}")
            batch = [-1] if view.max_batch_size > 0 else []
            for entry in config.get(kind[:-1], []):
                expected = tuple(batch + [int(d) for d in entry.get("dims", [])])
                got = http_ports.get(entry["name"])
                if got is None or got[1] != expected:
                    problems.append(f"{view.name}: {kind[:-1]} {entry['name']} in config has shape {list(expected)}, "
                                    f"metadata says {got}")
    assert not problems, "\n".join(problems)


def test_model_ready_per_version(triton_server, grpc_client, served_models):
    problems = []
    for view in served_models:
        if not view.versions:
            problems.append(f"{view.name}: metadata lists no versions")
        for version in view.versions:
            http = _get(triton_server, f"/v2/models/{view.name}/versions/{version}/ready").status_code
            if http != 200 or not grpc_client.is_model_ready(view.name, version):
                problems.append(f"{view.name} version {version}: listed in metadata but not ready (HTTP {http})")
        absent = str(max([int(v) for v in view.versions if v.isdigit()] or [0]) + 1000)
        if _get(triton_server, f"/v2/models/{view.name}/versions/{absent}/ready").status_code == 200 \
                or grpc_client.is_model_ready(view.name, absent):
            problems.append(f"{view.name} version {absent} does not exist but reports ready")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_outputs_match_model_metadata(protocol, triton_server, models_by_role, record_property):
    """Triton does not check what a Python model returns against its config: the suite does."""
    views = models_by_role["tensor"] + models_by_role["image"]
    problems, too_large = [], []
    for view in views:
        try:
            request = view.good_request()
        except RequestTooLarge as error:  # not sent: the request bound says how big it would be
            too_large.append(error.line)
            continue
        answer = send(protocol, triton_server.endpoints, request)
        if not answer.ok:
            refused = queue_rejection(answer, view.name, view.config)
            problems.append(f"{view.name}: a good request failed: {refused or answer}")
            continue
        for port in view.outputs:
            got = answer.outputs.get(port.name)
            if got is None:
                problems.append(f"{view.name}: output {port.name} missing from the response")
                continue
            if answer.datatypes[port.name] != port.datatype:
                problems.append(f"{view.name}: output {port.name} comes back as {answer.datatypes[port.name]}, "
                                f"metadata declares {port.datatype} (wrong dtype returned by the model)")
            if len(got.shape) != len(port.shape) or any(d >= 0 and d != g for d, g in zip(port.shape, got.shape)):
                problems.append(f"{view.name}: output {port.name} has shape {list(got.shape)}, metadata declares {list(port.shape)}")
    if not views:
        pytest.skip("no tensor or image model served")
    if too_large:
        record_property("not_applicable", too_large)
    if views and len(too_large) == len(views):
        not_applicable("; ".join(too_large))
    assert not problems, "\n".join(problems)


def test_server_still_ready_at_the_end(triton_server, models_by_role):
    """Runs last (conftest orders it): everything the suite sent has not worn the server down."""
    assert _get(triton_server, "/v2/health/ready").status_code == 200, f"server no longer READY:\n{triton_server.log_tail()}"
    for view in models_by_role["tensor"] + models_by_role["image"]:
        try:
            request = view.good_request()
        except RequestTooLarge:  # no good request fits the bound: its readiness was checked above
            continue
        answer = send("grpc", triton_server.endpoints, request)
        refused = queue_rejection(answer, view.name, view.config)
        assert answer.ok, f"{view.name}: a good request at the end of the run was refused: {refused}" if refused else \
            f"{view.name} no longer serves at the end of the run: {answer}"
