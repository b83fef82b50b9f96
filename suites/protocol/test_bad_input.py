"""Every kind of bad input in the catalogue gets a client-error answer that names the problem (or,
for odd-but-valid input, a success), and the server stays READY and keeps serving afterwards. A request the
model's queue policy refuses (503 "Request timeout expired") is reported as that, naming the policy and its
timeout (harness.protocol.queue_policy), not as a deployment that stopped serving."""

from __future__ import annotations

import pytest
import requests

from harness.protocol.badinput import CATALOGUE, Handled
from harness.protocol.models import RequestTooLarge
from harness.protocol.queue_policy import queue_rejection
from harness.protocol.wire import send
from harness.verdicts import not_applicable


def still_serving(server, view, protocol: str, after: str) -> str | None:
    """None when the server is READY and the model answers a good request, else what broke."""
    ready = requests.get(f"http://{server.endpoints.http}/v2/health/ready", timeout=10).status_code
    model_ready = requests.get(f"http://{server.endpoints.http}/v2/models/{view.name}/ready", timeout=10).status_code
    try:
        answer = send(protocol, server.endpoints, view.good_request())
    except RequestTooLarge:  # no good request fits the bound: readiness is all that can be asked
        if ready == 200 and model_ready == 200:
            return None
        return f"after {after} the deployment stopped serving: server ready={ready}, model ready={model_ready}"
    if ready == 200 and answer.ok:
        return None
    refused = queue_rejection(answer, view.name, view.config)
    if ready == 200 and refused:
        return f"after {after} a good request was refused: {refused}"
    crash = " (the model's stub process died)" if "not healthy" in answer.message else ""
    return (f"after {after} the deployment stopped serving{crash}: server ready={ready}, model ready={model_ready}, "
            f"a good request now gets {answer}" + (" — readiness still says READY" if ready == 200 and model_ready == 200 else ""))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", CATALOGUE, ids=lambda case: case.name)
def test_bad_input(case, protocol, triton_server, models_by_role, record_property):
    record_property("bad_input_kind", case.name)
    record_property("protocol", protocol)
    if protocol not in case.protocols:
        not_applicable(f"{case.name} has no {protocol} form")
    views = models_by_role[case.role]
    if not views:
        not_applicable(f"the repository serves no {case.role} model")
    problems, judged, too_large = [], 0, []
    for view in views:
        try:
            request = view.with_extras(case.build(view))
        except RequestTooLarge as error:  # not sent: the request bound says how big it would be
            too_large.append(error.line)
            continue
        if request is None:
            continue
        judged += 1
        answer = send(protocol, triton_server.endpoints, request)
        if isinstance(case.expect, Handled):
            verdict = case.expect.judge(answer, view)
        else:
            verdict = case.expect.judge(answer)
        refused = queue_rejection(answer, view.name, view.config)
        if verdict:
            if refused:
                verdict = f"expected {'a success' if isinstance(case.expect, Handled) else 'a client error'}, got {refused}"
            elif "not healthy" in answer.message:
                verdict += " (the model's stub process died on this input)"
            problems.append(f"{view.name}: {case.name} over {protocol}: {verdict}")
        broken = still_serving(triton_server, view, protocol, f"{case.name}")
        if broken and not (refused and refused in broken):  # one cause once: the policy refused both
            problems.append(f"{view.name}: {broken}")
    if too_large:
        record_property("not_applicable", too_large)
    if not judged and too_large:
        not_applicable(f"{case.name}: " + "; ".join(too_large))
    if not judged:
        not_applicable(f"{case.name} does not apply to {[v.name for v in views]} (e.g. no fixed dim, no batching)")
    assert not problems, f"Triton 2.51 itself answers: {case.triton_answer}\n" + "\n".join(problems)
