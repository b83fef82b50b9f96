"""Issue #22 items 2, 3, 5, 6: a model this host cannot serve (a GPU, a backend the server lacks, an
ensemble step that does) has its checks "not tested on this host, because <model> needs <...>; <way
out>", once per model, and the verdict is "CERTIFIED for what could be tested here" (strict mode
refuses); a model that fails to load for its own fault still fails, quoting Triton; harness self-checks
never count as the vendor's; the verdict names every failing check with its whole cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import hostinfo
from harness.report import gate
from harness.reference.loadable import host_needs, loadable_models
from harness.repository.config import read_config, write_config
from tests.conftest import certify_repo, verdict_block

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "availability"
on_a_gpu_host = pytest.mark.skipif(hostinfo.has_gpu(), reason="the fixtures' KIND_GPU model is servable on a GPU host")


def _certify(repo: Path, report_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """The config suite (its live checks load each model) without the role check: the fixture's ensemble
    (images in, raw rows out, as in fixtures/config/good) has no role to judge."""
    return certify_repo(repo, report_dir, ("config",), "-k", "not test_role", certify_args=args)


def test_host_needs_are_facts_of_config_server_and_host(tmp_path):
    repository = tmp_path / "models"
    for name in ("yolo_detector", "yolo_ensemble", "yolo_onnx", "yolo_preprocess"):
        write_config(repository / name, read_config(FIXTURES / "host_limited" / name))
    plan = read_config(repository / "yolo_onnx")
    plan.name, plan.platform = "yolo_trt", "tensorrt_plan"
    write_config(repository / "yolo_trt", plan)
    needs = host_needs(repository, {"python"}, frozenset())
    assert needs == {
        "yolo_detector": "a GPU",
        "yolo_ensemble": "its step 'yolo_detector', which needs a GPU",
        "yolo_onnx": "the onnxruntime backend (this server has python)",
        "yolo_trt": "a GPU and the tensorrt backend (this server has python)",
    }
    assert loadable_models(repository, {"python"}, frozenset()) == ("yolo_preprocess",)
    # a GPU host with every backend serves them all; a group pinned to a GPU it lacks does not
    assert host_needs(repository, {"python", "onnxruntime", "tensorrt"}, frozenset({0})) == {}
    detector = read_config(repository / "yolo_detector")
    detector.instance_group[0].gpus.append(1)
    write_config(repository / "yolo_detector", detector)
    assert host_needs(repository, {"python", "onnxruntime", "tensorrt"}, frozenset({0}))["yolo_detector"] == \
        "GPU [1] (this host has [0])"
    # unknown server facts (a running server elsewhere) decide nothing
    assert host_needs(repository, None, None) == {}


@on_a_gpu_host
def test_host_limited_models_are_not_tested_once_each_and_certified_for_the_rest(tmp_path):
    result = _certify(FIXTURES / "host_limited", tmp_path / "report")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    verdict = verdict_block(result.stdout, "CERTIFIED").splitlines()
    assert verdict[0] == ("CERTIFIED for what could be tested here; not tested: yolo_detector (needs a GPU); "
                          "yolo_ensemble (needs its step 'yolo_detector', which needs a GPU); "
                          "yolo_onnx (needs the onnxruntime backend (this server has python))"), verdict
    assert any(line.startswith("  not tested on this host, because yolo_detector needs a GPU; run on a GPU host (")
               for line in verdict), verdict
    assert any("yolo_onnx needs the onnxruntime backend (this server has python); run with --triton=container "
               "--triton-image nvcr.io/nvidia/tritonserver:<yy.mm>-py3" in line for line in verdict), verdict
    assert "Traceback" not in result.stdout and "[NOTSET]" not in result.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    live = {c["model"]: c for c in report["checks"] if "test_live[" in c["id"]}
    assert live["yolo_preprocess"]["verdict"] == "passed"
    assert live["yolo_detector"]["verdict"] == "not tested" and live["yolo_detector"]["host_limited"] is True
    # the offline checks of an unservable model still judge its files
    assert {c["verdict"] for c in report["checks"] if c.get("model") == "yolo_onnx" and "test_live" not in c["id"]} <= {
        "passed", "not applicable"}
    assert set(report["not_servable_here"]) == {"yolo_detector", "yolo_ensemble", "yolo_onnx"}
    assert report["models"]["yolo_detector"]["config"]["not tested"] == 1
    # strict mode refuses, saying why
    strict = gate.judge(report, gate.load_profile("certified"), strict=True)
    assert not strict.certified and strict.line().startswith("NOT CERTIFIED: strict: not tested on this host: yolo_detector")
    assert "id='models'" in (tmp_path / "report" / "report.html").read_text()


def test_own_fault_still_fails_quoting_triton(tmp_path):
    result = _certify(FIXTURES / "own_fault", tmp_path / "report", "--strict")
    assert result.returncode == 1, result.stdout[-4000:]
    verdict = verdict_block(result.stdout).splitlines()
    assert verdict[0] == "NOT CERTIFIED: 1 required check(s) failed", verdict
    failed = [line for line in verdict if line.startswith("  FAILED ")]
    assert len(failed) == 1 and "test_live[broken_detector]" in failed[0], verdict
    assert "weights.bin is missing next to model.py" in failed[0], failed


def _check(id_: str, verdict: str, message: str = "", **facts) -> dict:
    return {"id": id_, "suite": id_.split("/")[1], "verdict": verdict, "message": message, "values": {}, **facts}


def test_verdict_names_every_cause_and_keeps_self_checks_apart():
    findings = "Failed: 2 findings:\n- [bindings] m: dim 1 is -1\n- [bindings] m: dim 2 is -1"
    report = {"checks": [
        _check("suites/config/test_a.py::test_bindings[m]", "failed", findings, model="m"),
        _check("suites/lifecycle/test_b.py::test_x", "not tested", "not tested, because no model can be driven"),
        _check("suites/lifecycle/test_b.py::test_y", "not tested", "not tested, because no model can be driven"),
        _check("suites/letterbox/test_forward.py::test_z", "failed", "our letterbox is off", harness_self_check=True),
        _check("suites/protocol/test_c.py::test_ok", "passed"),
    ]}
    verdict = gate.judge(report, gate.load_profile("certified"))
    lines = verdict.line().splitlines()
    assert lines[0] == "NOT CERTIFIED: 1 required check(s) failed, 2 required check(s) not tested"
    assert lines[1] == ("  FAILED suites/config/test_a.py::test_bindings[m]: Failed: 2 findings: "
                        "- [bindings] m: dim 1 is -1 - [bindings] m: dim 2 is -1")
    assert lines[2] == "  not tested, because no model can be driven (2 check(s): test_b.py::test_x, test_b.py::test_y)"
    assert len(lines) == 3 and "letterbox" not in verdict.line()  # a self-check is not the vendor's failure
    assert "not tested: not tested" not in verdict.line()
    # alone, the self-check's failure does not deny the vendor's certification
    report["checks"] = [c for c in report["checks"] if c.get("harness_self_check") or "protocol" in c["id"]]
    assert gate.judge(report, gate.load_profile("certified")).certified


def test_empty_parameter_set_is_not_applicable_and_has_no_pytest_placeholder(pytester, tmp_path):
    pytester.makepyfile(test_empty="""
