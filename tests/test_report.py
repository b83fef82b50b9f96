"""Certification mode: a run writes report.json / report.html / junit.xml; the gate says CERTIFIED only
when every required check passed and otherwise names the failing checks; the HTML renders in a real
headless Chromium with its plots and fetches nothing from outside."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.report import gate
from tests.conftest import assert_not_certified, certify_repo, verdict_block

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _certify(tmp_path: Path, *extra: str, suites: tuple[str, ...] = ("letterbox",),
             select: str = "padding or shape") -> tuple[subprocess.CompletedProcess, Path]:
    report_dir = tmp_path / "report"
    return certify_repo(tmp_path, report_dir, suites, "-k", select, *extra), report_dir


@pytest.fixture(scope="module")
def certified_run(tmp_path_factory):
    """A repository's offline config checks and the harness's own letterbox (self-checks, reported apart)."""
    from tests.conftest import write_scale_add

    repository = write_scale_add(tmp_path_factory.mktemp("good") / "models").parent
    return _certify(repository, suites=("letterbox", "config"), select="padding or shape or test_schema")


def test_reference_is_certified(certified_run):
    result, report_dir = certified_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "CERTIFIED: every required check passed" in result.stdout
    report = json.loads((report_dir / "report.json").read_text())
    assert report["checks"] and all(c["verdict"] == "passed" for c in report["checks"])
    # the harness's own letterbox is reported apart, never as the repository's pass
    assert {c["suite"] for c in report["checks"] if not c.get("harness_self_check")} == {"config"}
    assert set(report["models"]) == {"scale_add", "(harness self-checks)"}, report["models"]
    assert "scale_add: config 1 passed" in result.stdout
    assert report["environment"]["onnxruntime"]
    assert (report_dir / "junit.xml").read_text().count("<testcase") == len(report["checks"])


def test_broken_input_is_not_certified_and_named(tmp_path):
    result, report_dir = _certify(tmp_path, "--letterbox-impl", "fixtures.letterbox.pad_zero:LETTERBOX")
    assert result.returncode != 0
    block = verdict_block(result.stdout)
    assert block is not None and "FAILED suites/letterbox/" in block, result.stdout[-3000:]
    verdict = gate.judge(report_dir / "report.json", gate.load_profile("certified"))
    assert not verdict.certified and verdict.failing


def test_untested_required_check_is_not_certified():
    report = {"checks": [{"id": "suites/config/test_x.py::test_a", "suite": "config", "verdict": "not tested",
                          "message": "not tested, because the server has no onnxruntime backend", "values": {}}]}
    verdict = gate.judge(report, {"required": ["suites/config/*"], "allowed_not_tested": []})
    assert not verdict.certified and "not tested, because" in verdict.line()
    assert gate.judge(report, {"required": ["suites/config/*"], "allowed_not_tested": ["*test_a"]}).certified


def test_coverage_without_the_repositorys_list_never_counts_below_zero():
    """A report that does not list the repository's models (an older one, a repository that could not be
    read) says how many models were not tested, never "tested -1 of 0"; with the list, nothing tested is
    never certified, whatever the profile accepts."""
    check = {"id": "suites/protocol/test_x.py::test_a", "suite": "protocol", "verdict": "passed", "message": "",
             "values": {}}
    report = {"checks": [check], "not_servable_here": {"yolo": "yolo needs a GPU; run on a GPU host"}}
    profile = {"required": ["suites/protocol/*"], "accept_partial": True}
    verdict = gate.judge(report, profile)
    assert verdict.coverage == "1 models not tested" and "-1" not in verdict.line(), verdict.line()
    assert verdict.line().startswith("CERTIFIED for what could be tested here (PARTIAL, accepted by the profile)")
    listed = gate.judge({**report, "repository_models": ["yolo"]}, profile)
    assert not listed.certified and listed.nothing_tested and "(tested 0 of 1 models)" in listed.line()


def test_models_the_adapter_refused_count_as_not_tested_in_the_coverage():
    """Issue #32: an onnxruntime_onnx model the ONNX Runtime adapter refused (Triton's backend would) is a model not
    tested: a run where it was the only one says "no model of the repository was tested (tested 0 of 1)", naming
    it and why, not only its checks' count; one beside a tested model reads "tested 1 of 2"."""
    why = "not tested: Triton's onnxruntime backend would refuse it: [bindings] input 'image' is not an input"
    refused = {"id": "suites/protocol/test_x.py::test_a[yolo_onnx]", "suite": "protocol", "verdict": "not tested",
               "message": why, "values": {}, "model": "yolo_onnx"}
    report = {"checks": [refused], "repository_models": ["yolo_onnx"], "adapter_refused": {"yolo_onnx": why}}
    profile = {"required": ["suites/protocol/*"], "accept_partial": True}
    alone = gate.judge(report, profile)
    assert not alone.certified and alone.nothing_tested, alone.line()
    assert ("no model of the repository was tested (tested 0 of 1 models); not tested: yolo_onnx (Triton's "
            "onnxruntime backend would refuse it: [bindings] input 'image' is not an input)") in alone.line(), alone.line()
    passed = {"id": "suites/protocol/test_x.py::test_a[yolo_raw]", "suite": "protocol", "verdict": "passed",
              "message": "", "values": {}, "model": "yolo_raw"}
    beside = gate.judge({**report, "checks": [refused, passed], "repository_models": ["yolo_onnx", "yolo_raw"]}, profile)
    assert not beside.certified and beside.coverage == "tested 1 of 2 models", beside.line()


