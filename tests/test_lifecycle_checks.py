"""The lifecycle verdicts on records built response by response: a clean switch passes; an old
version answering past the bound, a stray version, a failure, a non-transient error each fail with
a message naming what was seen. Records from real servers are judged in tests/test_lifecycle.py."""

from __future__ import annotations

import shutil

import pytest

from harness.lifecycle import checks
from harness.lifecycle.target import choose_model
from harness.lifecycle.traffic import Record, Response, request_inputs
from harness.repository.config import read_config
from tests.conftest import write_scale_add


def _record(answers, loaded_at=1.0):
    """answers: (sent, version or error) pairs, each answered 10 ms later."""
    responses = [Response(0, t, t + 0.01, v if v.isdigit() else "", "", "" if v.isdigit() else v)
                 for t, v in answers]
    return Record(responses, {"load posted": 0.5, "load returned": loaded_at})


def _clean(n_tail=200):
    return _record([(0.1 * i, "1") for i in range(10)] + [(1.0 + 0.001 * i, "2") for i in range(n_tail)])


def test_clean_switch_passes():
    record = _clean()
    problems, numbers = checks.switch_over(record, "1", "2", 1.0, bound_s=0.5)
    assert problems == [] and checks.no_failures(record, "x") == [] and checks.only_versions(record, {"1", "2"}, "x") == []
    assert numbers["cutover_s"] < 0.5


def test_old_version_past_the_bound_fails():
    record = _record([(0.1, "1")] + [(1.0 + 0.001 * i, "2") for i in range(200)] + [(2.0, "1")])
    problems, _ = checks.switch_over(record, "1", "2", 1.0, bound_s=0.5)
    assert any("version 1 still answered a request sent 1.0" in p and "bound 0.5 s" in p for p in problems), problems


def test_new_version_never_answering_fails():
    problems, _ = checks.switch_over(_record([(0.1 * i, "1") for i in range(30)]), "1", "2", 1.0, bound_s=0.5)
    assert problems and "version 2 never answered" in problems[0]


def test_new_version_never_answering_is_named_even_when_some_requests_failed():
    """One failed request after the load is no_failures' cause; the old version answering the rest is
    switch_over's, and is still named (silent only when every request after the load failed)."""
    record = _record([(0.1 * i, "1") for i in range(30)] + [(1.05, "[StatusCode.UNAVAILABLE] overloaded")])
    problems, _ = checks.switch_over(record, "1", "2", 1.0, bound_s=0.5)
    assert problems and "version 2 never answered" in problems[0]
    all_failed = _record([(0.1 * i, "1") for i in range(10)] + [(1.0 + 0.1 * i, "[StatusCode.UNAVAILABLE] x")
                                                             for i in range(5)])
    assert checks.switch_over(all_failed, "1", "2", 1.0, bound_s=0.5)[0] == []


def test_too_short_tail_fails():
    problems, _ = checks.switch_over(_clean(n_tail=5), "1", "2", 1.0, bound_s=0.5)
    assert any("only 5 answers after the switch-over" in p for p in problems), problems


def test_failures_and_stray_versions_are_named():
    record = _record([(0.1, "1"), (0.6, "[StatusCode.NOT_FOUND] has no available versions"), (0.7, "3")])
    failed = checks.no_failures(record, "during the test")
    assert failed[0].startswith("1 of 3 requests failed during the test") and "has no available versions" in failed[1]
    assert "versions {'3': 1}" in checks.only_versions(record, {"1", "2"}, "here")[0]


WARMING = "[StatusCode.INTERNAL] the session is still warming up"


def test_failures_are_told_apart_by_cause():
    """Issue 34 item 4: a version READY before it answers fails requests right after its READY — in the reload
    the test starts from (before the action) or once the test's load returned — and neither is blamed on the
    action; failures after the action that no READY explains are the action's."""
    answers = [(0.05 * i, WARMING) for i in range(4)] + [(0.2 + 0.05 * i, "1") for i in range(6)] + \
              [(1.0 + 0.01 * i, WARMING) for i in range(5)] + [(1.05 + 0.01 * i, "2") for i in range(5)] + [(1.2, "boom")]
    record = _record(answers)
    record.marks |= {checks.ready_mark("1"): -0.1, checks.ready_mark("2"): 1.0}
    lines = "\n".join(checks.no_failures(record, "while version 2 was loaded"))
    assert "4 of 21 requests failed right after version 1 reported READY (in the (re)load this test starts from, " \
           "at -0.100 s); it answered from +0.210 s on" in lines, lines
    assert "5 of 21 requests failed right after version 2 reported READY (once the test's load returned, at " \
           "+1.000 s); it answered from +1.060 s on" in lines, lines
    assert "1 of 21 requests failed while version 2 was loaded (expected 0):\n  1 × boom" in lines, lines


