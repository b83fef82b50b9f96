"""The ablation ladder (`yts diagnose`, harness.diagnose.ladder) locates each fixture's defect at its rung, on the
embedded server, and leaves the repository it was given untouched:
- the reference repository: every rung agrees (plain, dynamic batching, served pre/post-processing);
- fixtures/diagnose batch_mixing (rows of a batch swapped): plain agrees, 'dynamic batching' diverges first —
  through `yts diagnose --report-dir`, into diagnose.json and the report's "Ablation ladder" section;
- fixtures/diagnose int8_scales (the INT8 version's weight scales x1.6): 'int8' diverges first; int8_correct
  (scales untouched, slow) agrees at every rung, so the INT8 tolerance is not what trips.

Speed: one ladder ~25 s on two cores (8 images per rung, the reference CPU build from the cache)."""

from __future__ import annotations

import json
import re

import pytest

from harness import paths
from harness.diagnose.ladder import BATCHING, INT8, PLAIN, SERVED, run_ladder
from harness.repository.scratch import fingerprint
from tests.conftest import load_module

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def fixtures():
    return load_module(paths.FIXTURES / "diagnose" / "build.py")


def ladder_of(repo):
    before = fingerprint(repo)
    ladder = run_ladder(repo, log=lambda line: None)
    assert fingerprint(repo) == before, "the ladder edited the repository it was given"
    return ladder, {r.name: r for r in ladder.rungs}


def test_reference_agrees_at_every_rung():
    from harness.reference import build_reference_repository

    ladder, rungs = ladder_of(build_reference_repository("cpu", 640))
    assert ladder.first_divergent is None, "\n".join(r.line() for r in ladder.rungs)
    for name in (PLAIN, BATCHING, SERVED):
        assert rungs[name].skipped is None and rungs[name].matched >= 0.99, rungs[name].line()
    assert ladder.verdict() == "every rung agrees with the FP32 reference (yolo_raw)"


def test_batch_mixing_is_located_at_dynamic_batching(tmp_path, fixtures, capsys):
    """Through `yts diagnose --repo R --report-dir D`, into a report directory a run left (report.json and
    report.html): diagnose.json and diagnose.html written, report.json's "diagnose", report.html's section under
    the run's own verdict; exit 1."""
    from harness.cli import main
    from harness.report import html

    repo, report_dir = fixtures.batch_mixing(tmp_path / "models"), tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "report.json").write_text(json.dumps({"environment": {}, "checks": []}))
    html.render(report_dir, "NOT CERTIFIED: the run's own verdict")
    before = fingerprint(repo)
    assert main(["diagnose", "--repo", str(repo), "--report-dir", str(report_dir)]) == 1, capsys.readouterr().out
    assert fingerprint(repo) == before, "the ladder edited the repository it was given"
    ladder = json.loads((report_dir / "diagnose.json").read_text())
    rungs = {r["name"]: r for r in ladder["rungs"]}
    lines = "\n".join(map(str, ladder["rungs"]))
    assert rungs[PLAIN]["skipped"] is None and not rungs[PLAIN]["diverges"], lines
    assert ladder["first_divergent"] == BATCHING and rungs[BATCHING]["diverges"], lines
    assert ladder["verdict"].startswith("detections first diverge at rung 'dynamic batching'")
    assert json.loads((report_dir / "report.json").read_text())["diagnose"] == ladder
    for page in ("report.html", "diagnose.html"):
        text = (report_dir / page).read_text()
        section = text[text.index("<h2 id='ablation-ladder'>Ablation ladder</h2>"):]
        assert re.search(r"<tr class=first-divergent><td>2</td><th>dynamic batching</th>.*FIRST DIVERGENT", section), section
        assert "detections first diverge at rung &#x27;dynamic batching&#x27;" in section
    assert html.verdict_line_of(report_dir) == "NOT CERTIFIED: the run's own verdict"


def test_broken_int8_scales_are_located_at_int8(tmp_path, fixtures):
    ladder, rungs = ladder_of(fixtures.int8_scales(tmp_path / "models"))
    assert not rungs[PLAIN].diverges and not rungs[BATCHING].diverges, "\n".join(r.line() for r in ladder.rungs)
    assert ladder.first_divergent is rungs[INT8], "\n".join(r.line() for r in ladder.rungs)
    assert ladder.verdict().startswith("detections first diverge at rung 'int8' (yolo_raw: INT8 version 2)")


@pytest.mark.slow
def test_correct_int8_agrees(tmp_path, fixtures):
    ladder, rungs = ladder_of(fixtures.int8_scales(tmp_path / "models", 1.0))
    assert rungs[INT8].skipped is None and ladder.first_divergent is None, "\n".join(r.line() for r in ladder.rungs)