import pytest

@pytest.mark.parametrize("model", [])
def test_per_model(model):
    pass

def test_ok():
    pass
""")
    report_dir = tmp_path / "report"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--report-dir={report_dir}")
    checks = {c["id"].split("::")[-1]: c for c in json.loads((report_dir / "report.json").read_text())["checks"]}
    assert checks["test_per_model"]["verdict"] == "not applicable", checks
    assert checks["test_per_model"]["message"] == "not applicable: no model of this repository for this check"


def test_models_declared_skip_are_excluded_not_blocking():
    report = {"declared_skip": ["tokenizer"], "checks": [
        _check("suites/config/test_r.py::test_role[tokenizer]", "not tested", "not tested, because yts.toml marks tokenizer skip",
               model="tokenizer"),
        _check("suites/config/test_r.py::test_role[detector]", "passed", model="detector"),
    ]}
    verdict = gate.judge(report, gate.load_profile("certified"))
    assert verdict.certified and verdict.line().splitlines() == [
        "CERTIFIED: every required check passed", "  excluded, declared skip: tokenizer"]


@on_a_gpu_host
def test_absent_engine_of_a_gpu_only_model_is_not_tested_here_but_a_missing_model_py_fails(tmp_path):
    repository = tmp_path / "models"
    plan = read_config(FIXTURES / "host_limited" / "yolo_onnx")
    plan.name, plan.platform = "yolo_trt", "tensorrt_plan"
    write_config(repository / "yolo_trt", plan)
    (repository / "yolo_trt" / "1").mkdir()  # the engine is built on the GPU host that serves it
    write_config(repository / "yolo_preprocess", read_config(FIXTURES / "host_limited" / "yolo_preprocess"))
    (repository / "yolo_preprocess" / "1").mkdir()  # model.py forgotten: the repository's own fault
    result = subprocess.run([sys.executable, "-m", "pytest", "suites/config", f"--repo={repository}", "-k", "test_layout",
                             "-p", "no:randomly", "-rs", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 skipped" in result.stdout, result.stdout[-3000:]
    assert ("not tested on this host, because yolo_trt needs a GPU and the tensorrt backend (this server has python); "
            "run on a GPU host with --triton=container") in result.stdout
    assert "(its engine model.plan is absent: it is built on the GPU host that serves it)" in result.stdout
    assert "yolo_preprocess/1/model.py: missing" in result.stdout


def test_metadata_only_onnx_config_is_judged_as_triton_completes_it():
    """Issue #32 item 1: an Ultralytics-style config (the `metadata` parameter and an accelerator, nothing
    else) is the ONNX model Triton completes from model.onnx — it needs the onnxruntime backend (not
    "the <none> backend"), is loaded wherever that backend is, and is a raw accuracy candidate."""
    from harness.accuracy.served import served_models

    repository = FIXTURES / "metadata_only"
    assert read_config(repository / "yolo").platform == ""  # the file alone names no backend
    assert host_needs(repository, {"python"}, frozenset()) == {
        "yolo": "the onnxruntime backend (this server has python)"}
    assert host_needs(repository, {"python", "onnxruntime"}, frozenset()) == {}
    assert loadable_models(repository, {"python", "onnxruntime"}, frozenset()) == ("yolo",)
    assert served_models(repository) == [("yolo", "raw")]
