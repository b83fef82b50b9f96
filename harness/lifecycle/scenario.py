"""One shape for every lifecycle scenario: traffic flowing, a readiness probe watching, an action
(POST load, remove, pin) in the middle, traffic continuing after — the record is then judged. The
ensembles that use the model get traffic of their own through the same window (`dependents`): a
reload must not break the pipelines built on the model."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.lifecycle.checks import MIN_TAIL, ready_mark
from harness.lifecycle.readiness import ReadinessProbe
from harness.lifecycle.traffic import FLOWING, Record, Traffic


@dataclass
class Outcome:
    record: Record
    result: Any
    probe: ReadinessProbe
    dependents: dict[str, Record] = field(default_factory=dict)  # ensemble -> what its traffic saw

    @property
    def posted(self) -> float:
        return self.record.marks["load posted"]

    @property
    def returned(self) -> float:
        return self.record.marks["load returned"]


def under_traffic(deployment, action: Callable[[], Any], clients: int = 16, lead_s: float = 1.0,
                  tail_s: float = 1.5, min_after: int = MIN_TAIL + 10, max_tail_s: float = 60.0) -> Outcome:
    """The action comes once traffic flows (Traffic.wait_flowing), the ensembles' too, and `lead_s` has passed
    since the model's traffic flowed; traffic runs `tail_s` after it returns, longer (up to `max_tail_s`) until
    `min_after` requests sent after the switch came back (settled_after): a slow model's verdict needs as many
    answers as a fast one's, and no more. The version unversioned requests reach is marked with when it was
    (re)loaded, and so is one the action brought READY, so that requests failing right after a version reported
    READY are told apart from what the action did (checks.no_failures)."""
    traffic = Traffic(deployment.grpc, deployment.model, deployment.inputs(), clients=clients)
    before = dict(deployment.note_ready())
    if before:
        serving = max(before, key=int)
        traffic.record.marks[ready_mark(serving)] = before[serving]
    dependents = {name: Traffic(deployment.grpc, name, deployment.inputs(name), clients=max(1, clients // 4))
                  for name in deployment.dependents}
    with ExitStack() as running:
        probe = running.enter_context(ReadinessProbe(deployment.http_url, deployment.model))
        running.enter_context(traffic)
        for other in dependents.values():
            running.enter_context(other)
        traffic.wait_flowing()
        flowing = time.monotonic()
        for other in dependents.values():
            other.wait_for(min(FLOWING * clients, 10))
        time.sleep(max(0.0, lead_s - (time.monotonic() - flowing)))  # waiting for the ensembles' traffic counts
        for other in (traffic, *dependents.values()):
            other.mark("load posted")
        result = action()
        returned = traffic.mark("load returned")
        brought = set(deployment.note_ready(at=returned)) - set(before)
        if brought:
            traffic.record.marks[ready_mark(max(brought, key=int))] = returned
        for other in dependents.values():
            other.mark("load returned")
        time.sleep(tail_s)
        traffic.wait_until(lambda r: settled_after(r, returned) >= min_after, max(0.0, max_tail_s - tail_s))
    return Outcome(traffic.record, result, probe, {name: other.record for name, other in dependents.items()})


def settled_after(record: Record, returned: float) -> int:
    """Requests that came back (answered or failed) sent after the switch: after the action returned and after
    the last request a version other than the one answering now answered — what checks.switch_over counts."""
    answered = sorted((r for r in record.responses if r.ok and r.sent > returned), key=lambda r: r.done)
    cut = returned
    if answered:
        cut = max((r.sent for r in answered if r.version != answered[-1].version), default=returned)
    return sum(r.sent > cut for r in record.responses)
