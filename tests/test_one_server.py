"""One server at a time (harness.servers.turns, issue 31 item 2): through a `yts certify` that runs a suite
with its own server (config's live loads, lifecycle's deployment) and suites on the session server, the
servers come up one after another, never two at once; the census itself counts two that overlap."""

from __future__ import annotations

import json
import re

import pytest

from harness.servers import cleanup
from tests.conftest import certify_repo, write_scale_add

pytestmark = pytest.mark.server


def test_certify_runs_one_server_at_a_time(tmp_path):
    repository = write_scale_add(tmp_path / "models").parent
    # protocol is collected first here; the order puts config and lifecycle (own servers) before it
    result = certify_repo(repository, tmp_path / "report", ("protocol", "lifecycle", "config"), "-k",
                          "test_live_and_ready or test_live or (test_add_version_under_traffic and latest1)",
                          "--lifecycle-lead-s=0.5", "--lifecycle-tail-s=1.0")
    environment = json.loads((tmp_path / "report" / "report.json").read_text())["environment"]
    assert environment["servers_started"] >= 3, (environment, result.stdout[-3000:])
    assert environment["servers_at_once"] == 1, (environment, result.stdout[-3000:])
    order = [case.split(".")[1] for case in re.findall(r'<testcase classname="([^"]+)"',
                                                        (tmp_path / "report" / "junit.xml").read_text())]
    assert order and order == sorted(order, key=["config", "lifecycle", "protocol"].index), order


def test_the_census_counts_servers_that_overlap(tiny_repository):
    from harness.servers import ServerSettings, create_server

    before = cleanup.census()
    first = create_server("process", ServerSettings(repository=tiny_repository)).start()
    try:
        second = create_server("process", ServerSettings(repository=tiny_repository)).start()
        second.stop()
    finally:
        first.stop()
    after = cleanup.census()
    assert after["started"] - before["started"] == 2 and after["at_once"] >= 2, after
