"""Issue 9, point 5: readiness during a switch — the model ready at every probe while N+1 loads, the
server ready again once it has loaded — and a restart on the same repository bringing back exactly
the versions that were READY.

Triton 2.51 with --strict-readiness answers 400 on /v2/health/ready while a version is LOADING: the
count is reported (server_codes), since an orchestrator probing server readiness takes the replica
out of service for every hot reload; probe the model's ready endpoint instead."""

from __future__ import annotations

import pytest

import time

from harness.lifecycle.scenario import under_traffic
from harness.servers import wait

pytestmark = [pytest.mark.lifecycle, pytest.mark.server]


def test_ready_throughout_switch(deployment, lifecycle_settings, report):
    deployment.require_server_ready()  # judged below: a server a failed load left at 400 is restarted first
    driver = deployment.driver()
    # the verdict is the probes' (traffic only keeps the model busy while it switches): no answer count to wait for
    outcome = under_traffic(deployment, lambda: driver.promote()[1], clients=2, lead_s=0.5, tail_s=0.5, min_after=0)
    problems = [] if outcome.result.ok else [f"POST load failed: {outcome.result.error}"]
    problems += outcome.probe.problems()
    deadline = time.monotonic() + 10
    while not deployment.server_ready() and time.monotonic() < deadline:
        time.sleep(0.1)
    if not deployment.server_ready():
        problems.append("/v2/health/ready still not 200 10 s after version N+1 finished loading")
    report(outcome.record, probes=len(outcome.probe.samples), server_codes=str(dict(outcome.probe.codes(1))),
           model_codes=str(dict(outcome.probe.codes(2))))
    assert not problems, "\n".join(problems)


def test_restart_reloads_same_versions(deployment, report):
    driver = deployment.driver()
    version, result = driver.promote()
    assert result.ok, f"setup: promoting version {version} failed: {result.error}"
    wait.ModelReady(deployment.model, str(version), timeout=300).wait_for(deployment.server)
    before = deployment.ready_versions()
    deployment.restart()
    wait.ModelReady(deployment.model, timeout=300).wait_for(deployment.server)
    after = deployment.ready_versions()
    report(before=",".join(sorted(before, key=int)), after=",".join(sorted(after, key=int)))
    assert after == before, (f"after a restart on the same repository, READY versions of {deployment.model} are "
                             f"{sorted(after, key=int)}; before the restart they were {sorted(before, key=int)}")
