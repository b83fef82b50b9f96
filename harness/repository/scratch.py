"""A user's repository is read-only to the harness: everything runs on a scratch copy, and a
fingerprint (every path, its type, mode and content hash) proves the original was not touched.

Scratch copies are the run's own: each is a folder `<cache>/scratch/<repo>-XXXX/` holding `models/` (the
copy) and `owner.json` (the pid and start time of the process that made it). They are removed when that
process ends — normal exit, Ctrl-C, SIGTERM/SIGHUP — unless $YTS_KEEP_SCRATCH=1 (then they are marked
kept and their paths printed); a run killed outright (SIGKILL, OOM) leaves them, and the next process
that makes a scratch copy sweeps every copy whose owner is gone (folders from before owner.json existed:
once they are a day old)."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.paths import cache_dir

KEEP_ENV = "YTS_KEEP_SCRATCH"
OWNER_FILE = "owner.json"
UNOWNED_MAX_AGE_S = 24 * 3600  # a copy without owner.json (an older harness) is swept once this old

_lock = threading.RLock()
_copies: dict[Path, int] = {}  # scratch folder (parent of models/) -> the pid that made it, until removed
_installed = False
_previous_handlers: dict[int, object] = {}
_swept_parents: set[Path] = set()


def fingerprint(root: Path) -> dict[str, str]:
    root = Path(root)
    prints: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                prints[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISDIR(info.st_mode):
                prints[rel] = f"dir:{stat.S_IMODE(info.st_mode):o}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                prints[rel] = f"file:{stat.S_IMODE(info.st_mode):o}:{digest}"
    return prints


def scratch_copy(source: Path, parent: Path | None = None) -> Path:
    """Copy a repository somewhere disposable; links are kept as links (the config suite judges
    them) and nothing is ever written back."""
    source = Path(source).resolve()
    if not source.is_dir():
        raise FileNotFoundError(f"model repository {source} does not exist or is not a directory")
    _install()
    if parent is None:  # only the harness's own scratch folder is swept: a caller's folder is the caller's
        parent = cache_dir("scratch")
        _sweep_once(parent)
    target = Path(tempfile.mkdtemp(prefix=f"{source.name}-", dir=parent))
    with _lock:
        _copies[target] = os.getpid()
    (target / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid()),
                                                 "source": str(source), "kept": False}))
    try:
        shutil.copytree(source, target / "models", symlinks=True)
    except BaseException:
        _remove(target)
        raise
    return target / "models"


def keep_scratch() -> bool:
    """$YTS_KEEP_SCRATCH=1 (or true/yes/on) keeps this run's scratch copies after it ends."""
    return os.environ.get(KEEP_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def live_copies() -> list[Path]:
    """The scratch folders this process made and has not removed yet (a forked child sees none: its
    parent's copies are not its own to remove)."""
    with _lock:
        return [folder for folder, pid in _copies.items() if pid == os.getpid()]


def _take() -> list[Path]:
    with _lock:
        copies = live_copies()
        for folder in copies:
            del _copies[folder]
    return copies


def remove_scratch() -> list[Path]:
    """Remove every scratch copy this process made (its whole folder: the copy, and whatever a suite
    put beside it); returns what was removed."""
    copies = _take()
    for folder in copies:
        shutil.rmtree(folder, ignore_errors=True)
    return copies


def _remove(folder: Path) -> None:
    with _lock:
        _copies.pop(folder, None)
    shutil.rmtree(folder, ignore_errors=True)


def _keep_all() -> list[Path]:
    copies = _take()
    for folder in copies:
        owner = folder / OWNER_FILE
        try:
            record = json.loads(owner.read_text())
            owner.write_text(json.dumps({**record, "kept": True}))
        except (OSError, ValueError):
            pass
    return copies


def end_of_run() -> None:
    """At interpreter exit: stop any server still serving from a copy (the harness stops its servers
    itself; this is the backstop), then remove the copies, or keep them when asked."""
    if not live_copies():
        return
    if keep_scratch():
        kept = _keep_all()
        print(f"[yts] {KEEP_ENV}=1: scratch copies kept (remove them yourself): " + ", ".join(str(k / "models") for k in kept),
              file=sys.stderr)
        return
    try:
        from harness.servers import cleanup

        cleanup.stop_all()
    except Exception:
        pass
    remove_scratch()


def _on_signal(signum, frame):
    """SIGTERM/SIGHUP: remove the copies, then whatever was installed before (the server reaper, which
    stops the servers and dies of the signal), else stop the servers and die of the signal ourselves."""
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    if previous == signal.SIG_IGN:
        return
    end_of_run()
    if callable(previous):
        previous(signum, frame)
        return
    try:
        from harness.servers import cleanup

        cleanup.stop_all()
    except Exception:
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    """Once per process: the exit hook, and (from the main thread) the SIGTERM/SIGHUP handlers, chained
    to whatever handler was there (harness.servers.cleanup's, in a pytest run)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    atexit.register(end_of_run)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(signum)
        if previous is _on_signal:
            continue
        _previous_handlers[signum] = previous if previous is not None else signal.SIG_DFL
        signal.signal(signum, _on_signal)


# -- copies left by runs that are gone ------------------------------------------------------------
def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid it
    names one process, even after the pid is reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def _owner_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    return start is None or now is None or now == start


def sweep_scratch(parent: Path | None = None, unowned_max_age_s: float = UNOWNED_MAX_AGE_S) -> list[Path]:
    """Remove the scratch copies under `parent` whose owner process is gone (a run killed outright),
    never a kept one nor one whose owner still runs; a folder without owner.json (an older harness)
    once it is `unowned_max_age_s` old. Returns what was removed."""
    parent = Path(parent) if parent else cache_dir("scratch")
    removed = []
    try:
        folders = [p for p in parent.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    mine = set(live_copies())
    for folder in folders:
        if folder in mine:
            continue
        owner = folder / OWNER_FILE
        try:
            record = json.loads(owner.read_text())
        except FileNotFoundError:
            try:
                old = time.time() - folder.stat().st_mtime > unowned_max_age_s
            except OSError:
                continue
            if old:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
            continue
        except (OSError, ValueError):
            continue
        if record.get("kept") or not isinstance(record.get("pid"), int):
            continue
        if record["pid"] == os.getpid() or _owner_alive(record["pid"], record.get("start")):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _sweep_once(parent: Path) -> None:
    with _lock:
        if parent in _swept_parents:
            return
        _swept_parents.add(parent)
    try:
        sweep_scratch(parent)
    except Exception:  # sweeping is housekeeping: never the reason a run fails
        pass