def test_failures_before_the_action_are_not_the_actions():
    """Failures before the action that no READY explains belong to the state the test starts from."""
    record = _record([(0.1, "1"), (0.2, WARMING), (0.6, "1")])
    lines = checks.no_failures(record, "while broken version 2 failed to load")
    assert lines[0] == ("1 of 3 requests failed before this test's action (posted at +0.400 s), in the state the "
                        "test starts from — not while broken version 2 failed to load:"), lines
    never = _record([(0.1 * i, WARMING) for i in range(10)])  # the baseline reloaded and never answered
    never.marks[checks.ready_mark("1")] = 0.05
    lines = checks.no_failures(never, "while broken version 2 failed to load")
    assert lines[0] == ("9 of 10 requests failed right after version 1 reported READY (in the (re)load this test "
                        "starts from, at +0.050 s); it answered none up to +0.900 s:"), lines
    assert lines[3].startswith("1 of 10 requests failed before this test's action"), lines


def test_transient_errors_only():
    transient = _record([(0.1, "[StatusCode.NOT_FOUND] Request for unknown model: 'm' has no available versions")])
    odd = _record([(0.1, "[StatusCode.INTERNAL] Failed to process the request(s), message: Stub process is not healthy.")])
    assert checks.transient_only(transient) == []
    assert "not the documented transient" in checks.transient_only(odd)[0]


def test_model_choice_and_inputs(tmp_path):
    repository = tmp_path / "models"
    write_scale_add(repository, "a_first")
    write_scale_add(repository, "b_two_latest")
    config_two = read_config(repository / "b_two_latest")
    config_two.version_policy.latest.num_versions = 2
    from harness.repository.config import write_config
    write_config(repository / "b_two_latest", config_two)
    assert choose_model(repository) == "b_two_latest"
    assert choose_model(repository, "a_first") == "a_first"
    [(name, array)] = request_inputs(read_config(repository / "a_first"))
    assert name == "X" and array.shape == (1, 4) and str(array.dtype) == "float32"


def test_readiness_verdict_refusals_and_silence():
    from harness.lifecycle.readiness import FAILURE_THRESHOLD, ReadinessProbe

    probe = ReadinessProbe("http://unused", "m")
    probe.samples = [(0.0, 200, 200), (0.1, 0, 0), (0.2, 400, 200)]
    assert probe.problems() == []  # one slow answer is not a verdict
    probe.samples = [(0.0, 200, 200), (0.1, 400, 400)]
    assert "answered not-ready in 1 of 2 probes" in probe.problems()[0]
    probe.samples = [(0.1 * i, 0, 0) for i in range(FAILURE_THRESHOLD)]
    assert f"did not answer {FAILURE_THRESHOLD} probes in a row" in probe.problems()[0]


MB = 2**20
# Process-tree RSS after each unload/load cycle of the reference yolo_raw under traffic on 2 cores
# (2026-12-04): no leak over 24 cycles, but consecutive samples swing by ±150 MB or more.
MEASURED_FLAT = [1638, 1176, 1204, 1228, 1148, 1271, 1185, 935]


def test_memory_floor_ignores_swings_under_traffic():
    from harness.lifecycle.memory import floor_growth

    assert floor_growth([m * MB for m in MEASURED_FLAT]) / MB <= 64


def test_memory_floor_catches_a_leak_under_the_same_swings():
    """20 MB lost per cycle on top of the measured swings: the floor rises past the 64 MB bound."""
    from harness.lifecycle.memory import floor_growth

    leaking = [(m + 20 * i) * MB for i, m in enumerate([1176, 1204, 1228, 1148, 1271, 1185, 1176, 1204])]
    assert floor_growth(leaking) / MB > 64
    with pytest.raises(ValueError, match="at least 2 samples"):
        floor_growth([MB])


