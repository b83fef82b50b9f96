"""Verdicts on a traffic record. Each returns a list of problems (empty = conforming); a problem says
what was expected, what was found, and one example response, so a failure reads without a debugger."""

from __future__ import annotations

import re
from collections import Counter

from harness.lifecycle.traffic import Record, Response

# What a client may see while a model is deliberately unloaded (stress cycles): Triton 2.5x's messages
# for a model or version that is, for the moment, not there. Anything else is a real error.
TRANSIENT_ERRORS = re.compile(
    r"has no available versions|Request for unknown model|is not found|is not ready|not at ready state"
    r"|unavailable|UNAVAILABLE"
)
MIN_TAIL = 100  # answers after a switch-over that make "only the new version answers" a measurement


def _example(response: Response, t0: float) -> str:
    where = f"client {response.client}, sent at +{response.sent - t0:.3f} s"
    return f"{where}: {response.error or 'v' + response.version}"


def _t0(record: Record) -> float:
    return record.responses[0].sent if record.responses else 0.0


def ready_mark(version: str) -> str:
    """The record's mark for the instant `version` was seen READY (harness.lifecycle.scenario sets it)."""
    return f"version {version} reported READY"


def _ready_marks(record: Record) -> list[tuple[float, str]]:
    return sorted((at, label[len("version "):-len(" reported READY")]) for label, at in record.marks.items()
                  if label.startswith("version ") and label.endswith(" reported READY"))


def no_failures(record: Record, during: str) -> list[str]:
    """No request failed. Failed ones are told apart by cause, each cause once: those sent after a version
    was marked READY and before it gave its first answer (before the next version's mark, if it gave none):
    it reported READY before it could answer; of the rest, those sent before the test's action ("load
    posted"), in the state the test starts from — the reload that gave it its baseline — not in what it
    tests; the rest `during` the action."""
    failed = record.failed
    if not failed:
        return []
    t0, total = _t0(record), len(record.responses)
    last_sent = record.responses[-1].sent
    posted = record.marks.get("load posted", float("-inf"))  # no action marked: every failure is `during`
    lines: list[str] = []
    marks = _ready_marks(record)
    for (at, version), (following, _) in zip(marks, marks[1:] + [(float("inf"), "")]):
        first = min((r.done for r in record.responses if r.ok and r.version == version and r.sent >= at), default=None)
        early = [r for r in failed if at <= r.sent < min(first or following, following)]
        if not early:
            continue
        taken = set(map(id, early))
        failed = [r for r in failed if id(r) not in taken]
        where = "in the (re)load this test starts from" if at < posted else "once the test's load returned"
        then = (f"it answered from {first - t0:+.3f} s on: it reported READY before it could answer" if first is not None
                else f"it answered none up to {min(following, last_sent) - t0:+.3f} s")
        lines += _failure_lines(early, total, t0, f"right after version {version} reported READY ({where}, at "
                                f"{at - t0:+.3f} s); {then}")
    before = [r for r in failed if r.sent < posted]
    if before:
        lines += _failure_lines(before, total, t0, f"before this test's action (posted at {posted - t0:+.3f} s), in "
                                f"the state the test starts from — not {during}")
    after = [r for r in failed if r.sent >= posted]
    if after:
        lines += _failure_lines(after, total, t0, f"{during} (expected 0)")
    return lines


def _failure_lines(failed: list[Response], total: int, t0: float, cause: str) -> list[str]:
    kinds = Counter(r.error.splitlines()[0][:160] for r in failed)
    lines = [f"{len(failed)} of {total} requests failed {cause}:"]
    lines += [f"  {n} × {message}" for message, n in kinds.most_common(3)]
    lines.append(f"  first: {_example(failed[0], t0)}; last sent at {failed[-1].sent - t0:+.3f} s")
    return lines


def enough_traffic(record: Record, minimum: int, during: str) -> list[str]:
    if len(record.responses) >= minimum:
        return []
    return [f"only {len(record.responses)} requests were answered {during}; the verdict needs ≥ {minimum} "
            "(is the server overloaded, or is the traffic not reaching it?)"]


