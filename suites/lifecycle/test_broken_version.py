"""Issue 9, point 3: a broken N+1 (fixtures/lifecycle/broken_versions/) loaded under traffic: the load
reports failure with Triton's error, the repository index shows that version failed with the same
reason, the old version keeps serving every request, and the model stays ready.

Measured and reported, not failed: with --strict-readiness (the harness's default) Triton 2.51 keeps
/v2/health/ready at 400 after a failed version load — even after the version is removed and the
model reloaded — so an orchestrator probing server readiness would take the replica out of service."""

from __future__ import annotations

import importlib.util

import pytest

from harness.lifecycle import checks
from harness.lifecycle.scenario import under_traffic
from harness.paths import FIXTURES
from harness.verdicts import not_applicable

pytestmark = [pytest.mark.lifecycle, pytest.mark.server]

AROUND = 100  # answers the old version must give around the failed load (traffic waits for as many after it)
BROKEN = sorted(p for p in (FIXTURES / "lifecycle" / "broken_versions").glob("*.py") if not p.stem.endswith("_model"))


def _load(path):
    spec = importlib.util.spec_from_file_location(f"broken_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fixture", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_version_under_traffic(deployment, lifecycle_settings, report, fixture):
    s = lifecycle_settings
    broken = _load(fixture)
    if reason := broken.applies(deployment.config):
        not_applicable(f"{fixture.stem}: {reason}")
    driver = deployment.driver()
    old = max(deployment.ready_versions(), key=int)
    version = driver.add_version()
    broken.break_version(deployment.model_dir, deployment.model_dir / str(version))

    # no switch-over to judge, only the old version going on: AROUND answers after the failed load, not 150
    outcome = under_traffic(deployment, driver.load, s.clients, s.lead_s, s.tail_s, min_after=AROUND)
    record = outcome.record
    problems = []
    if outcome.result.ok:
        problems.append(f"POST load of broken version {version} ({fixture.stem}) reported success")
    elif not outcome.result.error.strip():
        problems.append("the failed load returned no error message")
    entry = next((e for e in deployment.index() if e.get("version") == str(version)), None)
    if entry is None or entry.get("state") == "READY" or not entry.get("reason"):
        problems.append(f"repository index should show version {version} failed with a reason; it shows {entry}")
    elif entry["reason"].splitlines()[0] not in outcome.result.error:
        problems.append(f"the index reason {entry['reason'].splitlines()[0]!r} is not the load's error "
                        f"{outcome.result.error[:200]!r}")
    problems += checks.no_failures(record, f"while broken version {version} failed to load")
    problems += checks.only_versions(record, {old}, "while the broken version failed")
    problems += checks.enough_traffic(record, AROUND, "around the failed load")
    problems += outcome.probe.problems()
    problems += checks.dependents_served(outcome.dependents, f"while broken version {version} failed to load")
    server_codes = dict(outcome.probe.codes(1))
    report(record, load_error=outcome.result.error.splitlines()[0][:120] if outcome.result.error else "",
           server_ready_codes=str(server_codes), **checks.dependent_counts(outcome.dependents))
    assert not problems, "\n".join(problems)
