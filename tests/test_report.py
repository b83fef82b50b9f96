"""Certification mode: a run writes report.json / report.html / junit.xml; the gate says CERTIFIED only
when every required check passed and otherwise names the failing checks; the HTML renders in a real
headless Chromium with its plots and fetches nothing from outside."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import gate

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _certify(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    report_dir = tmp_path / "report"
    command = [sys.executable, "-m", "harness.cli", "certify", "--repo", str(tmp_path), "--suites", "letterbox",
               "--report-dir", str(report_dir), "--", "-p", "no:randomly", "-k", "padding or shape", *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300), report_dir


@pytest.fixture(scope="module")
def certified_run(tmp_path_factory):
    return _certify(tmp_path_factory.mktemp("good"))


def test_reference_is_certified(certified_run):
    result, report_dir = certified_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "CERTIFIED: every required check passed" in result.stdout
    report = json.loads((report_dir / "report.json").read_text())
    assert report["checks"] and all(c["verdict"] == "passed" for c in report["checks"])
    assert report["environment"]["onnxruntime"]
    assert (report_dir / "junit.xml").read_text().count("<testcase") == len(report["checks"])


def test_broken_input_is_not_certified_and_named(tmp_path):
    result, report_dir = _certify(tmp_path, "--letterbox-impl", "fixtures.letterbox.pad_zero:LETTERBOX")
    assert result.returncode != 0
    line = next(l for l in result.stdout.splitlines() if l.startswith("NOT CERTIFIED"))
    assert "suites/letterbox/" in line and "failed" in line, line
    verdict = gate.judge(report_dir / "report.json", gate.load_profile("certified"))
    assert not verdict.certified and verdict.failing


def test_untested_required_check_is_not_certified():
    report = {"checks": [{"id": "suites/config/test_x.py::test_a", "suite": "config", "verdict": "not tested",
                          "message": "not tested, because the server has no onnxruntime backend", "values": {}}]}
    verdict = gate.judge(report, {"required": ["suites/config/*"], "allowed_not_tested": []})
    assert not verdict.certified and "not tested, because" in verdict.line()
    assert gate.judge(report, {"required": ["suites/config/*"], "allowed_not_tested": ["*test_a"]}).certified


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
