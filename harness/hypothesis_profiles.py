"""Named hypothesis settings profiles, chosen by $YTS_HYPOTHESIS_PROFILE (default "ci").

"ci": derandomized (the same examples on every run, so a red build is reproducible and never flaky),
no example database (nothing written into the checkout), few examples so the local properties stay
under a minute on two cores. "deep": many random examples for a night run, with the failure database
kept in the harness cache (outside the repository) so found counter-examples are replayed first.
"""

from __future__ import annotations

import os
import time

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ENV_VAR = "YTS_HYPOTHESIS_PROFILE"
DEFAULT = "ci"
# Drawing an 8K frame is slow by hypothesis' standards; that is the point of the size strategies.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def register_profiles() -> None:
    from harness.paths import cache_dir

    settings.register_profile(
        "ci", derandomize=True, database=None, max_examples=25, deadline=None,
        suppress_health_check=_SLOW_OK, print_blob=True,
    )
    settings.register_profile(
        "deep", derandomize=False, max_examples=2000, deadline=None, suppress_health_check=_SLOW_OK,
        database=DirectoryBasedExampleDatabase(str(cache_dir("hypothesis"))), print_blob=True,
    )


def load_profile(name: str | None = None) -> str:
    """Register the profiles and load `name`, else $YTS_HYPOTHESIS_PROFILE, else "ci"."""
    register_profiles()
    name = name or os.environ.get(ENV_VAR, DEFAULT)
    try:
        settings.load_profile(name)
    except Exception as error:  # hypothesis raises InvalidArgument with a terse text
        raise ValueError(f"${ENV_VAR}={name!r} is not a profile; choose 'ci' or 'deep'") from error
    return name


# -- properties whose examples are server round trips ----------------------------------------------
# A served example costs a request (0.1-3 s on CPU), and a model that misses objects makes the property
# reject example after example: hypothesis then draws up to ~460 + 100 per valid example before it
# gives up, and shrinks a failure for up to 5 minutes. Served properties therefore run under
# `served_settings()` (bounded examples, no explain phase) and a TimeBudget (wall clock).
SERVED_EXAMPLES = {"ci": 12, "deep": 300}
SERVED_BUDGET_S = {"ci": 120.0, "deep": 1800.0}  # drawing and sending new examples
SERVED_SHRINK_S = {"ci": 45.0, "deep": 300.0}  # shrinking, counted from the first failure
BUDGET_ENV = "YTS_SERVED_BUDGET_S"  # overrides the drawing budget, e.g. 30 for a quick look, 3600 for a night
SHRINK_ENV = "YTS_SERVED_SHRINK_S"  # overrides the shrinking budget


def _profile_name() -> str:
    return os.environ.get(ENV_VAR, DEFAULT)


def served_examples() -> int:
    return SERVED_EXAMPLES.get(_profile_name(), SERVED_EXAMPLES[DEFAULT])


def served_settings(max_examples: int | None = None, **overrides) -> settings:
    """Settings for a property on a served model, on top of the loaded profile: the profile's (or the
    given) small number of examples; no per-example deadline (it is measured after the example returns,
    so it cannot stop a hanging request — the client's request timeout does — and it would fail a model
    that is correct but slow); no explain phase (more round trips after a failure was found); the
    rejections a missing object causes are expected, not a health problem. Bound the wall clock with a
    TimeBudget inside the test."""
    from hypothesis import Phase

    return settings(
        parent=settings.default,
        max_examples=max_examples or served_examples(),
        deadline=None,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
        suppress_health_check=[*settings.default.suppress_health_check, HealthCheck.filter_too_much,
                               HealthCheck.too_slow],
        **overrides,
    )