def test_missing_optional_tool_is_listed_and_does_not_block(pytester, tmp_path):
    """A required check that needs an absent optional tool (wrk) is "not tested here", with how to install
    it, and the run is still certified (issue #22 item 8)."""
    pytester.makepyfile(test_tool="""
from harness.verdicts import optional_tool_missing
def test_ok():
    pass
def test_needs_wrk():
    optional_tool_missing("wrk is not installed (apt-get install wrk)")
""")
    profile = tmp_path / "all.toml"
    profile.write_text('required = ["*"]\n')
    report_dir = tmp_path / "report"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--report-dir={report_dir}",
                                           f"--certify-profile={profile}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["CERTIFIED: every required check passed",
                                 "  not tested here, because wrk is not installed (apt-get install wrk) (harness's optional "
                                 "tool; does not block: 1 check(s): test_tool.py::test_needs_wrk)"])
    check = next(c for c in json.loads((report_dir / "report.json").read_text())["checks"]
                 if c["id"].endswith("test_needs_wrk"))
    assert check["verdict"] == "not tested" and check["blocks_certification"] is False
    # the same check failing for a reason of the repository's own still blocks
    check.update(verdict="not tested", message="not tested, because the server has no onnxruntime backend")
    del check["blocks_certification"]
    assert not gate.judge({"checks": [check]}, {"required": ["*"]}).certified


