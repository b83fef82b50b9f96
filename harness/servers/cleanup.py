"""Nothing outlives a run. Without Ryuk (its image cannot be pulled here) the harness does the reaping:
every server process and container it starts is recorded in a per-run file under the cache, stopped on
normal exit, on SIGTERM/SIGHUP and at interpreter exit, and a later run sweeps what a killed one left.

In a pytest run (install_handlers(interrupt=True), from the plugin) SIGTERM and SIGHUP behave as Ctrl-C
does: the first one raises KeyboardInterrupt, so pytest finishes an interrupted session the normal way
(fixtures torn down, report.json / report.html / junit.xml written); servers then get FAST_GRACE_S to
stop before SIGKILL, and a watchdog ends the process DEADLINE_S after that first signal whatever it is
doing, killing the servers first."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from harness.paths import cache_dir

OWNER_LABEL = "yts.owner-pid"
FAST_GRACE_S = 2.0  # a server stopped by an interrupted run gets this long, then SIGKILL
DEADLINE_S = 6.5  # an interrupted run is gone this long after the first signal, plus its last report (< 10 s)
_lock = threading.RLock()
_live: set = set()  # TritonServer objects started by this process
_handlers_installed = False
_interrupt_mode = False
_interrupt: dict = {}  # the first interrupt: {"signal": "SIGTERM", "at": time.monotonic()}
_census = {"started": 0, "at_once": 0}
_deadline_callbacks: list = []  # run by the watchdog before it kills the servers and exits


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
        _census["started"] += 1
        _census["at_once"] = max(_census["at_once"], len(_live))


def census() -> dict:
    """Servers this process started, and the most that were up at once (the suites keep it to one:
    harness.plugin's suite order and suite-end stops)."""
    with _lock:
        return dict(_census)


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


def _process_group(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


SHM_REGION = b"triton_python_backend_shm_region_"


def kill_server_group(pgid: int) -> list[int]:
    """SIGKILL what is left of a server's process group (a process server runs in a session of its own,
    so its group id is its pid, and the Python backend stubs it forks are in that group). Only processes
    whose command line names triton are touched, so a reused id never costs a stranger. The shared-memory
    regions the killed stubs name on their command lines are unlinked: a killed server never does it."""
    killed, regions = [], set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or _process_group(int(entry.name)) != pgid:
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(b"triton" in arg for arg in args):
                continue
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
            regions.update(a.decode() for a in args if a.startswith(SHM_REGION) and b"/" not in a)
        except (OSError, ProcessLookupError, UnicodeDecodeError):
            pass
    for region in regions:
        Path("/dev/shm", region).unlink(missing_ok=True)
    return killed


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
            swept += [f"process {p}" for p in kill_server_group(pid) if p != pid]  # its stubs
        swept += _remove_containers(record.get("containers", []))
        path.unlink(missing_ok=True)
    client = _docker_client()
    if client is not None:
        # sparse: the list's own fields, no inspect per container, which fails when another run removes its
        # container between the list and the inspect (a CI run died on that: docker.errors.NotFound)
        for container in client.containers.list(all=True, sparse=True, filters={"label": OWNER_LABEL}):
            owner = int((container.attrs.get("Labels") or {}).get(OWNER_LABEL, "0"))
            if owner != os.getpid() and not pid_alive(owner):
                swept += _remove_containers([container.id])
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


def interrupted() -> str | None:
    """The signal that interrupted this run ("SIGINT", "SIGTERM", ...), or None."""
    return _interrupt.get("signal")


def stop_grace(server, normal: float) -> float:
    """How long `server` may take to stop before it is killed: `normal`; FAST_GRACE_S once the run is
    interrupted; none when stop_all stops it (from a signal handler, at interpreter exit, at the
    deadline), where every second counts against the run's 10 s."""
    if _interrupt.get("deadline_passed") or getattr(server, "_hurry", False):
        return 0.0
    return min(normal, FAST_GRACE_S) if _interrupt else normal


def on_deadline(callback) -> None:
    """`callback()` runs if an interrupted run is still alive at its deadline (e.g. to write what it has)."""
    _deadline_callbacks.append(callback)


def forget_deadline(callback) -> None:
    if callback in _deadline_callbacks:
        _deadline_callbacks.remove(callback)


def stop_all() -> None:
    with _lock:
        servers = list(_live)
    for server in servers:
        try:
            server._hurry = True
            server.stop()
        except Exception:
            pass


def _on_signal(signum, frame):
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _say(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode())
    except OSError:
        pass


def note_interrupt(name: str, signum: int = signal.SIGINT) -> bool:
    """Record the first interrupt and arm the watchdog; False when the run was already interrupted."""
    with _lock:
        if _interrupt:
            return False
        _interrupt.update(signal=name, at=time.monotonic())
    threading.Thread(target=_deadline, args=(name, signum), daemon=True, name="yts-deadline").start()
    return True


def _deadline(name: str, signum: int) -> None:
    """The interrupted run is still alive DEADLINE_S after the first signal (a test swallowed the
    KeyboardInterrupt, a call that does not return): servers killed first, then the partial report
    (callbacks), then the process ends with 128 + signal."""
    time.sleep(DEADLINE_S)
    _interrupt["deadline_passed"] = True
    _say(f"[yts] still running {DEADLINE_S:g} s after {name}: killing its servers and exiting now")
    stop_all()
    for pid in _read(_record_path()).get("pids", []):  # one the main thread is stopping right now too
        kill_server_group(pid)
    for callback in list(_deadline_callbacks):
        try:
            callback()
        except Exception:
            pass
    try:
        from harness.repository.scratch import end_of_run

        end_of_run()
    except Exception:
        pass
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os._exit(128 + signum)


def _on_interrupt(signum, frame):
    """SIGINT/SIGTERM/SIGHUP in a pytest run: the first raises KeyboardInterrupt (pytest then writes its
    reports and tears fixtures down, servers in FAST_GRACE_S); later ones only say it is under way."""
    name = signal.Signals(signum).name
    if note_interrupt(name, signum):
        raise KeyboardInterrupt(f"{name} received")
    _say(f"[yts] {name}: already stopping (writing the partial report), gone within {DEADLINE_S:.0f} s of the first signal")


def install_handlers(interrupt: bool = False) -> None:
    """SIGTERM/SIGHUP stop every server, then the process dies of the same signal; Ctrl-C
    (KeyboardInterrupt) unwinds through pytest's teardown and atexit. With `interrupt` (a pytest run),
    SIGTERM/SIGHUP raise KeyboardInterrupt as SIGINT does, and any of them arms the deadline watchdog."""
    global _handlers_installed, _interrupt_mode
    if threading.current_thread() is not threading.main_thread():
        return
    if interrupt and not _interrupt_mode:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) in (signal.SIG_DFL, None, signal.default_int_handler, _on_signal):
                signal.signal(signum, _on_interrupt)
        _interrupt_mode = True
    if _handlers_installed:
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None):
            signal.signal(signum, _on_signal)
    atexit.register(stop_all)
    _handlers_installed = True
