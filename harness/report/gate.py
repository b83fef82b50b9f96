"""Certification is judged from report.json alone, so any past run can be judged again under
another profile: required checks (patterns in a profile file) must pass."""

from __future__ import annotations

import fnmatch
import json
import tomllib
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

    def line(self) -> str:
        here = "".join(f"; {c['id']} {c['message'].splitlines()[0]}" for c in self.not_tested_here)
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
    return Verdict(certified, failing, untested, here)
