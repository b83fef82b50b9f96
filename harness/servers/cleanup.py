"""Nothing outlives a run. Without Ryuk (its image cannot be pulled here) the harness does the reaping:
every server process and container it starts is recorded in a per-run file under the cache, stopped on
normal exit, on SIGTERM/SIGHUP and at interpreter exit, and a later run sweeps what a killed one left."""

from __future__ import annotations

import atexit
import json
import os
import signal
import threading
from pathlib import Path

from harness.paths import cache_dir

OWNER_LABEL = "yts.owner-pid"
_lock = threading.RLock()
_live: set = set()  # TritonServer objects started by this process
_handlers_installed = False


def _record_path(owner: int | None = None) -> Path:
    return cache_dir("runs") / f"{owner or os.getpid()}.json"


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"pids": [], "containers": []}


def _update(key: str, value, add: bool) -> None:
    with _lock:
        path = _record_path()
        record = _read(path)
        items = set(record.get(key, []))
        items.add(value) if add else items.discard(value)
        record[key] = sorted(items)
        if record["pids"] or record["containers"]:
            path.write_text(json.dumps(record))
        else:
            path.unlink(missing_ok=True)


def track(server) -> None:
    install_handlers()
    with _lock:
        _live.add(server)


def untrack(server) -> None:
    with _lock:
        _live.discard(server)


def record_pid(pid: int, add: bool = True) -> None:
    _update("pids", pid, add)


def record_container(container_id: str, add: bool = True) -> None:
    _update("containers", container_id, add)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_tritonserver(pid: int) -> bool:
    try:
        return b"tritonserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _docker_client():
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception:
        return None


def sweep() -> list[str]:
    """Remove what runs whose owner process is gone left behind; returns what was removed."""
    swept: list[str] = []
    for path in cache_dir("runs").glob("*.json"):
        owner = int(path.stem)
        if owner == os.getpid() or pid_alive(owner):
            continue
        record = _read(path)
        for pid in record.get("pids", []):
            if pid_alive(pid) and _is_tritonserver(pid):
                os.kill(pid, signal.SIGKILL)
                swept.append(f"process {pid}")
        swept += _remove_containers(record.get("containers", []))
        path.unlink(missing_ok=True)
    client = _docker_client()
    if client is not None:
        for container in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
            owner = int(container.labels.get(OWNER_LABEL, "0"))
            if owner != os.getpid() and not pid_alive(owner):
                container.remove(force=True)
                swept.append(f"container {container.short_id}")
    return swept


def _remove_containers(ids: list[str]) -> list[str]:
    if not ids:
        return []
    client = _docker_client()
    removed = []
    for container_id in ids if client else []:
        try:
            client.containers.get(container_id).remove(force=True)
            removed.append(f"container {container_id[:12]}")
        except Exception:
            pass
    return removed


def stop_all() -> None:
    with _lock:
        servers = list(_live)
    for server in servers:
        try:
            server.stop()
        except Exception:
            pass


def _on_signal(signum, frame):
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_handlers() -> None:
    """SIGTERM/SIGHUP stop every server, then the process dies of the same signal; Ctrl-C
    (KeyboardInterrupt) unwinds through pytest's teardown and atexit."""
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None):
            signal.signal(signum, _on_signal)
    atexit.register(stop_all)
    _handlers_installed = True
