"""Protocol suite fixtures: the served models seen through their metadata (harness.protocol.models),
grouped by the part they play, and the bad-input tally printed at the end of the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.availability import skip_if_nothing_servable
from harness.protocol.badinput import CATALOGUE
from harness.protocol.models import ModelView, discover

HERE = Path(__file__).parent
LAST = "test_server_still_ready_at_the_end"
TALLY: dict[str, dict[str, str]] = {}  # bad-input kind -> protocol -> outcome, for the summary
NOT_SENT: dict[str, list[str]] = {}  # test id -> requests not sent, over the byte bound (for the summary)


def pytest_collection_modifyitems(config, items):
    for item in (i for i in items if HERE in i.path.parents):
        item.add_marker(pytest.mark.protocol)
        item.add_marker(pytest.mark.server)
    last = [i for i in items if i.name == LAST]
    items[:] = [i for i in items if i.name != LAST] + last


@pytest.fixture(scope="session")
def served_models(pytestconfig, triton_server, repository, manifest) -> list[ModelView]:
    """Requests are sized from the served configs, the ONNX graphs in the repository and the declared
    imgsz (harness.repository.sizing), never with a made-up 640 per -1 dim."""
    views = discover(triton_server.endpoints.http, repository=repository, imgsz=manifest.imgsz, manifest=manifest)
    skip_if_nothing_servable(pytestconfig, views)
    assert views, f"the server serves no READY model; log tail:\n{triton_server.log_tail()}"
    return views


@pytest.fixture(scope="session")
def models_by_role(pytestconfig, served_models, manifest, repository) -> dict[str, list[ModelView]]:
    """Tensor and image models by their layouts (harness.repository.layouts: a tensor or pixel input is
    "tensor", encoded or base64 images "image"); a model the manifest declares raw or e2e whose input
    could not be read takes that role's usual one (raw: tensor, e2e: image), one declared skip none. A
    pipeline step (harness.repository.pipeline: fed by its ensemble's other steps) gets none either: it
    is exercised through its ensemble, never with made-up standalone requests."""
    from harness.repository.pipeline import pipeline_step_of

    declared_roles = {"raw": "tensor", "e2e": "image", "skip": None}
    roles: dict[str, list[ModelView]] = {"tensor": [], "image": []}
    for view in served_models:
        if (repository / view.name).is_dir() and pipeline_step_of(repository, view.name, manifest):
            continue
        declared = manifest.role(view.name)
        role = None if declared == "skip" else (view.role or declared_roles[declared]) if declared else view.role
        if role:
            roles[role].append(view)
    skip_if_nothing_servable(pytestconfig, roles["tensor"] + roles["image"])
    return roles


def pytest_runtest_logreport(report):
    not_sent = dict(report.user_properties).get("not_applicable")
    if not_sent and report.when == "call":
        NOT_SENT[report.nodeid.split("::")[-1]] = list(not_sent)
    kind = dict(report.user_properties).get("bad_input_kind")
    if kind is None or (report.when != "call" and not report.skipped):
        return
    TALLY.setdefault(kind, {})[dict(report.user_properties)["protocol"]] = report.outcome


def pytest_terminal_summary(terminalreporter, config):
    if NOT_SENT:
        from harness.repository.sizing import human, request_budget

        terminalreporter.write_line(f"[yts protocol] not applicable to some models, not sent (over the "
                                    f"{human(request_budget())} request bound, $YTS_MAX_REQUEST_BYTES):")
        for test, lines in sorted(NOT_SENT.items()):
            for line in lines:
                terminalreporter.write_line(f"  {test}: {line}")
    tally = TALLY
    if not tally:
        return
    judged = {k: v for k, v in tally.items() if any(o != "skipped" for o in v.values())}
    failed = sorted(k for k, v in tally.items() if "failed" in v.values())
    terminalreporter.write_line(
        f"[yts protocol] bad-input catalogue: {len(CATALOGUE)} kinds, {len(judged)} judged on this repository, "
        f"{len(judged) - len(failed)} conform, {len(failed)} do not{': ' + ', '.join(failed) if failed else ''}")
    report_dir = config.getoption("--report-dir")
    if report_dir:
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "protocol_bad_input.json").write_text(json.dumps(
            {"kinds": len(CATALOGUE), "judged": len(judged), "nonconforming": failed, "outcomes": tally,
             "not_sent": NOT_SENT}, indent=2))
