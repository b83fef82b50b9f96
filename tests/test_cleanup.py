"""Nothing outlives a run: SIGTERM of a pytest run that holds a server leaves no tritonserver process and
no container; a run killed outright (SIGKILL) has its container swept by the next run; the user's
repository is byte-for-byte unchanged afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.repository.scratch import fingerprint
from harness.servers import cleanup, docker_available

needs_docker = pytest.mark.skipif(not docker_available(), reason="no Docker daemon answers")

HOLDER = """
import time
def test_hold(triton_server):
    print("SERVER-UP", flush=True)
    time.sleep(300)
"""


def _start_holder(pytester, repository: Path, kind: str) -> subprocess.Popen:
    pytester.makepyfile(test_hold=HOLDER)
    env = dict(os.environ, YTS_CACHE=os.environ.get("YTS_CACHE", str(Path(__file__).parents[1] / ".cache")))
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", f"--triton={kind}", f"--repo={repository}",
         str(pytester.path / "test_hold.py")],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
    )


def _wait_up(proc: subprocess.Popen, timeout: float = 180) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if "SERVER-UP" in line:
            return "".join(seen)
    proc.kill()
    pytest.fail("holder run never reported a started server:\n" + "".join(seen))


def _record(owner: int) -> dict:
    path = cleanup._record_path(owner)
    return json.loads(path.read_text()) if path.exists() else {"pids": [], "containers": []}


def _containers_of(owner: int) -> list:
    import docker

    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": f"{cleanup.OWNER_LABEL}={owner}"})


@pytest.mark.parametrize("kind", [
    "process",
    pytest.param("container", marks=[pytest.mark.container, needs_docker]),
])
def test_sigterm_leaves_nothing_behind(pytester, tiny_repository, kind):
    proc = _start_holder(pytester, tiny_repository, kind)
    _wait_up(proc)
    record = _record(proc.pid)
    assert record["pids"] or record["containers"], f"the run recorded no server: {record}"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    # SIGTERM interrupts a pytest run as Ctrl-C does (tests/test_interrupt.py: the partial report)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED
    for pid in record["pids"]:
        assert not cleanup.pid_alive(pid), f"tritonserver pid {pid} survived SIGTERM of its run"
    if kind == "container":
        assert _containers_of(proc.pid) == [], "a container survived SIGTERM of its run"
    assert not cleanup._record_path(proc.pid).exists()


def test_sigkill_leaves_no_process(pytester, tiny_repository):
    """PR_SET_PDEATHSIG: the kernel kills the server with the harness, even by SIGKILL."""
    proc = _start_holder(pytester, tiny_repository, "process")
    _wait_up(proc)
    pids = _record(proc.pid)["pids"]
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(cleanup.pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(cleanup.pid_alive(pid) for pid in pids)


@pytest.mark.container
@needs_docker
def test_crashed_runs_container_is_swept(pytester, tiny_repository):
    proc = _start_holder(pytester, tiny_repository, "container")
    _wait_up(proc)
    proc.kill()  # no handler runs: the container stays
    proc.wait(timeout=30)
    assert _containers_of(proc.pid), "expected the killed run's container to be left behind"
    swept = cleanup.sweep()
    assert any(item.startswith("container") for item in swept), swept
    assert _containers_of(proc.pid) == []
    assert not cleanup._record_path(proc.pid).exists()


@pytest.mark.container
@needs_docker
def test_a_labelled_container_whose_run_is_gone_is_swept_from_the_list_alone():
    """A container labelled with a dead owner and no run record (its record lost) is found by its label and
    removed; the sweep reads the label from the list itself (sparse), never one inspect per container, which
    raised docker.errors.NotFound when another run removed its own container in between."""
    import docker

    from harness.servers.image import BASE_TAG

    client = docker.from_env()
    if not client.images.list(name=BASE_TAG):
        pytest.skip(f"{BASE_TAG} is not built here (the container launcher builds it)")
    dead = 2 ** 22 + 1  # above pid_max's default: no process has it
    container = client.containers.create(BASE_TAG, "true", labels={cleanup.OWNER_LABEL: str(dead)})
    try:
        assert f"container {container.short_id}" in cleanup.sweep()
        assert not client.containers.list(all=True, filters={"id": container.id})
    finally:
        for left in client.containers.list(all=True, filters={"id": container.id}):
            left.remove(force=True)


def test_users_repository_is_unchanged_by_a_run(pytester, tiny_repository):
    before = fingerprint(tiny_repository)
    pytester.makepyfile(test_use="""
import numpy as np, tritonclient.http as httpclient
def test_use(triton_server, repository):
    from pathlib import Path
    (Path(repository) / "scale_add" / "scratch-marker").write_text("the scratch copy is ours")
    client = httpclient.InferenceServerClient(triton_server.endpoints.http)
    x = httpclient.InferInput("X", [1, 4], "FP32"); x.set_data_from_numpy(np.ones((1, 4), np.float32))
    assert client.infer("scale_add", [x]).as_numpy("Y").tolist() == [[3.0] * 4]
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--repo={tiny_repository}")
    result.assert_outcomes(passed=1)
    assert fingerprint(tiny_repository) == before
