"""Where a model's time goes: the per-stage durations it exports as custom metrics (decode, letterbox,
inference, NMS for the reference yolo_e2e) must add up to the compute time Triton measured for it."""

from __future__ import annotations

import time

import pytest

from harness.metrics import prometheus
from harness.operations.cotenancy import instances
from harness.operations.stages import COMPUTE, HOW_TO_ADD, breakdown, stage_series, warm_up
from harness.protocol.models import RequestTooLarge
from harness.protocol.wire import send
from harness.repository.sizing import read_configs

REQUESTS = 8


def _bounds(config) -> tuple[float, float]:
    low, high = (float(x) for x in config.getoption("--stage-coverage").split(","))
    return low, high


def _settled(metrics_url: str, model: str, timeout_s: float = 5.0):
    """A scrape once the model's series stop moving: a Python model's custom metrics reach Triton from its stub
    by message, so a scrape right after a response (or after earlier traffic) can miss or catch late updates."""
    def mine(snapshot):
        return {key: value for key, value in snapshot.samples.items() if ("model", model) in key[1]}

    last = prometheus.scrape(metrics_url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = prometheus.scrape(metrics_url)
        if mine(now) == mine(last):
            return now
        last = now
    return last


def test_stages_add_up_to_compute_time(pytestconfig, triton_server, repository, callable_models, stage_breakdowns,
                                      record_property):
    configs = read_configs(repository)
    before = prometheus.scrape(triton_server.endpoints.metrics)
    exporting = stage_series(before)
    with_stages = [v for v in callable_models if v.name in exporting]
    without = sorted(v.name for v in callable_models if v.name not in exporting)
    if not with_stages:
        pytest.skip(f"not tested, because {', '.join(without) or 'no model'} exports no stage metrics ({HOW_TO_ADD})")
    low, high = _bounds(pytestconfig)
    problems = []
    for view in with_stages:
        try:
            requests = [view.good_request(batch=1, seed=i) for i in range(REQUESTS)]
        except RequestTooLarge as error:
            problems.append(f"{view.name}: not sent, {error.line}")
            continue
        warmed = warm_up(lambda: send("grpc", triton_server.endpoints, requests[0]),
                         instances(configs[view.name]) if view.name in configs else 1)
        before = _settled(triton_server.endpoints.metrics, view.name)
        for request in requests:  # one at a time: compute_infer is then one execution per request
            answer = send("grpc", triton_server.endpoints, request)
            assert answer.ok, f"{view.name}: good request failed: {answer}"
        after = _settled(triton_server.endpoints.metrics, view.name)
        result = breakdown(view.name, before, after, REQUESTS)
        stage_breakdowns.append(result)
        record_property(f"stages:{view.name}", {"stages_us": result.stages_us, COMPUTE: result.compute_us,
                                                "warm_up_requests": warmed})
        problem = result.problem(low, high)
        if problem:
            problems.append(f"{problem}\n    {result.table_row()}")
    assert not problems, "\n".join(problems)
    if without:
        record_property("no_stage_metrics", without)
