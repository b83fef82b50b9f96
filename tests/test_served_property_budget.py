"""Hypothesis properties on a served model are bounded in time (issue #25: the served letterbox property
ran 324 s on a model that misses objects). The mechanism, harness.hypothesis_profiles.TimeBudget with
served_settings, on local functions that stand in for a server round trip: a slow model that misses
everything stops drawing at its budget instead of at hypothesis' ~460 rejections; a slow failing model
is reported (its assertion, the falsifying example) once the shrink budget is spent, never as "flaky";
a correct model passes on its examples. suites/letterbox/test_served.py runs its property this way.
About 10 s."""

from __future__ import annotations

import time

import pytest
from hypothesis import Phase, assume, given
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from harness.hypothesis_profiles import TimeBudget, load_profile, served_examples, served_settings
from tests.conftest import load_module

load_profile()  # as the suites do: "ci" (derandomized, no example database) unless $YTS_HYPOTHESIS_PROFILE

ROUND_TRIP_S = 0.05  # what one "request" costs here


def quiet(**overrides):
    """The served settings, derandomized and without a database (nothing written into the checkout)."""
    return served_settings(derandomize=True, database=None, **overrides)


def test_served_settings_bound_examples_and_skip_the_explain_phase(monkeypatch):
    monkeypatch.setenv("YTS_HYPOTHESIS_PROFILE", "ci")
    s = quiet()
    assert s.max_examples == served_examples() == 12  # the ci profile's
    assert s.deadline is None
    assert Phase.explain not in s.phases and Phase.shrink in s.phases and Phase.generate in s.phases
    assert quiet(max_examples=3).max_examples == 3


def test_a_slow_model_that_misses_everything_stops_at_its_budget():
    budget = TimeBudget(seconds=1.0, shrink_seconds=1.0)
    sent = []

    def miss(x):
        time.sleep(ROUND_TRIP_S)
        sent.append(x)
        return "missed"

    @quiet()
    @given(st.integers(0, 10**6))
    def prop(x):
        assume(budget.run(x, lambda: miss(x)) is None)

    started = time.monotonic()
    with pytest.raises(Unsatisfiable):
        prop()
    took = time.monotonic() - started
    # unbounded, hypothesis would send ~460 examples (23 s here) before giving up
    assert took < 1.0 + 5.0, f"took {took:.1f} s"
    assert 5 <= len(sent) <= 1.0 / ROUND_TRIP_S + 1, len(sent)
    assert budget.rejected > 0 and "time budget of 1 s spent" in budget.describe()


def test_a_slow_failing_model_is_reported_after_the_shrink_budget_not_flaky():
    budget = TimeBudget(seconds=30.0, shrink_seconds=0.5)

    def check(values):
        time.sleep(ROUND_TRIP_S)
        assert sum(values) < 1000, f"sum {sum(values)} >= 1000"

    @quiet()
    @given(st.lists(st.integers(0, 10**4), min_size=1, max_size=30))
    def prop(values):
        budget.run(values, lambda: check(values))

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"sum \d+ >= 1000") as raised:
        prop()
    took = time.monotonic() - started
    assert took < 0.5 + 5.0, f"took {took:.1f} s (shrinking was meant to stop 0.5 s after the first failure)"
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "Failing test case: prop(" in notes, notes  # the example is reported, shrunk as far as the budget went
    assert budget.first_failure_at is not None and budget.replayed >= 1  # the final replay sent nothing


def test_the_failure_found_is_still_shrunk_while_budget_remains():
    budget = TimeBudget(seconds=30.0, shrink_seconds=30.0)

    @quiet()
    @given(st.integers(0, 10**6))
    def prop(x):
        budget.run(x, lambda: _assert_below(x, 500))

    with pytest.raises(AssertionError, match=r"^500 >= 500"):
        prop()


def _assert_below(x: int, bound: int) -> None:
    assert x < bound, f"{x} >= {bound}"


def test_a_correct_model_passes_on_its_examples():
    budget = TimeBudget(seconds=30.0, shrink_seconds=5.0)

    @quiet(max_examples=5)
    @given(st.integers(0, 100))
    def prop(x):
        budget.run(x, lambda: _assert_below(x, 1000))

    prop()
    assert 1 <= budget.ran <= 5 and budget.rejected == 0


def test_budget_on_a_fake_clock_and_stop():
    now = [0.0]
    budget = TimeBudget(seconds=35.0, shrink_seconds=15.0, clock=lambda: now[0])

    def tick():
        now[0] += 10.0

    @quiet(max_examples=50)
    @given(st.integers(0, 10**6))
    def prop(x):
        budget.run(x, tick)

    prop()
    assert budget.ran == 4, budget.describe()  # at 0, 10, 20, 30 s; at 40 s the budget is spent

    stopped = TimeBudget(seconds=1000.0, shrink_seconds=10.0, clock=lambda: 0.0)
    stopped.stop("verdict already certain")

    @quiet(max_examples=50)
    @given(st.integers(0, 10**6))
    def never(x):
        stopped.run(x, lambda: None)

    with pytest.raises(Unsatisfiable):
        never()
    assert stopped.ran == 0 and "verdict already certain" in stopped.describe()


# -- the served letterbox property itself, with a stand-in for the server --------------------------
def _served_module():
    from harness.paths import PROJECT_ROOT

    return load_module(PROJECT_ROOT / "suites" / "letterbox" / "test_served.py")


class _Model:
    name, imgsz, stride = "stand_in", (640, 640), 32


class _Client:
    """detect(encoded) after a round trip's delay: nothing (a blind model) or one box per class at the
    top-left corner (a model whose boxes never map back)."""

    def __init__(self, rows):
        self.rows, self.calls = rows, 0

    def detect(self, encoded: bytes):
        import numpy as np

        self.calls += 1
        time.sleep(ROUND_TRIP_S)
        return np.asarray(self.rows, dtype=np.float64).reshape(-1, 6)


def test_served_property_on_a_blind_model_stops_once_the_verdict_is_certain(monkeypatch):
    monkeypatch.setenv("YTS_HYPOTHESIS_PROFILE", "ci")
    module = _served_module()
    client = _Client([])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"stand_in missed 5 of 5 drawn objects .*5 objects missed: more than 25%"):
        module.test_returned_box_maps_back_to_the_drawn_object((_Model(), client))
    assert client.calls == 5, client.calls  # 12 examples in CI: 5 misses decide it, nothing more is sent
    assert time.monotonic() - started < 30


def test_served_property_on_a_wrong_model_is_reported_within_its_shrink_budget(monkeypatch):
    monkeypatch.setenv("YTS_HYPOTHESIS_PROFILE", "ci")
    monkeypatch.setenv("YTS_SERVED_SHRINK_S", "2")
    module = _served_module()
    client = _Client([[0, 0, 4, 4, 0.9, c] for c in range(6)])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"stand_in, source \d+x\d+ .* does not map back") as raised:
        module.test_returned_box_maps_back_to_the_drawn_object((_Model(), client))
    took = time.monotonic() - started
    assert took < 2 + 20, f"took {took:.1f} s"
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "Failing test case" in notes and "(w x h)" in notes, notes  # with the note the check wrote, replayed