class TimeBudget:
    """A wall-clock bound on a hypothesis property whose examples are expensive (server round trips).

    Wrap each example's expensive part: `budget.run(key, check)` where `key` identifies the drawn
    example (its repr) and `check()` sends it and asserts. Until `seconds` have passed it runs the
    check; after that, new examples are rejected at once (no request), so hypothesis' generation ends
    within a few hundred cheap rejections. Once an example fails, shrinking may send new examples for
    `shrink_seconds` more, then it too only sees rejections and ends with the smallest failure found
    so far; examples already run are answered from the record (the same exception object), so
    hypothesis' final replay of the failing example reproduces it without a request and the failure is
    reported, never "flaky"; what the check wrote with `budget.note(text)` is noted again on a replay,
    so the report shows it. `stop(reason)` ends drawing early (e.g. a verdict already certain).

    The property takes at most seconds + shrink_seconds + one example's time, plus hypothesis' own
    bookkeeping for the rejected draws."""

    def __init__(self, seconds: float | None = None, shrink_seconds: float | None = None, clock=time.monotonic):
        profile = _profile_name()
        if seconds is None:
            override = os.environ.get(BUDGET_ENV)
            seconds = float(override) if override else SERVED_BUDGET_S.get(profile, SERVED_BUDGET_S[DEFAULT])
        self.seconds = float(seconds)
        if shrink_seconds is None:
            override = os.environ.get(SHRINK_ENV)
            shrink_seconds = float(override) if override else SERVED_SHRINK_S.get(profile, SERVED_SHRINK_S[DEFAULT])
        self.shrink_seconds = float(shrink_seconds)
        self.clock = clock
        self.started = clock()
        self.ran = 0  # examples whose check ran (requests sent)
        self.rejected = 0  # new examples turned away because the budget was spent
        self.replayed = 0
        self.first_failure_at: float | None = None
        self.stopped_because: str | None = None
        self._outcomes: dict[str, tuple[bool, object]] = {}
        self._notes: dict[str, list[str]] = {}
        self._current: str | None = None

    # -- state --
    def elapsed(self) -> float:
        return self.clock() - self.started

    def stop(self, reason: str) -> None:
        if self.stopped_because is None:
            self.stopped_because = reason

    def spent(self) -> str | None:
        """Why no new example may run, or None while it may."""
        if self.stopped_because:
            return self.stopped_because
        now = self.clock()
        if self.first_failure_at is not None:
            if now - self.first_failure_at >= self.shrink_seconds:
                return f"shrink budget of {self.shrink_seconds:g} s spent"
            return None
        if now - self.started >= self.seconds:
            return f"time budget of {self.seconds:g} s spent"
        return None

    def describe(self) -> str:
        why = self.stopped_because or self.spent()
        return (f"{self.ran} examples sent in {self.elapsed():.1f} s"
                + (f", then stopped drawing ({why}; {self.rejected} further draws turned away)" if why else ""))

    # -- the wrapper --
    def note(self, text: str) -> None:
        """hypothesis.note(text), remembered for the running example so a replay notes it again."""
        from hypothesis import note

        if self._current is not None:
            self._notes.setdefault(self._current, []).append(text)
        note(text)

    def run(self, key, check):
        from hypothesis import note, reject

        key = key if isinstance(key, str) else repr(key)
        if key in self._outcomes:
            self.replayed += 1
            for text in self._notes.get(key, ()):
                note(text)
            failed, value = self._outcomes[key]
            if failed:
                raise value
            return value
        if self.spent() and not _final_replay():
            self.rejected += 1
            reject()
        self.ran += 1
        self._current, self._notes[key] = key, []
        try:
            value = check()
        except BaseException as error:
            from hypothesis.errors import UnsatisfiedAssumption

            if isinstance(error, UnsatisfiedAssumption):
                raise
            if self.first_failure_at is None and isinstance(error, Exception):
                self.first_failure_at = self.clock()
            self._outcomes[key] = (True, error)
            raise
        finally:
            self._current = None
        self._outcomes[key] = (False, value)
        return value


def _final_replay() -> bool:
    """True while hypothesis replays the failing example to report it (it must run, budget or not)."""
    try:
        from hypothesis.control import current_build_context

        return bool(getattr(current_build_context(), "is_final", False))
    except Exception:
        return False
