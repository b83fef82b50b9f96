"""An interrupted `yts certify` stops within 10 s, leaves a partial report — report.json and report.html
marked incomplete with what ran, junit.xml — and no tritonserver or Python backend stub behind (issue #20
item 4; #22 item 6: an honest exit code, no report path that does not exist). Three ways to interrupt:
Ctrl-C at a terminal (SIGINT to the whole foreground process group), `timeout` (SIGTERM to the command and
its group), and `kill` of the CLI alone while a test swallows the KeyboardInterrupt (the deadline watchdog);
and pytest killed outright (the last partial report it wrote, rendered by the CLI). The run: the protocol
suite on the tiny repository, then a test that holds the session's server. ~10 s each, no Docker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STOP_WITHIN_S = 10.0

HOLDER = """
import time
def test_hold(triton_server):
    print("HOLDING", flush=True)
    time.sleep(300)
"""

STUBBORN = """
import time
def test_hold(triton_server):
    held = time.monotonic()
    while time.monotonic() < held + 300:
        try:
            print("HOLDING", flush=True)
            time.sleep(1)
        except KeyboardInterrupt:  # a test that will not be interrupted: the watchdog ends the run
            pass
"""


def _processes() -> dict[int, tuple[int, int, bytes]]:
    """pid -> (parent pid, process group, command line) for every process now."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), (entry / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            pass
    return table


def _state(pid: int) -> str:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        parent = Path(f"/proc/{fields[1]}/cmdline").read_bytes()[:80]
        return f"{fields[0]} ppid {fields[1]} {parent}"
    except (OSError, IndexError):
        return "gone"


