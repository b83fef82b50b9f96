"""A correct end-to-end model written without the harness (fixtures/third_party: numpy, Pillow and ONNX Runtime
in its model.py, nothing imported from the harness), alone in a repository with no yts.toml, is certified on
this host by `yts certify`: exit 0, verdict CERTIFIED, and the checks added for answers under batching
(suites/accuracy/test_batched_answers.py), the deployment's thresholds (test_thresholds), the client-input
catalogue (suites/letterbox/test_client_inputs.py) and the lifecycle suite ran for the model and passed.

One whole certify run takes 15-18 min on the 2-core CPU machine beside other test runs (900 s of pytest at
load ~2, 656 s of it the lifecycle suite; 1099 s at load ~5; peak RSS of the largest process 0.81-0.86 GB,
/usr/bin/time -v), hence `slow` (opt in with --run-slow). The other tests here take seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.vision.catalogue import NAMES
from tests.conftest import verdict_block

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "third_party"
MODEL = "vendor_yolo"


def _build(out: Path) -> Path:
    subprocess.run([sys.executable, str(FIXTURE / "build.py"), str(out), "640"], cwd=ROOT, check=True,
                   capture_output=True, text=True, timeout=600)
    return out


def test_model_py_imports_nothing_of_the_harness():
    import ast

    tree = ast.parse((FIXTURE / "model.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    allowed = {"io", "json", "os", "warnings", "numpy", "onnxruntime", "PIL", "triton_python_backend_utils"}
    assert imported <= allowed, imported


def test_build_writes_one_model_read_as_end_to_end(tmp_path):
    from harness.repository.config import read_config
    from harness.repository.layouts import ROLE_E2E, read_layout

    repository = _build(tmp_path / "models")
    assert sorted(p.name for p in repository.iterdir()) == [MODEL]  # alone: no yts.toml, no other model
    config = read_config(repository / MODEL)
    layout = read_layout(config)
    assert layout.role == ROLE_E2E, layout.describe()
    assert config.max_batch_size == 8 and config.HasField("dynamic_batching")
    assert sorted(p.name for p in (repository / MODEL / "1").iterdir()) == ["model.onnx", "model.py"]


def test_exit_status_is_the_gates_when_only_a_self_check_fails(pytester, tmp_path):
    """Found certifying this model: the harness's own test_generator_fidelity (wrk against its load generator,
    a self-check, never required) failed under load, the verdict read CERTIFIED, yet `yts certify` exited 1
    (pytest's status for any failed test). The exit status is the gate's: 0 when certified, 1 when not."""
    pytester.mkpydir("suites")
    pytester.mkpydir("suites/batching")
    (pytester.path / "suites" / "batching" / "test_batching.py").write_text(
        "def test_generator_fidelity():\n    assert False, 'our generator 16.0 infer/s, wrk 9.5'\n"
        "def test_repository_check():\n    pass\n")
    profile = tmp_path / "all.toml"
    profile.write_text('required = ["*"]\n')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--report-dir={tmp_path / 'report'}",
                                           f"--certify-profile={profile}")
    result.stdout.fnmatch_lines(["CERTIFIED: every required check passed"])
    assert result.ret == 0, result.stdout.str()[-3000:]
    # a failing check the profile requires still fails the run
    (pytester.path / "suites" / "batching" / "test_batching.py").write_text(
        "def test_repository_check():\n    assert False\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--report-dir={tmp_path / 'report2'}",
                                           f"--certify-profile={profile}")
    result.stdout.fnmatch_lines(["NOT CERTIFIED: 1 required check(s) failed"])
    assert result.ret == 1


# The checks each issue added, and the suite they prove: ran for the model and passed, never skipped. The
# lifecycle suite's checks drive the repository's one model (its stdout names it) but carry no model.
SUITE_CHECKS = {
    "batched answers": (lambda i: i.startswith("suites/accuracy/test_batched_answers.py::"), MODEL),
    "thresholds": (lambda i: i.startswith("suites/accuracy/test_accuracy.py::test_thresholds["), MODEL),
    "client inputs": (lambda i: i.startswith("suites/letterbox/test_client_inputs.py::"), MODEL),
    "lifecycle": (lambda i: i.startswith("suites/lifecycle/"), None),
}


@pytest.mark.slow
def test_third_party_model_is_certified(tmp_path):
    repository = _build(tmp_path / "models")
    report_dir = tmp_path / "report"
    command = [sys.executable, "-m", "harness.cli", "certify", "--repo", str(repository),
               "--report-dir", str(report_dir)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    tail = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    verdict = verdict_block(result.stdout, "CERTIFIED")
    # a CPU host adds "for what could be tested here; not tested: test_metrics.py::test_gpu_metrics_present"
    assert verdict is not None and verdict.startswith("CERTIFIED"), tail
    assert MODEL not in verdict.splitlines()[0], verdict  # the model itself was served and judged here
    assert f"[yts lifecycle] model '{MODEL}'" in result.stdout, tail
    report = json.loads((report_dir / "report.json").read_text())
    assert report["complete"] is True
    checks = report["checks"]
    for what, (chosen, model) in SUITE_CHECKS.items():
        mine = [c for c in checks if chosen(c["id"]) and c.get("model") == model]
        assert mine, f"no {what} check ran for {MODEL}: {sorted(c['id'] for c in checks if chosen(c['id']))}"
        assert {c["verdict"] for c in mine} == {"passed"}, \
            f"{what}: " + "; ".join(f"{c['id']}: {c['verdict']} {c['message'][:300]}"
                                    for c in mine if c["verdict"] != "passed")
    assert len([c for c in checks if SUITE_CHECKS["client inputs"][0](c["id"])]) == len(NAMES)  # the whole catalogue
    # none of the repository's checks failed (a harness self-check such as the load-sensitive
    # test_generator_fidelity is not the model's business and is reported apart)
    assert not [c["id"] for c in checks if c["verdict"] in ("failed", "error") and not c.get("harness_self_check")], tail
    # every suite has a row for the model, none with a failure
    assert {"accuracy", "batching", "config", "letterbox"} <= set(report["models"][MODEL]), report["models"]
