"""Live: once loaded, the server serves what the files say, over HTTP and gRPC."""

import pytest

from harness.adapters.onnx_runtime import is_adapted
from harness.availability import load_failures, record_load_failures
from harness.checks import NotApplicable, format_findings
from harness.checks.live import LoadFailed, check_live, ensure_loaded
from harness.checks.model import load_entry
from harness.verdicts import not_servable_here

pytestmark = pytest.mark.server


def test_live(pytestconfig, entry, repository, live_server, live_clients, record_additions):
    live_http, live_grpc = live_clients
    if entry.config is None:
        pytest.skip("config.pbtxt missing or unreadable (the layout/schema checks report it)")
    if is_adapted(repository / entry.name):  # served as the adapter's config says (its tensors are the model's)
        entry = load_entry(repository, entry.name)
    refused = None
    try:
        ensure_loaded(entry, live_http, can_load=live_server.controls_repository, log_tail=live_server.log_tail)
    except NotApplicable as reason:
        pytest.skip(str(reason))
    except LoadFailed as error:
        refused = str(error)
    if refused:
        # once, here: a module the server's Python lacks is the host's cause (not tested on this host);
        # any other is the model's; either way its other checks are skipped under it (harness.availability)
        record_load_failures(pytestconfig, entry.repository, {entry.name: refused})
        if load_failures(pytestconfig)[entry.name][1]:
            not_servable_here(load_failures(pytestconfig)[entry.name][0])
        pytest.fail(f"[live] {entry.name}: {refused}", pytrace=False)
    result = check_live(entry, live_http, live_grpc)
    record_additions(result.additions)
    for note in result.notes:
        print(f"[live] {entry.name}: {note}")
    if result.findings:
        pytest.fail(format_findings(result.findings), pytrace=False)
