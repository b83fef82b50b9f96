"""Issue 9, point 2: rolling back N+1 — removing its directory, or pinning `specific { versions: [N] }`
with N+1 left on disk — under the same traffic: zero failed requests, N answers again, promptly."""

from __future__ import annotations

import pytest

from harness.lifecycle import checks
from harness.lifecycle.scenario import under_traffic
from harness.servers import wait

pytestmark = [pytest.mark.lifecycle, pytest.mark.server]


@pytest.mark.parametrize("how", ["remove", "pin"])
def test_rollback_under_traffic(deployment, lifecycle_settings, report, how):
    s = lifecycle_settings
    driver = deployment.driver()
    old = max(deployment.ready_versions(), key=int)
    version, promoted = driver.promote()
    new = str(version)
    assert promoted.ok, f"setup: promoting version {new} failed: {promoted.error}"
    wait.ModelReady(deployment.model, new, timeout=300).wait_for(deployment.server)

    rollback = (lambda: driver.remove_version(version)) if how == "remove" else (lambda: driver.pin([int(old)]))
    outcome = under_traffic(deployment, rollback, s.clients, s.lead_s, s.tail_s)
    record = outcome.record
    problems = [] if outcome.result.ok else [f"rollback ({how}) load failed: {outcome.result.error}"]
    problems += checks.no_failures(record, f"while rolling back from {new} to {old} ({how})")
    problems += checks.only_versions(record, {old, new}, "during the rollback")
    switch, numbers = checks.switch_over(record, new, old, outcome.returned, s.switch_bound_s)
    problems += switch
    problems += outcome.probe.problems()
    problems += checks.dependents_served(outcome.dependents, f"while rolling back from {new} to {old} ({how})")
    ready = deployment.ready_versions()
    if old not in ready or new in ready:
        problems.append(f"after the rollback version {old} should be READY and {new} not; index says READY "
                        f"{sorted(ready)}")
    report(record, load_s=outcome.result.seconds, rolled_back_from=new, to=old, **numbers,
           **checks.dependent_counts(outcome.dependents))
    assert not problems, "\n".join(problems)
