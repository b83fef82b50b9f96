"""Every check's verdict, measured values and thresholds, collected while pytest runs and written as
report.json at the end — the raw record that the certification gate and the HTML are judged from
(MLPerf's habit: the run writes results first, verifiers read them later).

A run that does not finish still leaves a report: report.json is rewritten between tests (at most every
PARTIAL_EVERY_S) with "complete": false, so even a run killed outright leaves what it had; an interrupted
run (Ctrl-C, SIGTERM) writes its final one marked incomplete, with the test it was in and how many ran."""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import threading
import time
from pathlib import Path

import pytest

from harness.session import Coverage, manifest_for, source_repository
from harness.verdicts import NOT_APPLICABLE, NOT_SERVABLE_HERE, NOT_TESTED_HERE

REPORT_NAME = "report.json"
PARTIAL_EVERY_S = 1.0
# Checks of the harness's own parts, not of the repository under test: the local properties of our
# letterbox, the accuracy of our own FP16/INT8 variants, our load generator's overhead and fidelity.
# Reported apart ("harness self-checks"); never a vendor's pass or failure.
LOCAL_LETTERBOX = ("suites/letterbox/test_forward.py::*", "suites/letterbox/test_inverse.py::*")
OWN_LETTERBOX = "harness.vision.letterbox:LETTERBOX"  # judged locally unless --letterbox-impl names another
HARNESS_SELF_CHECKS = (
    *LOCAL_LETTERBOX,
    "suites/accuracy/*[[]variant:*]",
    "suites/batching/test_batching.py::test_harness_overhead*",
    "suites/batching/test_batching.py::test_generator_fidelity*",
)
# Checks of the server and of the harness's launcher, never of the repository's models: Triton's own
# metadata, the process launcher's warning. Reported apart ("(not about the repository)"), never the
# repository's passes; so is every other check of the whole server (no model parameter) while that server
# served no model of the repository (health and metadata of an empty server say nothing of it).
SERVER_CHECKS = (
    "suites/protocol/test_health.py::test_server_metadata*",
    "suites/protocol/test_untrusted.py::test_process_mode_warns_model_code_runs_on_host*",
)
NOT_ABOUT_REPOSITORY = "(not about the repository)"
SERVED_THROUGH = "served_through"  # a check's value: the adapter that served its model (harness.adapters)
EMPTY_PARAMETERS = "got empty parameter set"  # pytest's words for a parametrize with nothing to run on
# severity order of a suite's verdicts for one model: the worst shows in its row
SEVERITY = ("error", "failed", "interrupted", "not tested", "passed", "not applicable")


def _suite(item_nodeid: str) -> str:
    parts = item_nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "suites" else "other"


