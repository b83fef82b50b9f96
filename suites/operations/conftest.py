"""Operations suite fixtures: the models a client can call standalone (pipeline steps are exercised
through their ensemble), each with a good request, and the stage breakdowns for the report."""

from __future__ import annotations

import json

import pytest

from harness.availability import skip_if_nothing_servable
from harness.protocol.models import discover

BREAKDOWNS: list = []  # harness.operations.stages.Breakdown, for the summary and the picture
NOTES: list[str] = []  # measured lines for the summary (memory, co-tenancy)


def pytest_collection_modifyitems(config, items):
    from pathlib import Path

    here = Path(__file__).parent
    for item in (i for i in items if here in i.path.parents):
        item.add_marker(pytest.mark.operations)
        item.add_marker(pytest.mark.server)


@pytest.fixture(scope="session")
def callable_models(pytestconfig, triton_server, repository, manifest):
    """READY models with a tensor or image role, not pipeline steps nor declared `skip`."""
    from harness.repository.pipeline import pipeline_step_of

    views = discover(triton_server.endpoints.http, repository=repository, imgsz=manifest.imgsz, manifest=manifest)
    skip_if_nothing_servable(pytestconfig, views)
    return [v for v in views if v.role and manifest.role(v.name) != "skip"
            and not ((repository / v.name).is_dir() and pipeline_step_of(repository, v.name, manifest))]


@pytest.fixture(scope="session")
def payloads(repository, callable_models):
    """The request each check sends a model: sized over the repository, with the inputs declared in
    [inputs.NAME] (harness.repository.extra_inputs) carrying the sent image's values, as the other suites send."""
    from harness.load import RepositoryPayloads

    return RepositoryPayloads(repository, {view.name: view.layout for view in callable_models if view.layout is not None})


@pytest.fixture(scope="session")
def stage_breakdowns() -> list:
    return BREAKDOWNS


@pytest.fixture(scope="session")
def operations_notes() -> list[str]:
    return NOTES


def pytest_terminal_summary(terminalreporter, config):
    for line in NOTES:
        terminalreporter.write_line(f"[yts operations] {line}")
    if not BREAKDOWNS:
        return
    terminalreporter.write_line("[yts operations] stage breakdown (ms per request):")
    for item in BREAKDOWNS:
        terminalreporter.write_line("  " + item.table_row())
    report_dir = config.getoption("--report-dir")
    if report_dir:
        from harness.operations.plot import plot_stages

        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / "operations_stages.json").write_text(json.dumps(
            [{"model": b.model, "stages_us": b.stages_us, "compute_infer_us": b.compute_us, "requests": b.requests,
              "coverage": b.coverage} for b in BREAKDOWNS], indent=2))
        plot_stages(BREAKDOWNS, report_dir / "operations_stages.png")