def only_versions(record: Record, allowed: set[str], during: str) -> list[str]:
    stray = [r for r in record.responses if r.ok and r.version not in allowed]
    if not stray:
        return []
    seen = Counter(r.version for r in stray)
    return [f"{len(stray)} responses {during} came from versions {dict(seen)}; only {sorted(allowed)} may "
            f"answer; first: {_example(stray[0], _t0(record))}"]


def switch_over(record: Record, old: str, new: str, loaded_at: float, bound_s: float,
                min_tail: int = MIN_TAIL) -> tuple[list[str], dict[str, float]]:
    """Triton routes a request when it arrives: once the load returned, new requests go to the new
    version and the old one only finishes what it had queued. So: the last request the old version
    answered was sent within `bound_s` of the load returning (the cut-over), every request sent after
    it was answered by the new version, and there are at least `min_tail` of those (so "only new" is
    a measurement, not an empty set). How long the old one took to drain is reported, not judged."""
    answered = [r for r in record.responses if r.ok]
    old_answers = [r for r in answered if r.version == old]
    new_answers = [r for r in answered if r.version == new]
    last_old = max(old_answers, key=lambda r: r.sent) if old_answers else None
    numbers = {
        "cutover_s": (last_old.sent - loaded_at) if last_old else 0.0,
        "drain_s": (max(r.done for r in old_answers) - loaded_at) if old_answers else 0.0,
        "first_new_after_post_s": (new_answers[0].sent - record.marks.get("load posted", loaded_at))
        if new_answers else float("nan"),
    }
    if not new_answers:
        after = [r for r in record.responses if r.sent >= loaded_at]
        if after and not any(r.ok for r in after):
            return [], numbers  # every request after the load failed: no_failures names that cause, once
        return [f"version {new} never answered an unversioned request after its load returned "
                f"({len(answered)} answers, versions {dict(record.per_version())})"], numbers
    problems = []
    if numbers["cutover_s"] > bound_s:
        problems.append(f"version {old} still answered a request sent {numbers['cutover_s']:.3f} s after version "
                        f"{new}'s load returned (bound {bound_s} s); {_example(last_old, _t0(record))}")
    cut = last_old.sent if last_old else loaded_at
    tail = [r for r in answered if r.sent > cut]
    stray = [r for r in tail if r.version != new]
    if stray:
        problems.append(f"after the switch-over, {len(stray)} answers came from versions "
                        f"{dict(Counter(r.version for r in stray))}, not {new}; first: {_example(stray[0], _t0(record))}")
    if len(tail) < min_tail:
        problems.append(f"only {len(tail)} answers after the switch-over (need ≥ {min_tail} to say only version "
                        f"{new} answers from then on)")
    return problems, numbers


def transient_only(record: Record) -> list[str]:
    odd = [r for r in record.failed if not TRANSIENT_ERRORS.search(r.error)]
    if not odd:
        return []
    kinds = Counter(r.error.splitlines()[0][:160] for r in odd)
    return [f"{len(odd)} errors are not the documented transient 'model not available' kind:"] + \
        [f"  {n} × {message}" for message, n in kinds.most_common(3)]


def dependents_served(dependents: dict[str, Record], during: str, minimum: int = 20) -> list[str]:
    """Every ensemble that uses the reloaded model answered all its requests through the switch, and
    enough of them to say so (issue 25: a reload must not break the pipelines built on the model)."""
    problems = []
    for ensemble, record in dependents.items():
        problems += no_failures(record, f"by ensemble {ensemble!r} (it uses the model) {during}")
        problems += enough_traffic(record, minimum, f"by ensemble {ensemble!r} {during}")
    return problems


def dependent_counts(dependents: dict[str, Record]) -> dict[str, int]:
    """Sent and failed per ensemble, for the report."""
    return {f"{ensemble}_{key}": n for ensemble, record in dependents.items()
            for key, n in record.counts().items() if key in ("sent", "failed")}