class ReportCollector:
    """A pytest plugin object: one per run, registered by harness.plugin when --report-dir is given."""

    def __init__(self, report_dir: Path, coverage: Coverage):
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
        self.self_checks = HARNESS_SELF_CHECKS
        self.coverage = coverage  # what was served and why not: harness.session.Coverage, filled by the run

    def add_environment(self, **values) -> None:
        self.environment.update({k: v for k, v in values.items() if v is not None})

    def add_artifacts(self, hashes: dict[str, str]) -> None:
        self.artifacts.update(hashes)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.checks.get(report.nodeid)
        if entry is None:
            entry = self.checks[report.nodeid] = {
                "id": _display_id(report.nodeid), "suite": _suite(report.nodeid), "verdict": "passed",
                "duration_s": 0.0, "message": "", "values": {}}
            if report.nodeid in self.coverage.models:
                entry["model"] = self.coverage.models[report.nodeid]
            if any(fnmatch.fnmatch(report.nodeid, p) for p in self.self_checks):
                entry["harness_self_check"] = True
            elif any(fnmatch.fnmatch(report.nodeid, p) for p in SERVER_CHECKS) or (
                    report.nodeid in self.coverage.uses_server and self.coverage.served == set()):
                entry["not_about_repository"] = True
        entry["duration_s"] += report.duration
        entry["values"].update({k: _plain(v) for k, v in report.user_properties})
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            if reason.startswith(NOT_APPLICABLE):
                entry["verdict"], entry["message"] = "not applicable", reason
            elif reason.startswith(EMPTY_PARAMETERS):  # parametrized over models, and none fits
                entry["verdict"] = "not applicable"
                entry["message"] = NOT_APPLICABLE + "no model of this repository for this check"
            elif reason.startswith(NOT_SERVABLE_HERE):  # a model this host cannot serve (harness.availability)
                entry["verdict"], entry["message"], entry["host_limited"] = "not tested", reason, True
            else:
                entry["verdict"] = "not tested"
                entry["message"] = reason if reason.startswith("not tested") else "not tested, because " + reason
                if reason.startswith(NOT_TESTED_HERE):  # an optional tool is absent: listed, never blocking
                    entry["blocks_certification"] = False
        elif report.failed:
            entry["verdict"] = "failed" if report.when == "call" else "error"
            entry["message"] = _headline(report)
        label = self.coverage.adapter_served.get(entry.get("model")) or self._server_label(report.nodeid)
        if label:  # every check of a model served through the adapter says so, its failures in their message
            entry["values"][SERVED_THROUGH] = label
            if entry["verdict"] in ("failed", "error", "not tested") and label not in entry["message"]:
                entry["message"] += f" [{label}]"

    def pytest_warning_recorded(self, warning_message, when: str, nodeid: str, location) -> None:
        """A part a passing check read but did not judge (harness.checks.findings.NotTestedWarning: a
        segmentation head's masks) goes into that check's record, so report.json and the verdict say it."""
        from harness.checks.findings import NotTestedWarning

        entry = self.checks.get(nodeid)
        if entry is not None and issubclass(warning_message.category, NotTestedWarning):
            parts = entry.setdefault("not_tested_parts", [])
            if str(warning_message.message) not in parts:
                parts.append(str(warning_message.message))

    def _server_label(self, nodeid: str) -> str | None:
        """A check of the whole server (no model parameter) while it serves models through the adapter:
        which, and how ("yolo_onnx: served through the ONNX Runtime adapter; ...")."""
        record = self.coverage
        through = sorted(set(record.served or ()) & set(record.adapter_served)) if nodeid in record.uses_server else []
        return "; ".join(f"{model}: {record.adapter_served[model]}" for model in through) or None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)
        record = self.coverage
        record.models = _models_of(session)
        record.repository_models = _repository_models(session)
        record.uses_server = {item.nodeid for item in session.items
                              if "triton_server" in item.fixturenames and item.nodeid not in record.models}
        record.declared_skip = _declared_skip(session)
        if session.config.getoption("letterbox_impl", default=OWN_LETTERBOX) != OWN_LETTERBOX:
            # the local letterbox checks judge the user's implementation: theirs, not a self-check
            self.self_checks = tuple(p for p in HARNESS_SELF_CHECKS if p not in LOCAL_LETTERBOX)
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
                "not_servable_here": dict(self.coverage.not_servable),
                "adapter_served": dict(self.coverage.adapter_served),
                "adapter_refused": dict(self.coverage.adapter_refused),
                "declared_skip": list(self.coverage.declared_skip),
                "repository_models": list(self.coverage.repository_models),
                "models": by_model(self.checks.values()),
                "checks": [dict(c) for c in list(self.checks.values())],
            }
            path = self.report_dir / REPORT_NAME
            partial = path.with_name(f".{REPORT_NAME}.{os.getpid()}")
            partial.write_text(json.dumps(payload, indent=2, default=str))
            os.replace(partial, path)
            self._written = time.time()
            return path


def _display_id(nodeid: str) -> str:
    """The test id without pytest's placeholder for an empty parameter set."""
    return nodeid.replace("[NOTSET]", "")


def _models_of(session: pytest.Session) -> dict[str, str]:
    """Test id -> model, for the checks of the suites parametrized by a model of the repository."""
    suites = [item for item in session.items if _suite(item.nodeid) != "other"]
    if not suites:
        return {}
    from harness.availability import model_of
    from harness.checks import list_models

    try:
        models = set(list_models(source_repository(session.config)))
    except Exception:  # no repository under test (the suites say why)
        return {}
    return {item.nodeid: model for item in suites if (model := model_of(item, models)) is not None}


def _repository_models(session: pytest.Session) -> list[str]:
    """Every model of the repository under test (Triton's: each subdirectory): what coverage counts."""
    if not any(_suite(item.nodeid) != "other" for item in session.items):
        return []
    from harness.checks import list_models

    try:
        return list_models(source_repository(session.config))
    except Exception:  # no repository under test (the suites say why)
        return []


def _declared_skip(session: pytest.Session) -> list[str]:
    """Models the manifest (or --model NAME=skip) leaves out: excluded from the verdict, never blocking."""
    if not any(_suite(item.nodeid) != "other" for item in session.items):
        return []
    try:
        manifest = manifest_for(session.config)
    except Exception:  # no repository under test
        return []
    return sorted(name for name in manifest.models if manifest.skipped(name))


def by_model(checks) -> dict[str, dict[str, dict[str, int]]]:
    """Model -> suite -> verdict -> count: one row per model ("(repository)" for checks of the whole
    server, "(harness self-checks)" and "(not about the repository)" apart), in the severity order."""
    rows: dict[str, dict[str, dict[str, int]]] = {}
    for check in checks:
        row = "(harness self-checks)" if check.get("harness_self_check") else \
            NOT_ABOUT_REPOSITORY if check.get("not_about_repository") else check.get("model", "(repository)")
        cell = rows.setdefault(row, {}).setdefault(check["suite"], {})
        cell[check["verdict"]] = cell.get(check["verdict"], 0) + 1
    return {row: {suite: dict(sorted(cell.items(), key=lambda kv: SEVERITY.index(kv[0]) if kv[0] in SEVERITY else 0))
                  for suite, cell in sorted(suites.items())}
            for row, suites in sorted(rows.items(), key=lambda kv: (kv[0].startswith("("), kv[0]))}


def _headline(report: pytest.TestReport, lines: int = 40) -> str:
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