@pytest.mark.server
def test_a_server_that_died_is_replaced_and_the_test_is_told(tmp_path):
    """One crash (Triton's Python backend can abort the whole server: boost::interprocess::lock_exception under
    stub churn, server#8882) fails the test it happened in, naming it; the next tests get a fresh server instead
    of 'connection refused' from a dead one."""
    import signal

    from harness.lifecycle.deployment import Deployment
    from harness.servers import ServerSettings, create_server

    repository = write_scale_add(tmp_path / "models").parent
    settings = ServerSettings(repository=repository, model_control="explicit", load_models=("scale_add",),
                              startup_timeout=60)
    deployment = Deployment(lambda: create_server("process", settings).start(), repository, "scale_add")
    try:
        deployment.restore()  # alive: nothing to say
        deployment.server.process.send_signal(signal.SIGKILL)
        deployment.server.process.wait(timeout=30)
        with pytest.raises(RuntimeError, match="the Triton server died during this test; a fresh one serves"):
            deployment.restore()
        assert deployment.restarts == 1 and deployment.server.alive() and deployment.server_ready()
        assert deployment.ready_versions() == {"1"}
    finally:
        deployment.stop()


@pytest.mark.server
def test_restore_loads_again_only_what_a_test_changed(tmp_path):
    """A model still serving its copied files keeps its stubs (a reload costs ~4 s a test on an H100): an added
    version that never got READY is just removed. A changed config, or another version READY, is loaded again.
    Triton's statistics start from zero for a version loaded again: that tells the two apart."""
    import requests

    from harness.lifecycle.deployment import Deployment
    from harness.servers import ServerSettings, create_server

    repository = write_scale_add(tmp_path / "models").parent
    settings = ServerSettings(repository=repository, model_control="explicit", load_models=("scale_add",),
                              startup_timeout=60)
    deployment = Deployment(lambda: create_server("process", settings).start(), repository, "scale_add")
    stats = f"{deployment.http_url}/v2/models/scale_add/versions/1/stats"

    def infer_once() -> None:
        body = {"inputs": [{"name": "X", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        requests.post(f"{deployment.http_url}/v2/models/scale_add/infer", json=body, timeout=30).raise_for_status()

    def count() -> int:
        return requests.get(stats, timeout=10).json()["model_stats"][0]["inference_count"]

    try:
        shutil.copytree(deployment.model_dir / "1", deployment.model_dir / "2")
        (deployment.model_dir / "2" / "model.py").write_text("raise RuntimeError('never loads')\n")
        assert not deployment.driver().load().ok  # as test_broken_version does
        infer_once()
        served = count()
        deployment.restore()
        assert served >= 1 and count() == served and not (deployment.model_dir / "2").exists()
        config = deployment.model_dir / "config.pbtxt"
        config.write_text(config.read_text() + "\nversion_policy { specific { versions: [1] } }\n")
        assert deployment.driver().load().ok
        infer_once()
        deployment.restore()
        assert count() == 0 and deployment.ready_versions() == {"1"}  # loaded again, from the copy's config
    finally:
        deployment.stop()


@pytest.mark.server
def test_traffic_counts_each_answer_as_it_comes_back(tmp_path):
    """wait_for(n) returns on the n-th answer, not once every client has buffered a batch: stopped right
    after, the record holds n plus at most what the clients had in flight (scale_add waits 20 ms for a
    batch, so each round of 4 takes ≥ 20 ms and the 10 ms poll sees each one)."""
    import numpy as np

    from harness.lifecycle.traffic import Traffic
    from harness.servers import ServerSettings, create_server

    repository = write_scale_add(tmp_path / "models").parent
    clients, count = 4, 8
    with create_server("process", ServerSettings(repository=repository)) as server:
        traffic = Traffic(server.endpoints.grpc, "scale_add", [("X", np.ones((1, 4), np.float32))], clients=clients)
        with traffic:
            traffic.wait_for(count, timeout=30)
        answered = traffic.record.responses
    assert not traffic.record.failed, traffic.record.failed[:3]
    assert count <= len(answered) <= count + 2 * clients, f"{len(answered)} answers recorded after wait_for({count})"


def test_traffic_waits_for_answers_after_the_switch_not_after_the_post():
    """The tail under_traffic waits for is what switch_over judges: requests sent after the last one the old
    version answered (here 0.3 s after the load returned), failed ones included so a broken model ends it."""
    from harness.lifecycle.scenario import settled_after

    record = _record([(0.5, "1"), (1.1, "2"), (1.2, "1"), (1.3, "1"), (1.35, "2"), (1.4, "2"),
                      (1.5, "[StatusCode.UNAVAILABLE] x")])
    assert settled_after(record, 1.0) == 3  # 1.35, 1.4 and the failed 1.5: after the old version's last (1.3)
    assert settled_after(_record([(1.0 + 0.1 * i, "[StatusCode.UNAVAILABLE] x") for i in range(1, 6)]), 1.0) == 5
