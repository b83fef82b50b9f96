"""Certification is judged from report.json alone, so any past run can be judged again under
another profile: required checks (patterns in a profile file) must pass, the run must have finished
(an interrupted run's report is INCOMPLETE, never certified, and says what ran), and coverage decides:
every model of the repository not declared `skip` must have been tested. A run that could not test some
(this host cannot serve them: a GPU, a backend, a module its Python lacks) is PARTIAL — "tested A of B
models; not tested: MODEL (needs ...; the way out)" — with its own exit status (EXIT_PARTIAL), unless the
profile accepts partial coverage (`accept_partial`, refused by --strict); a run that tested no model of the
repository is never certified."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.verdicts import NOT_BATCHING, SERVED_BY_ADAPTER

PROFILES = Path(__file__).parent / "profiles"
EXIT_PARTIAL = 6  # `yts certify`'s status for PARTIAL (pytest's own statuses are 0-5)


@dataclass
class Verdict:
    failing: list[dict] = field(default_factory=list)
    untested: list[dict] = field(default_factory=list)
    # required checks this host could not run for want of an optional tool (harness.verdicts.NOT_TESTED_HERE):
    # listed with the way to install it, never blocking
    not_tested_here: list[dict] = field(default_factory=list)
    # the run did not finish (report.json "complete": false): why, and how many checks ran with each verdict
    incomplete: str | None = None
    ran: dict[str, int] = field(default_factory=dict)
    # model -> why this host cannot serve it and the way out (report.json "not_servable_here"): its
    # checks are not tested here, blocking only in strict mode
    not_servable: dict[str, str] = field(default_factory=dict)
    host_limited: list[dict] = field(default_factory=list)  # required checks not tested on this host
    strict: bool = False
    models: dict = field(default_factory=dict)  # report.json "models": model -> suite -> verdict -> count
    declared_skip: list[str] = field(default_factory=list)  # models the manifest leaves out: not judged
    # coverage: the repository's models not declared skip, and those not tested (model -> reason, way out)
    repository_models: list[str] = field(default_factory=list)
    # required checks that do not concern the repository by its design (it does not batch): said, not judged
    by_design: list[dict] = field(default_factory=list)
    accept_partial: bool = False
    # model -> how it was served where the server lacks its backend (report.json "adapter_served":
    # harness.adapters): its checks judge the model's own file, not that backend
    adapter_served: dict[str, str] = field(default_factory=dict)
    # model -> why the ONNX Runtime adapter did not serve it (report.json "adapter_refused"): not tested, and
    # counted so in the coverage, though its checks block on their own
    unserved: dict[str, str] = field(default_factory=dict)
    # passing required checks that read a part they did not judge (report.json "not_tested_parts": masks)
    parts_not_tested: list[dict] = field(default_factory=list)

    @property
    def not_tested_models(self) -> dict[str, str]:
        return {m: r for m, r in {**self.not_servable, **self.unserved}.items()
                if m in self.repository_models or not self.repository_models}

    @property
    def nothing_tested(self) -> bool:
        """No model of the repository was tested (known only where the report lists its models)."""
        return bool(self.repository_models) and len(self.not_tested_models) == len(self.repository_models)

    @property
    def passing(self) -> bool:
        """Every required check passed (none ran: failing names the profile) and some model was tested."""
        return not self.failing and not self.untested and not self.nothing_tested

    @property
    def partial_coverage(self) -> bool:
        """Passing, but some model not tested, and the profile does not accept that (or --strict)."""
        return self.passing and bool(self.not_tested_models) and (self.strict or not self.accept_partial)

    @property
    def partial(self) -> bool:
        """PARTIAL: a finished run whose coverage the profile does not accept."""
        return self.partial_coverage and self.incomplete is None

    @property
    def certified(self) -> bool:
        return (self.passing and not self.partial_coverage and not (self.strict and self.host_limited)
                and self.incomplete is None)

    @property
    def coverage(self) -> str:
        if not self.repository_models:  # a report without the repository's list: the count is all it can say
            return f"{len(self.not_tested_models)} models not tested"
        tested = len(self.repository_models) - len(self.not_tested_models)
        return f"tested {tested} of {len(self.repository_models)} models"

    @property
    def exit_status(self) -> int:
        return 0 if self.certified else EXIT_PARTIAL if self.partial else 1

    def line(self) -> str:
        """The verdict a person acts on: a headline, then one line per failing check with its whole
        cause, the checks not tested grouped by reason, one line per model this host cannot serve."""
        lines = [self._headline()]
        lines += [f"  {c['verdict'].upper()} {c['id']}: {_one_line(c['message']) or 'no message'}" for c in self.failing]
        lines += [f"  {reason} ({_ids(checks)})" for reason, checks in _grouped(self.untested).items()]
        lines += [f"  {reason} ({_ids(checks)})" for reason, checks in _grouped(self.host_limited).items()]
        lines += [f"  not tested on this host, because {reason} (no check of it ran)"
                  for model, reason in self.not_servable.items() if not any(reason in c["message"] for c in self.host_limited)]
        lines += [f"  {reason} (harness's optional tool; does not block: {_ids(checks)})"
                  for reason, checks in _grouped(self.not_tested_here).items()]
        lines += [f"  {reason} (by design; does not block: {_ids(checks)})" for reason, checks in _grouped(self.by_design).items()]
        lines += [f"  {part} (a part these passes did not judge: {_ids(checks)})"
                  for part, checks in _grouped(self.parts_not_tested).items()]
        if self.adapter_served:
            lines.append(f"  {SERVED_BY_ADAPTER}: " + ", ".join(
                model + (label.removeprefix(SERVED_BY_ADAPTER) if label.startswith(SERVED_BY_ADAPTER) else f" ({label})")
                for model, label in self.adapter_served.items()))
        if self.declared_skip:
            lines.append(f"  excluded, declared skip: {', '.join(self.declared_skip)}")
        return "\n".join(lines)

    def _headline(self) -> str:
        if self.incomplete:
            what_ran = ", ".join(f"{n} {verdict}" for verdict, n in self.ran.items()) or "nothing"
            return f"INCOMPLETE: {self.incomplete}; not certified. What ran: {what_ran}"
        not_tested = "; not tested: " + "; ".join(self._not_servable_names() + [
            f"{model} ({_one_line(why.removeprefix('not tested: '))})" for model, why in self.unserved.items()])
        if self.partial:
            return f"PARTIAL: {self.coverage}{not_tested}" + (" (--strict)" if self.strict and self.accept_partial else "")
        if self.certified and self.not_tested_models:
            return f"CERTIFIED for what could be tested here (PARTIAL, accepted by the profile): {self.coverage}{not_tested}"
        if self.certified and self.host_limited:
            return "CERTIFIED for what could be tested here" + not_tested
        if self.certified and self.by_design:
            return "CERTIFIED: every required check passed; the repository does not use dynamic batching (by design)"
        if self.certified:
            return "CERTIFIED: every required check passed"
        causes = [f"{len(self.failing)} required check(s) failed"] if self.failing else []
        if self.untested:
            causes.append(f"{len(self.untested)} required check(s) not tested")
        if self.nothing_tested:
            causes.append(f"no model of the repository was tested ({self.coverage}){not_tested}")
        elif self.strict and (self.not_servable or self.host_limited):
            causes.append("strict: not tested on this host: " + "; ".join(self._not_servable_names()))
        return "NOT CERTIFIED: " + ", ".join(causes or ["nothing required passed"])

    def _not_servable_names(self) -> list[str]:
        """Each model this host cannot serve, with what it needs; each other check this host cannot run."""
        names = [f"{model} ({reason.removeprefix(model).removeprefix(chr(39) + 's').strip()})"
                 for model, reason in self.not_servable.items()]
        names += [c["id"].split("/")[-1] for c in self.host_limited
                  if c.get("model") not in self.not_servable and not any(m in c["message"] for m in self.not_servable)]
        return names

    def model_rows(self) -> list[str]:
        """One line per model: its suites' verdicts (the worst first)."""
        return [f"  {model}: " + "; ".join(f"{suite} " + ", ".join(f"{n} {v}" for v, n in cell.items())
                                          for suite, cell in suites.items())
                for model, suites in self.models.items()]


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in (message or "").splitlines() if part.strip())


