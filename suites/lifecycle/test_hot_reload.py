"""Issue 9, point 1: version N+1 goes live under K clients with nothing lost — zero failed requests,
every answer from N or N+1 (as Triton reports it in model_version), the old version gone within the
switch-over bound, only N+1 answering after it; under latest{2} both stay addressable by version."""

from __future__ import annotations

import time

import pytest

from harness.lifecycle import checks
from harness.lifecycle.scenario import under_traffic
from harness.lifecycle.traffic import Traffic
from harness.repository.config import write_config
from harness.servers import wait

pytestmark = [pytest.mark.lifecycle, pytest.mark.server]


def _set_latest(deployment, num_versions: int) -> None:
    """The policy the test needs, set in the scratch config and loaded by the harness (not the driver)."""
    config = deployment.config
    if config.version_policy.WhichOneof("policy_choice") == "latest" and \
            config.version_policy.latest.num_versions == num_versions:
        return
    config.version_policy.latest.num_versions = num_versions
    write_config(deployment.model_dir, config)
    wait.load(deployment.server, [deployment.model])
    deployment.reloaded()


@pytest.mark.parametrize("policy", ["latest1", "latest2"])
def test_add_version_under_traffic(deployment, lifecycle_settings, report, policy):
    s = lifecycle_settings
    _set_latest(deployment, 1 if policy == "latest1" else 2)
    old = max(deployment.ready_versions(), key=int)
    driver = deployment.driver()
    new_version = []

    def promote():
        version, result = driver.promote()
        new_version.append(str(version))
        return result

    outcome = under_traffic(deployment, promote, s.clients, s.lead_s, s.tail_s)
    new = new_version[0]
    record = outcome.record
    problems = [] if outcome.result.ok else [f"POST load of version {new} failed: {outcome.result.error}"]
    problems += checks.no_failures(record, f"while version {new} was loaded")
    problems += checks.only_versions(record, {old, new}, "during the switch")
    switch, numbers = checks.switch_over(record, old, new, outcome.returned, s.switch_bound_s)
    problems += switch
    problems += outcome.probe.problems()
    problems += checks.dependents_served(outcome.dependents, f"while version {new} was loaded")

    if policy == "latest2":  # both addressable by version, side by side, right after the switch
        pinned = {v: Traffic(deployment.grpc, deployment.model, deployment.inputs(),
                             clients=max(1, s.clients // 2), version=v) for v in (old, new)}
        for traffic in pinned.values():
            traffic.start()
        time.sleep(s.tail_s / 2)
        for traffic in pinned.values():
            traffic.wait_for(60, timeout=60)
        for version, traffic in pinned.items():
            pinned_record = traffic.stop()
            problems += checks.no_failures(pinned_record, f"addressed to version {version} under latest{{2}}")
            problems += checks.only_versions(pinned_record, {version}, f"addressed to version {version}")
            problems += checks.enough_traffic(pinned_record, 50, f"addressed to version {version}")
            numbers[f"pinned_v{version}"] = len(pinned_record.responses)
            numbers[f"pinned_v{version}_failed"] = len(pinned_record.failed)
        ready = deployment.ready_versions()
        if not {old, new} <= ready:
            problems.append(f"under latest{{2}} versions {old} and {new} should both be READY; index says {sorted(ready)}")

    report(record, load_s=outcome.result.seconds, old=old, new=new,
           server_ready_codes=str(dict(outcome.probe.codes(1))), **numbers,
           **checks.dependent_counts(outcome.dependents))
    assert not problems, "\n".join(problems)

