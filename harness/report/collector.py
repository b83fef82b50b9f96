"""Every check's verdict, measured values and thresholds, collected while pytest runs and written as
report.json at the end — the raw record that the certification gate and the HTML are judged from
(MLPerf's habit: the run writes results first, verifiers read them later).

A run that does not finish still leaves a report: report.json is rewritten between tests (at most every
PARTIAL_EVERY_S) with "complete": false, so even a run killed outright leaves what it had; an interrupted
run (Ctrl-C, SIGTERM) writes its final one marked incomplete, with the test it was in and how many ran."""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path

import pytest

from harness.verdicts import NOT_APPLICABLE, NOT_TESTED_HERE

REPORT_NAME = "report.json"
PARTIAL_EVERY_S = 1.0


def _suite(item_nodeid: str) -> str:
    parts = item_nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "suites" else "other"


class ReportCollector:
    """A pytest plugin object: one per run, registered by harness.plugin when --report-dir is given."""

    def __init__(self, report_dir: Path):
        self.report_dir = Path(report_dir)
        self.checks: dict[str, dict] = {}
        self.environment: dict = {}
        self.artifacts: dict[str, str] = {}
        self.started = time.time()
        self.collected: int | None = None  # tests selected to run
        self.finished = 0  # tests that ran to the end of their teardown
        self.current: str | None = None  # the test running now
        self.interrupted: dict | None = None  # {"by": "SIGTERM", "during": nodeid or None}
        self._written = 0.0
        self._write_lock = threading.Lock()

    def add_environment(self, **values) -> None:
        self.environment.update({k: v for k, v in values.items() if v is not None})

    def add_artifacts(self, hashes: dict[str, str]) -> None:
        self.artifacts.update(hashes)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.checks.setdefault(report.nodeid, {
            "id": report.nodeid, "suite": _suite(report.nodeid), "verdict": "passed",
            "duration_s": 0.0, "message": "", "values": {},
        })
        entry["duration_s"] += report.duration
        entry["values"].update({k: _plain(v) for k, v in report.user_properties})
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            if reason.startswith(NOT_APPLICABLE):
                entry["verdict"], entry["message"] = "not applicable", reason
            else:
                entry["verdict"] = "not tested"
                entry["message"] = reason if reason.startswith("not tested") else "not tested, because " + reason
                if reason.startswith(NOT_TESTED_HERE):  # an optional tool is absent: listed, never blocking
                    entry["blocks_certification"] = False
        elif report.failed:
            entry["verdict"] = "failed" if report.when == "call" else "error"
            entry["message"] = _headline(report)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        self.write(complete=False)  # from here on a report exists, whatever happens to the run

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._write_partial()  # before a test that may be long, or the last
        self.current = nodeid

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.current = None
        self.finished += 1
        self._write_partial()

    def _write_partial(self) -> None:
        if time.time() - self._written >= PARTIAL_EVERY_S:
            self.write(complete=False)

    def pytest_keyboard_interrupt(self) -> None:
        from harness.servers import cleanup

        self.mark_interrupted(cleanup.interrupted() or "KeyboardInterrupt")

    def mark_interrupted(self, by: str) -> None:
        """The test that was running when the run was interrupted has no verdict: it says so."""
        if self.interrupted is None:
            self.interrupted = {"by": by, "during": self.current}
        if self.current is not None:
            entry = self.checks.setdefault(self.current, {
                "id": self.current, "suite": _suite(self.current), "duration_s": 0.0, "values": {}})
            entry.update(verdict="interrupted", message=f"interrupted by {by} while it ran: no verdict")

    def finish(self, exitstatus: int) -> Path:
        """The final report.json, once the session's teardown is done (harness.plugin calls it)."""
        if exitstatus == pytest.ExitCode.INTERRUPTED and self.interrupted is None:
            self.mark_interrupted("KeyboardInterrupt")
        return self.write(complete=self.interrupted is None and self.collected is not None
                          and self.finished >= self.collected, exitstatus=int(exitstatus))

    def write(self, complete: bool, exitstatus: int | None = None) -> Path:
        """report.json, replaced atomically: `complete` is false until every selected test ran."""
        with self._write_lock:
            self.report_dir.mkdir(parents=True, exist_ok=True)
            payload = {
                "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "duration_s": round(time.time() - self.started, 1),
                "pytest_exit_status": exitstatus,
                "complete": complete,
                "collected": self.collected,
                "ran": self.finished,
                "interrupted": self.interrupted,
                "environment": {"python": platform.python_version(), "platform": platform.platform(),
                                **_library_versions(), **self.environment},
                "artifacts": dict(self.artifacts),
                "checks": [dict(c) for c in list(self.checks.values())],
            }
            path = self.report_dir / REPORT_NAME
            partial = path.with_name(f".{REPORT_NAME}.{os.getpid()}")
            partial.write_text(json.dumps(payload, indent=2, default=str))
            os.replace(partial, path)
            self._written = time.time()
            return path


def _headline(report: pytest.TestReport, lines: int = 12) -> str:
    """The assertion's own words (what was expected, what was found, where), not the traceback."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return "\n".join(text.splitlines()[:lines])


def _plain(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def _library_versions() -> dict:
    from importlib import metadata

    versions = {}
    for name in ("onnxruntime", "tritonclient", "nvidia-pytriton", "tensorrt", "torch"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions
