"""Certification is judged from report.json alone, so any past run can be judged again under
another profile: required checks (patterns in a profile file) must pass, and the run must have finished
(an interrupted run's report is INCOMPLETE, never certified, and says what ran)."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PROFILES = Path(__file__).parent / "profiles"


@dataclass
class Verdict:
    certified: bool
    failing: list[dict] = field(default_factory=list)
    untested: list[dict] = field(default_factory=list)
    # required checks this host could not run for want of an optional tool (harness.verdicts.NOT_TESTED_HERE):
    # listed with the way to install it, never blocking
    not_tested_here: list[dict] = field(default_factory=list)
    # the run did not finish (report.json "complete": false): why, and how many checks ran with each verdict
    incomplete: str | None = None
    ran: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        here = "".join(f"; {c['id']} {c['message'].splitlines()[0]}" for c in self.not_tested_here)
        if self.incomplete:
            parts = [f"{c['id']} ({c['verdict']}: {c['message'].splitlines()[0] if c['message'] else 'no message'})"
                     for c in self.failing]
            what_ran = ", ".join(f"{n} {verdict}" for verdict, n in self.ran.items()) or "nothing"
            return (f"INCOMPLETE: {self.incomplete}; not certified. What ran: {what_ran}"
                    + (f"; failing so far: {'; '.join(parts)}" if parts else "") + here)
        if self.certified:
            return "CERTIFIED: every required check passed" + here
        parts = [f"{c['id']} ({c['verdict']}: {c['message'].splitlines()[0] if c['message'] else 'no message'})"
                 for c in self.failing + self.untested]
        return f"NOT CERTIFIED: {len(parts)} required check(s) did not pass: " + "; ".join(parts) + here


def load_profile(name_or_path: str | Path = "certified") -> dict:
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES / f"{name_or_path}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"certification profile {name_or_path!r} not found (looked at {path})")
    return tomllib.loads(path.read_text())


def _matches(check_id: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(check_id, p) for p in patterns)


def judge(report: dict | Path, profile: dict) -> Verdict:
    if not isinstance(report, dict):
        report = json.loads(Path(report).read_text())
    required = [c for c in report["checks"] if _matches(c["id"], profile.get("required", []))]
    failing = [c for c in required if c["verdict"] in ("failed", "error")]
    not_tested = [c for c in required if c["verdict"] == "not tested"]
    here = [c for c in not_tested if c.get("blocks_certification", True) is False]
    untested = [c for c in not_tested if c not in here
                and not _matches(c["id"], profile.get("allowed_not_tested", []))]
    certified = bool(required) and not failing and not untested
    if not required:
        failing = [{"id": "(profile)", "verdict": "failed", "message": "no required check ran at all"}]
    incomplete = _incomplete(report)
    ran = dict(Counter(c["verdict"] for c in report["checks"]).most_common())
    return Verdict(certified and incomplete is None, failing, untested, here, incomplete, ran)


def _incomplete(report: dict) -> str | None:
    """Why the run behind `report` did not finish, or None when it did (reports from before the field
    existed were complete)."""
    if report.get("complete", True):
        return None
    ran, collected = report.get("ran", len(report["checks"])), report.get("collected")
    of = f"{ran} of {collected} tests" if collected is not None else f"{ran} tests"
    interrupted = report.get("interrupted")
    if interrupted:
        during = f" (during {interrupted['during']})" if interrupted.get("during") else ""
        return f"interrupted by {interrupted['by']} after {of}{during}"
    if report.get("pytest_exit_status") is None:
        return f"the run died after {of} (this is the last report it wrote while running)"
    return f"the run stopped after {of} (pytest exit status {report['pytest_exit_status']})"
