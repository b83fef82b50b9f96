"""Scratch copies of repositories belong to the run that made them (issue #25: `.cache/scratch` reached
1.6 GB): removed at the end of the run — normal exit, Ctrl-C, SIGTERM, with or without the server
reaper's handler installed first — kept only with $YTS_KEEP_SCRATCH=1; a run killed outright leaves
them, and the next one sweeps every copy whose owner is gone, never a live run's or a kept one.
Subprocesses with their own $YTS_CACHE, no server: ~10 s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.paths import PROJECT_ROOT
from harness.repository import scratch

MAKE_COPY = """
import os, sys, time
from pathlib import Path
{before}
from harness.repository.scratch import scratch_copy
copy = scratch_copy(Path(sys.argv[1]))
assert (copy / "m" / "config.pbtxt").is_file()
print(copy, flush=True)
{after}
"""


@pytest.fixture
def source(tmp_path) -> Path:
    repository = tmp_path / "models"
    (repository / "m" / "1").mkdir(parents=True)
    (repository / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    (repository / "m" / "1" / "model.py").write_text("# nothing\n")
    return repository


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("YTS_CACHE", str(path))
    return path


def _start(source: Path, cache: Path, *, before: str = "", after: str = "", **env) -> subprocess.Popen:
    code = MAKE_COPY.format(before=textwrap.dedent(before), after=textwrap.dedent(after))
    return subprocess.Popen([sys.executable, "-c", code, str(source)], cwd=PROJECT_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "YTS_CACHE": str(cache), **env})


def _copy_of(proc: subprocess.Popen) -> Path:
    line = proc.stdout.readline().strip()
    assert line, f"the child made no copy: {proc.stderr.read() if proc.poll() is not None else ''}"
    return Path(line)


def _left(cache: Path) -> list[str]:
    root = cache / "scratch"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_copies_are_removed_at_normal_exit(source, cache):
    proc = _start(source, cache)
    copy = _copy_of(proc)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert not copy.exists() and _left(cache) == []


def test_keep_scratch_keeps_them_marked_kept_and_says_where(source, cache):
    proc = _start(source, cache, YTS_KEEP_SCRATCH="1")
    copy = _copy_of(proc)
    assert proc.wait(timeout=60) == 0
    assert (copy / "m" / "config.pbtxt").is_file()
    assert str(copy) in proc.stderr.read()
    assert json.loads((copy.parent / scratch.OWNER_FILE).read_text())["kept"] is True
    assert scratch.sweep_scratch(cache / "scratch") == [] and copy.exists(), "a kept copy must survive later sweeps"


@pytest.mark.parametrize("reaper_first", [False, True], ids=["no-other-handler", "server-reaper-installed-first"])
def test_sigterm_removes_them_and_the_run_still_dies_of_sigterm(source, cache, reaper_first):
    before = "from harness.servers import cleanup; cleanup.install_handlers()" if reaper_first else ""
    proc = _start(source, cache, before=before, after="time.sleep(120)")
    copy = _copy_of(proc)
    assert copy.exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM, proc.stderr.read()
    assert not copy.exists() and _left(cache) == []


def test_ctrl_c_removes_them(source, cache):
    proc = _start(source, cache, after="time.sleep(120)")
    copy = _copy_of(proc)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert "KeyboardInterrupt" in proc.stderr.read()
    assert not copy.exists() and _left(cache) == []


def test_a_killed_runs_copies_are_swept_a_live_runs_are_not(source, cache):
    killed = _start(source, cache, after="time.sleep(120)")
    live = _start(source, cache, after="time.sleep(120)")
    try:
        killed_copy, live_copy = _copy_of(killed), _copy_of(live)
        killed.kill()  # SIGKILL: no handler runs, the copy stays
        killed.wait(timeout=30)
        assert killed_copy.exists()
        swept = scratch.sweep_scratch(cache / "scratch")
        assert swept == [killed_copy.parent], swept
        assert not killed_copy.exists() and live_copy.exists()
    finally:
        live.kill()
        live.wait(timeout=30)
    # the next process that makes a copy sweeps what the killed `live` left, without being asked
    proc = _start(source, cache)
    _copy_of(proc)
    assert proc.wait(timeout=60) == 0
    assert _left(cache) == []


def test_a_reused_pid_does_not_keep_a_dead_runs_copy(cache):
    """owner.json holds the start time too: another process now wearing the pid is not the owner."""
    folder = cache / "scratch" / "models-reused"
    (folder / "models").mkdir(parents=True)
    (folder / scratch.OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start": "1", "kept": False}))
    assert os.getpid() != 0 and scratch._start_time(os.getpid()) != "1"
    # our own pid is skipped outright (a run never sweeps itself): check the rule the sweep uses
    assert not scratch._owner_alive(os.getpid(), "1")
    assert scratch._owner_alive(os.getpid(), scratch._start_time(os.getpid()))


def test_unowned_copies_from_an_older_harness_are_swept_once_old(cache):
    root = cache / "scratch"
    old, fresh = root / "models-old", root / "models-fresh"
    for folder in (old, fresh):
        (folder / "models").mkdir(parents=True)
    past = time.time() - scratch.UNOWNED_MAX_AGE_S - 60
    os.utime(old, (past, past))
    assert scratch.sweep_scratch(root) == [old]
    assert fresh.exists()


def test_a_pytest_run_leaves_no_scratch_copy(pytester, source, cache):
    """Through the plugin's `repository` fixture, as every suite gets its copy."""
    pytester.makepyfile(test_copy="""
def test_copy(repository):
    assert (repository / "m" / "config.pbtxt").is_file()
    print("COPY", repository)
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", f"--repo={source}")
    result.assert_outcomes(passed=1)
    assert any("COPY " in line and str(cache) in line for line in result.outlines), result.outlines
    assert _left(cache) == []