def _grouped(checks: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for check in checks:
        groups.setdefault(_one_line(check["message"]) or check["verdict"], []).append(check)
    return groups


def _ids(checks: list[dict], shown: int = 4) -> str:
    names = [c["id"].split("/")[-1] for c in checks]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} check(s): " + ", ".join(names[:shown]) + more


def load_profile(name_or_path: str | Path = "certified") -> dict:
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES / f"{name_or_path}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"certification profile {name_or_path!r} not found (looked at {path})")
    return tomllib.loads(path.read_text())


def _matches(check_id: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(check_id, p) for p in patterns)


def judge(report: dict | Path, profile: dict, strict: bool | None = None) -> Verdict:
    """`strict` (default: the profile's `strict`): partial coverage is PARTIAL even under a profile that
    accepts it (`accept_partial`), and a check this host cannot run denies certification. Harness
    self-checks and checks that exercised no model of the repository (report.json "harness_self_check",
    "not_about_repository") are never required of the repository; a required check not applicable by the
    repository's design (it does not batch) is said, and fails only a profile with `require_batching`."""
    if not isinstance(report, dict):
        report = json.loads(Path(report).read_text())
    strict = profile.get("strict", False) if strict is None else strict
    skipped = set(report.get("declared_skip", []))
    required = [c for c in report["checks"] if _matches(c["id"], profile.get("required", []))
                and not c.get("harness_self_check") and not c.get("not_about_repository") and c.get("model") not in skipped]
    failing = [c for c in required if c["verdict"] in ("failed", "error")]
    by_design = [c for c in required if c["verdict"] == "not applicable" and c["message"].startswith(NOT_BATCHING)]
    if by_design and profile.get("require_batching"):
        failing.append({"id": "(profile: require_batching)", "verdict": "failed", "message":
                        f"the profile requires dynamic batching; {by_design[0]['message']} ({_ids(by_design)})"})
        by_design = []
    not_tested = [c for c in required if c["verdict"] == "not tested"]
    here = [c for c in not_tested if c.get("blocks_certification", True) is False]
    host_limited = [c for c in not_tested if c.get("host_limited")]
    untested = [c for c in not_tested if c not in here and c not in host_limited
                and not _matches(c["id"], profile.get("allowed_not_tested", []))]
    if not required:
        failing = [{"id": "(profile)", "verdict": "failed", "message": "no required check ran at all"}]
    return Verdict(
        failing, untested, here, _incomplete(report),
        dict(Counter(c["verdict"] for c in report["checks"]).most_common()),
        {m: r for m, r in report.get("not_servable_here", {}).items() if m not in skipped}, host_limited, strict,
        report.get("models", {}), sorted(skipped),
        repository_models=[m for m in report.get("repository_models", []) if m not in skipped],
        by_design=by_design, accept_partial=bool(profile.get("accept_partial", False)),
        adapter_served={m: r for m, r in report.get("adapter_served", {}).items() if m not in skipped},
        unserved={m: r for m, r in report.get("adapter_refused", {}).items() if m not in skipped},
        parts_not_tested=[{**c, "message": part} for c in required if c["verdict"] == "passed"
                          for part in c.get("not_tested_parts", [])])


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
