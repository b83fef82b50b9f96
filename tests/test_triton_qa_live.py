"""The offline verdicts on Triton's QA corpus agree with a real Triton's (harness.checks.triton_qa_live):
every in-scope case is loaded, model by model, into the embedded server (one per auto-complete mode), and
wherever the server decides it — refuses it for a reason of its own, or loads it — it refuses exactly the
cases the offline checks find a cause in. Cases it refuses only for a backend library it lacks are
undecided, not compared. Skipped, with the reason, where the corpus is absent. ~5 s on 2 cores."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from harness.checks.triton_qa import DEFAULT_CORPUS
from harness.checks.triton_qa_live import disagreements, process_server, render, run

pytestmark = pytest.mark.server
needs_corpus = pytest.mark.skipif(not (DEFAULT_CORPUS / "qa" / "L0_model_config").is_dir(),
                                  reason=f"Triton's QA corpus is not at {DEFAULT_CORPUS} (shared/triton-qa beside "
                                         "the project)")

# Disagreements explained by the embedded server being Triton 2.51 while the corpus is 2.73's: case key ->
# why, quoting the server. None as of Triton 2.51 / corpus e1db8a6.
KNOWN_DISAGREEMENTS: dict[str, str] = {}

# Decided refusals whose text is not the corpus's `expected` text, and why (the agreement holds: both refuse).
KNOWN_WORDING: dict[str, str] = {}  # case -> why the server's words differ from the corpus's (none today)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    logs = tmp_path_factory.mktemp("triton-qa-live-logs")
    rows, seconds = run(server_factory=functools.partial(process_server, log_dir=logs))
    return rows, seconds


@needs_corpus
def test_the_server_decides_a_substantial_number_of_cases(live):
    rows, seconds = live
    decided = [row for row in rows if row.server != "undecided"]
    assert len(rows) >= 200, len(rows)
    assert len(decided) >= 150, render(rows, seconds, details=True)
    groups = {row.case.group for row in decided}
    assert {"noautofill_platform", "special_cases", "autofill_noplatform/ensemble"} <= groups, sorted(groups)
    # Undecided means only that: every refusal of the case names a backend library the server lacks.
    for row in rows:
        if row.server == "undecided":
            assert row.missing_backends and all(load.missing_backend for load in row.loads if not load.loaded), row.case.key
    assert seconds < 120, f"the live cross-check took {seconds:.0f} s"


@needs_corpus
def test_every_decided_case_agrees_with_the_offline_verdict(live):
    """Triton refuses ⇔ the offline checks find a cause; Triton loads ⇔ no finding."""
    rows, seconds = live
    unexplained = [row for row in disagreements(rows) if row.case.key not in KNOWN_DISAGREEMENTS]
    if unexplained:
        pytest.fail("the server and the offline checks disagree:\n" + "\n".join(
            f"{row.case.key}: Triton {row.server} ({row.server_text or 'loaded'}); offline {row.offline.outcome}: "
            f"{row.offline.findings}" for row in unexplained), pytrace=False)
    still = {row.case.key for row in disagreements(rows)}
    assert set(KNOWN_DISAGREEMENTS) <= still, f"known disagreements that no longer occur: {set(KNOWN_DISAGREEMENTS) - still}"


@needs_corpus
def test_the_servers_refusals_carry_the_corpus_texts(live):
    """Not agreement but fidelity: the cases are served as Triton's QA serves them, so the server refuses with
    the corpus's own text, but for the explained exceptions."""
    rows, _ = live
    differs = {row.case.key: row.server_text for row in rows if row.wording == "differs"}
    assert set(differs) <= set(KNOWN_WORDING), {k: v for k, v in differs.items() if k not in KNOWN_WORDING}
    assert sum(row.wording == "same" for row in rows) >= 150


@needs_corpus
def test_no_server_outlives_the_cross_check(live):
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and b"tritonserver" in (stat.parent / "cmdline").read_bytes():
                children.append(stat.parent.name)
        except (OSError, IndexError, ValueError):
            continue
    assert children == [], f"tritonserver processes left running: {children}"


def test_a_model_the_server_loads_is_decided_loaded_and_agrees(tmp_path):
    """Every in-scope case Triton's QA loads needs a backend the embedded server lacks (identity, onnxruntime),
    so the corpus never exercises 'loaded' here: a Python model the server does load stands in for one."""
    from harness.checks.triton_qa import Case
    from harness.checks.triton_qa_live import cross_check
    from tests.conftest import write_scale_add

    source = write_scale_add(tmp_path / "source")
    case = Case("autofill_noplatform_success/python", source.name, source, accept=True)
    (row,), _ = cross_check([case], server_factory=functools.partial(process_server, log_dir=tmp_path / "logs"))
    assert (row.server, row.offline.outcome, row.agreement) == ("loaded", "clean", "agree"), (row.server_text,
                                                                                             row.offline.findings)