def _tritons_of(root: int) -> dict[int, tuple[int, int, bytes]]:
    """The tritonserver and stub processes descended from `root`."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            if b"triton" in table[child][2]:
                found[child] = table[child]
    return found


class Run:
    """`yts certify` in a session of its own (its process group stands for a terminal's foreground group)."""

    def __init__(self, tmp_path: Path, repository: Path, holder: str):
        holder_file = tmp_path / "holder" / "test_hold.py"
        holder_file.parent.mkdir()
        holder_file.write_text(holder)
        self.report_dir = tmp_path / "report"
        command = [sys.executable, "-m", "harness.cli", "certify", "--repo", str(repository), "--suites", "protocol",
                   "--report-dir", str(self.report_dir), "--", "-s", str(holder_file)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self.lines: list[str] = []
        self.holding = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            if "HOLDING" in line:
                self.holding.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_holding(self, timeout: float = 180) -> None:
        if not self.holding.wait(timeout):
            self.process.kill()
            pytest.fail("the run never reached its holding test:\n" + self.output[-4000:])

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)


@pytest.fixture
def run_factory(tmp_path, tiny_repository):
    runs = []

    def start(holder: str = HOLDER) -> Run:
        runs.append(Run(tmp_path, tiny_repository, holder))
        return runs[-1]

    yield start
    for run in runs:
        run.kill()


@pytest.mark.parametrize("how", ["ctrl-c", "timeout", "kill-with-stubborn-test"])
def test_interrupted_certify_leaves_a_partial_report_and_no_process(run_factory, how):
    signum = signal.SIGINT if how == "ctrl-c" else signal.SIGTERM
    run = run_factory(STUBBORN if how == "kill-with-stubborn-test" else HOLDER)
    run.wait_holding()
    servers = _tritons_of(run.process.pid)
    assert any(b"tritonserver" in cmd for _, _, cmd in servers.values()), f"no server under the run: {servers}"
    groups = {pgid for _, pgid, _ in servers.values()}
    regions = {arg.decode() for _, _, cmd in servers.values() for arg in cmd.split(b"\0")
               if arg.startswith(b"triton_python_backend_shm_region_")}
    assert regions, f"no Python backend stub under the run: {servers}"

    started = time.monotonic()
    if how == "kill-with-stubborn-test":
        run.process.send_signal(signum)  # the CLI alone, as `kill PID` does
    else:
        os.killpg(run.process.pid, signum)  # the whole group, as a terminal's Ctrl-C and `timeout` do
    try:
        run.process.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail(f"{how}: still running {STOP_WITHIN_S:g} s after {signum.name}:\n" + run.output[-4000:])
    elapsed = time.monotonic() - started

    # nothing left: neither the servers and stubs seen under the run, nor anything in their process groups
    # (a process SIGKILLed a moment ago may still be on its way out: looked at until the 10 s are up; a
    # zombie has exited — reaping an orphan is the host's init's business, and this one's is slow)
    while True:
        left = {pid: (_state(pid), cmd[:120]) for pid, (_, pgid, cmd) in _processes().items()
                if (pid in servers or pgid in groups) and not _state(pid).startswith(("Z", "X", "gone"))}
        if not left or time.monotonic() - started > STOP_WITHIN_S:
            break
        time.sleep(0.1)
    assert not left, f"{how}: left behind {time.monotonic() - started:.1f} s after the signal: {left}"
    clean = time.monotonic() - started
    assert not [r for r in regions if Path("/dev/shm", r).exists()], f"{how}: the stubs' shared memory was left"

    time.sleep(0.2)  # the reader thread takes the last lines
    output = run.output
    assert run.process.returncode == 128 + signum, f"{how}: exit code {run.process.returncode}\n{output[-3000:]}"
    report = json.loads((run.report_dir / "report.json").read_text())
    assert report["complete"] is False and report["interrupted"]["by"] == signum.name, report["interrupted"]
    assert report["interrupted"]["during"].endswith("::test_hold")
    assert report["ran"] >= 40 and report["collected"] > report["ran"], (report["ran"], report["collected"])
    verdicts = [c["verdict"] for c in report["checks"]]
    assert verdicts.count("passed") >= 20 and verdicts.count("interrupted") == 1, verdicts
    html = (run.report_dir / "report.html").read_text()
    assert f"INCOMPLETE: interrupted by {signum.name} after {report['ran']} of {report['collected']} tests" in html
    assert "Partial report" in html
    assert f"[yts certify] report: {run.report_dir / 'report.html'}" in output
    junit = (run.report_dir / "junit.xml").read_text()
    named = re.findall(r"<testcase [^>]*name=", junit)  # (pytest adds an empty one for the test cut off)
    assert len(named) == report["ran"], (len(named), report["ran"])
    assert "not written" not in output, output[-3000:]
    assert f"INCOMPLETE: interrupted by {signum.name}" in output, output[-3000:]
    if how == "kill-with-stubborn-test":  # the watchdog ended pytest before its session could finish
        assert "still running" in output, output[-3000:]
    print(f"{how}: exited {elapsed:.1f} s after {signum.name}, no process left at {clean:.1f} s; "
          f"{report['ran']} of {report['collected']} tests ran")


def test_a_run_that_dies_leaves_its_last_partial_report_and_no_process(run_factory):
    """pytest killed outright (the kernel's OOM killer, kill -9): nothing in it runs, but the CLI renders
    the last report.json it wrote between tests, marked incomplete, reaps the stubs, and says what is
    missing; its exit code is 128 + the signal."""
    run = run_factory(HOLDER)
    run.wait_holding()
    servers = _tritons_of(run.process.pid)
    table = _processes()
    pytest_pid = next(pid for pid, (ppid, _, cmd) in table.items() if ppid == run.process.pid and b"pytest" in cmd)
    started = time.monotonic()
    os.kill(pytest_pid, signal.SIGKILL)
    run.process.wait(timeout=STOP_WITHIN_S)
    while time.monotonic() - started < STOP_WITHIN_S:
        left = {pid: _state(pid) for pid in servers if not _state(pid).startswith(("Z", "X", "gone"))}
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"left behind after pytest was killed: {left}"
    time.sleep(0.2)
    output = run.output
    assert run.process.returncode == 128 + signal.SIGKILL, output[-3000:]
    assert "pytest died of SIGKILL" in output and "not written: junit.xml" in output, output[-3000:]
    report = json.loads((run.report_dir / "report.json").read_text())
    assert report["complete"] is False and report["pytest_exit_status"] is None and report["ran"] >= 1
    assert "INCOMPLETE: the run died after" in (run.report_dir / "report.html").read_text()
    assert f"[yts certify] report: {run.report_dir / 'report.html'}" in output


def test_no_report_path_that_does_not_exist(tmp_path, capsys):
    """A run that wrote nothing: the CLI names no report, says nothing was written, and fails."""
    from harness.report.certify import conclude

    assert conclude(tmp_path, "certified", 0, None) == 1
    out = capsys.readouterr().out
    assert "report:" not in out and "written in" in out and "nothing; not written: report.json" in out


def test_incomplete_report_is_never_certified_and_says_what_ran():
    from harness.report import gate

    checks = [{"id": f"suites/config/test_a.py::test_{i}", "suite": "config", "verdict": "passed", "message": "",
               "values": {}} for i in range(3)]
    checks.append({"id": "suites/config/test_a.py::test_x", "suite": "config", "verdict": "interrupted",
                   "message": "interrupted by SIGTERM while it ran: no verdict", "values": {}})
    report = {"checks": checks, "complete": False, "collected": 10, "ran": 3,
              "interrupted": {"by": "SIGTERM", "during": "suites/config/test_a.py::test_x"}}
    verdict = gate.judge(report, {"required": ["suites/config/*"]})
    assert not verdict.certified
    assert verdict.line() == ("INCOMPLETE: interrupted by SIGTERM after 3 of 10 tests (during "
                              "suites/config/test_a.py::test_x); not certified. What ran: 3 passed, 1 interrupted")
    report.update(interrupted=None, pytest_exit_status=None)
    assert gate.judge(report, {"required": ["*"]}).line().startswith("INCOMPLETE: the run died after 3 of 10 tests")
    report.update(complete=True, checks=checks[:3])
    assert gate.judge(report, {"required": ["*"]}).certified


def test_a_collection_error_is_not_an_interrupt(tmp_path):
    """pytest reports "Interrupted: 1 error during collection" through the keyboard-interrupt hook; that is no
    signal, so no deadline may be armed (it once killed a pytester host run 10 s later with exit 130)."""
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    code = ("import pytest; from harness.servers import cleanup; "
            f"code = pytest.main([{str(tmp_path)!r}, '-q', '-p', 'no:cacheprovider']); "
            "print('exit', int(code), 'interrupted', cleanup.interrupted())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "exit 2 interrupted None" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