def test_html_is_self_contained(certified_run):
    text = (certified_run[1] / "report.html").read_text()
    external = re.findall(r"""(?:src|href)=['"](?!data:)([^'"]+)""", text)
    assert external == [], f"report.html references external resources: {external}"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_html_renders_in_headless_chromium(certified_run, tmp_path):
    page = certified_run[1] / "report.html"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "id=\"verdict\"" in dom and "CERTIFIED" in dom
    assert re.search(r'<img id="verdict-plot"[^>]+src="data:image/png;base64,', dom), "the verdict plot is missing"
    shot = tmp_path / "shot.png"
    subprocess.run([*common, "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000, "chromium rendered an (almost) empty page"


def test_not_applicable_checks_are_not_judged(pytester):
    """A skip through harness.verdicts.not_applicable is reported as such and does not deny certification."""
    pytester.makepyfile(test_na="""
        from harness.verdicts import not_applicable

        def test_ensemble_bindings():
            not_applicable("an ensemble has no model file")

        def test_passes():
            assert True
    """)
    report_dir = pytester.path / "report"
    pytester.runpytest_subprocess(f"--report-dir={report_dir}", "-p", "no:cacheprovider")
    report = json.loads((report_dir / "report.json").read_text())
    verdicts = {c["id"].split("::")[-1]: (c["verdict"], c["message"]) for c in report["checks"]}
    assert verdicts["test_ensemble_bindings"] == ("not applicable", "not applicable: an ensemble has no model file")
    assert gate.judge(report, {"required": ["*"], "allowed_not_tested": []}).certified


def test_broken_repository_is_not_certified_and_the_verdict_names_it(tmp_path):
    """Issue 11: a broken repository of fixtures/config through `yts certify` (offline checks), as a user runs it.
    Every other one's verdict on its own report is test_config_suite's (the same gate, in-process: #33); those
    of fixtures/protocol and fixtures/batching go through certify in their own tests (test_protocol_fixtures,
    test_batching_fixtures): one served run proves both the failing check and the verdict."""
    from test_config_suite import BROKEN

    check, _ = BROKEN["wrong_input_name"]
    result = certify_repo(ROOT / "fixtures" / "config" / "wrong_input_name", tmp_path / "report", ("config",), "-m", "not server")
    assert_not_certified(result, "config", check)


@pytest.mark.server
def test_promotion_that_unloads_first_is_not_certified(tmp_path):
    """fixtures/lifecycle's wrapper that unloads before it loads, through `yts certify` (the letterbox
    suite's broken input is test_broken_input_is_not_certified_and_named)."""
    from tests.conftest import write_scale_add
    from tests.test_lifecycle import UNLOAD_FIRST

    repository = write_scale_add(tmp_path / "models").parent
    result = certify_repo(repository, tmp_path / "report", ("lifecycle",), "-k", "test_add_version_under_traffic and latest1",
                          "--lifecycle-driver", UNLOAD_FIRST, "--lifecycle-lead-s=0.5", "--lifecycle-tail-s=1.0")
    block = verdict_block(result.stdout)
    assert result.returncode != 0 and block is not None, result.stdout[-3000:]
    assert "test_add_version_under_traffic" in block, block


def _ladder_dict(repository: Path) -> dict:
    """A real Ladder's as_dict, batch_mixing's shape: plain agrees, dynamic batching diverges, later rungs."""
    from harness.diagnose.ladder import BATCHING, FP16, INSTANCES, INT8, PLAIN, SERVED, Ladder, Rung

    def ran(name, change, matched, extra, model="yolo_raw"):
        return Rung(name, change, matched=matched, extra=extra, per_model={model: {"matched": matched, "extra": extra}})

    return Ladder(repository, "yolo_raw", [
        ran(PLAIN, "yolo_raw: FP32 version 1, no dynamic batching, one instance", 1.0, 0.0),
        ran(BATCHING, "yolo_raw: dynamic_batching as configured, 8 requests at once", 0.12, 0.88),
        Rung(FP16, "", skipped="yolo_raw has no FP16 version"), Rung(INT8, "", skipped="yolo_raw has no INT8 version"),
        ran(SERVED, "end-to-end models ['yolo_e2e']", 0.1, 0.9, "yolo_e2e"),
        Rung(INSTANCES, "", skipped="yolo_raw runs one instance")]).as_dict()


def test_ablation_ladder_section_renders_from_a_ladder(tmp_path):
    """Issue #23 item 5: report.html shows the ladder (diagnose.json in the report directory): one row per rung,
    the first divergent one highlighted, the verdict above; no diagnose.json, no section."""
    from harness.report import html

    ladder = _ladder_dict(tmp_path / "models")
    (tmp_path / "report.json").write_text(json.dumps({"environment": {}, "checks": []}))
    assert "Ablation ladder" not in html.render(tmp_path, "NOT CERTIFIED: 1 required check(s) failed").read_text()
    (tmp_path / html.DIAGNOSE_NAME).write_text(json.dumps(ladder))
    text = html.render(tmp_path, "NOT CERTIFIED: 1 required check(s) failed").read_text()
    section = text[text.index("<h2 id='ablation-ladder'>Ablation ladder</h2>"):]
    assert "detections first diverge at rung &#x27;dynamic batching&#x27;" in section
    rows = re.findall(r"<tr(?: class=(\S+))?><td>\d+</td><th>([^<]+)</th>(.*?)</tr>", section)
    assert [name for _, name, _ in rows] == ["plain", "dynamic batching", "fp16", "int8", "served pre/post-processing",
                                             "more instances"]
    assert [name for css, name, _ in rows if css] == ["dynamic batching"]  # highlighted: the first divergent only
    cells = {name: cells for _, name, cells in rows}
    assert ">agrees<" in cells["plain"] and "100%" in cells["plain"] and "&ge; 99% matched" in cells["plain"]
    assert ">FIRST DIVERGENT<" in cells["dynamic batching"] and "12%" in cells["dynamic batching"]
    assert ">diverges<" in cells["served pre/post-processing"] and "yolo_e2e: 10% matched" in cells["served pre/post-processing"]
    assert "not run: yolo_raw has no FP16 version" in cells["fp16"]
    assert html.verdict_line_of(tmp_path) == "NOT CERTIFIED: 1 required check(s) failed"
    assert "Ablation ladder" in html.render_diagnose(tmp_path, {"repository": "R", "error": "no raw model"}).read_text()


def test_certify_diagnose_runs_the_ladder_only_after_an_accuracy_failure(tmp_path, monkeypatch):
    """`yts certify --diagnose`: a failing accuracy check (the repository's) is followed by the ladder on --repo
    before report.html is rendered again; report.json gets "diagnose"; the exit code stays the gate's. Without
    an accuracy failure the ladder does not run. (pytest and the ladder stand-ins: no server.)"""
    from harness.cli import build_parser
    from harness.diagnose import ladder as ladder_module
    from harness.report import certify, html

    repo, report_dir = tmp_path / "models", tmp_path / "report"
    repo.mkdir()
    ladders = []

    def fake_run_ladder(path, count=8, log=print):
        ladders.append(path)
        return type("L", (), {"as_dict": lambda self: _ladder_dict(path)})()

    def fake_pytest(verdict):
        def run(command):
            check = {"id": "suites/accuracy/test_boxes.py::test_boxes[yolo_raw]", "suite": "accuracy", "verdict": verdict,
                     "duration_s": 1.0, "message": "boxes differ" if verdict == "failed" else "", "values": {}}
            self_check = dict(check, id="suites/accuracy/test_x.py::test_y[variant:fp16]", verdict="failed",
                              harness_self_check=True)
            report_dir.mkdir(exist_ok=True)
            (report_dir / "report.json").write_text(json.dumps({"environment": {}, "checks": [check, self_check],
                                                                "complete": True}))
            html.render(report_dir, "as pytest rendered it")
            return (1 if verdict == "failed" else 0), None
        return run

    monkeypatch.setattr(ladder_module, "run_ladder", fake_run_ladder)
    args = build_parser().parse_args(["certify", "--repo", str(repo), "--report-dir", str(report_dir), "--diagnose"])
    monkeypatch.setattr(certify, "run_forwarding_signals", fake_pytest("passed"))
    assert certify.certify(args) == 0 and ladders == [] and not (report_dir / "diagnose.json").exists()
    assert "Ablation ladder" not in (report_dir / "report.html").read_text()

    monkeypatch.setattr(certify, "run_forwarding_signals", fake_pytest("failed"))
    assert certify.certify(args) == 1 and ladders == [repo]
    report = json.loads((report_dir / "report.json").read_text())
    assert report["diagnose"]["first_divergent"] == "dynamic batching"
    assert report["diagnose"]["after"] == ["suites/accuracy/test_boxes.py::test_boxes[yolo_raw]"]
    assert json.loads((report_dir / "diagnose.json").read_text()) == report["diagnose"]
    text = (report_dir / "report.html").read_text()
    assert "NOT CERTIFIED" in text and "as pytest rendered it" not in text  # rendered again, judged by the gate
    assert "<h2 id='ablation-ladder'>Ablation ladder</h2>" in text and "class=first-divergent" in text
