"""A vendor's repository is executable code. Its paths must stay inside it; in container mode its
code runs only in the container, on a read-only mount, with a memory limit and ports published on
loopback only; in process mode the user is told the code runs on the host.

Network: Docker cannot publish ports from a container on an `internal=True` network, and Triton
serves no Unix socket, so a container that we can reach from the host keeps the bridge's egress.
Checked here: nothing is published beyond 127.0.0.1. Stated, not hidden (README)."""

from __future__ import annotations

import pytest

from harness.protocol.untrusted import UntrustedCodeWarning, warn_if_host_executes
from harness.repository.paths import validate_paths
from harness.servers.container import MOUNT_POINT
from harness.verdicts import not_applicable


def test_repository_paths_stay_inside_root(repository_source):
    escapes = validate_paths(repository_source)
    assert not escapes, f"the repository {repository_source} reaches outside itself:\n" + "\n".join(map(str, escapes))


def test_process_mode_warns_model_code_runs_on_host(triton_server):
    if triton_server.kind != "process":
        not_applicable(f"{triton_server.kind} launcher: model code does not run in the harness's process tree")
    with pytest.warns(UntrustedCodeWarning, match="runs on this host"):
        warn_if_host_executes(triton_server)


@pytest.fixture
def container_info(triton_server):
    if triton_server.kind != "container":
        pytest.skip(f"{triton_server.kind} launcher: no container to inspect (run with --triton=container)")
    import docker

    client = docker.from_env()
    container_id = triton_server.container.get_container_id()
    return client.api.inspect_container(container_id), client.containers.get(container_id)


@pytest.mark.container
def test_container_mounts_repository_read_only(container_info):
    info, container = container_info
    mounts = [m for m in info["Mounts"] if m["Destination"] == MOUNT_POINT]
    assert mounts, f"no mount at {MOUNT_POINT}: {info['Mounts']}"
    assert not mounts[0]["RW"], f"the repository is mounted read-write at {MOUNT_POINT}: {mounts[0]}"
    code, output = container.exec_run(["sh", "-c", f"touch {MOUNT_POINT}/.yts_write_probe"])
    assert code != 0 and b"Read-only" in output, f"writing into {MOUNT_POINT} did not fail as read-only: {code} {output!r}"


@pytest.mark.container
def test_container_memory_limit_and_loopback_ports(container_info):
    info, _ = container_info
    host = info["HostConfig"]
    assert host.get("Memory", 0) > 0, "the container runs without a memory limit"
    bindings = {port: b for port, b in (host.get("PortBindings") or {}).items()}
    wide = {port: b for port, b in bindings.items() if any(x.get("HostIp") not in ("127.0.0.1", "::1") for x in b or [])}
    assert bindings and not wide, f"ports published beyond loopback: {wide or 'none published'}"
    assert not host.get("Privileged"), "the container is privileged"
