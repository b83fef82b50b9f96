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


def test_an_execution_env_path_this_host_lacks_is_named_with_every_other_need(tmp_path):
    """A public repository's (gametwix/YOLO-TRITON-BASE64) Python steps run on a GPU from a conda-pack env at
    /app/env.tar.gz, which its README mounts into the container: the verdict named the GPU only, and the env
    file only once a load revealed it. For a server on this host, an absent EXECUTION_ENV_PATH is a need
    read from the config, with its way out; one the repository ships under $$TRITON_MODEL_DIRECTORY and lacks
    is its own fault (the config suite's), and a server in an image may have the file (not local)."""
    from harness.availability import reason

    repository = tmp_path / "models"
    for name in ("yolo_detector", "yolo_ensemble", "yolo_preprocess"):
        write_config(repository / name, read_config(FIXTURES / "host_limited" / name))
    for name, path in (("yolo_detector", "/app/env.tar.gz"), ("yolo_preprocess", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")):
        config = read_config(repository / name)
        config.parameters["EXECUTION_ENV_PATH"].string_value = path
        write_config(repository / name, config)
    needs = host_needs(repository, {"python"}, frozenset(), local=True)
    assert needs == {
        "yolo_detector": "a GPU and EXECUTION_ENV_PATH /app/env.tar.gz, which this host lacks",
        "yolo_ensemble": "its step 'yolo_detector', which needs a GPU and EXECUTION_ENV_PATH /app/env.tar.gz, which "
                         "this host lacks"}, needs
    assert reason("yolo_detector", needs["yolo_detector"]).endswith(
        "; run on a GPU host; provide the EXECUTION_ENV_PATH file there, or run with --triton=container "
        "--triton-image IMAGE (an image that has it)")
    assert host_needs(repository, {"python"}, frozenset({0}), local=True) == {
        "yolo_detector": "EXECUTION_ENV_PATH /app/env.tar.gz, which this host lacks",
        "yolo_ensemble": "its step 'yolo_detector', which needs EXECUTION_ENV_PATH /app/env.tar.gz, which this host "
                         "lacks"}
    assert reason("yolo_detector", "EXECUTION_ENV_PATH /app/env.tar.gz, which this host lacks") == (
        "yolo_detector needs EXECUTION_ENV_PATH /app/env.tar.gz, which this host lacks; provide the EXECUTION_ENV_PATH "
        "file there, or run with --triton=container --triton-image IMAGE (an image that has it)")
    assert host_needs(repository, {"python"}, frozenset())["yolo_detector"] == "a GPU"  # a server elsewhere


@on_a_gpu_host
def test_host_limited_models_are_not_tested_once_each_and_certified_for_the_rest(tmp_path):
    """With --no-adapter: yolo_onnx is not served through the ONNX Runtime adapter (tests/test_onnx_adapter.py)."""
    result = _certify(FIXTURES / "host_limited", tmp_path / "report", "--no-adapter")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    verdict = verdict_block(result.stdout, "CERTIFIED").splitlines()
    assert verdict[0].startswith(
        "CERTIFIED for what could be tested here (PARTIAL, accepted by the profile): tested 1 of 4 models; not tested: "
        "yolo_detector (needs a GPU; run on a GPU host); yolo_ensemble (needs its step 'yolo_detector', which needs a "
        "GPU; run on a GPU host); yolo_onnx (needs the onnxruntime backend (this server has python); run with "
        "--triton=container --triton-image nvcr.io/nvidia/tritonserver:<yy.mm>-py3)"), verdict
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
    # strict mode (or a profile that does not accept partial coverage) refuses: PARTIAL, its own exit status
    strict = gate.judge(report, gate.load_profile("certified"), strict=True)
    assert not strict.certified and strict.exit_status == gate.EXIT_PARTIAL
    assert strict.line().startswith("PARTIAL: tested 1 of 4 models; not tested: yolo_detector (needs a GPU"), strict.line()
    assert gate.judge(report, {**gate.load_profile("certified"), "accept_partial": False}).exit_status == gate.EXIT_PARTIAL
    assert "id='models'" in (tmp_path / "report" / "report.html").read_text()


def test_own_fault_still_fails_quoting_triton_once(tmp_path):
    """The model's own load failure fails test_live once, quoting Triton; the protocol suite's server starts
    again without it and tests the rest — no check errors with the same traceback (issue #32 item 4)."""
    result = certify_repo(FIXTURES / "own_fault", tmp_path / "report", ("config", "protocol"),
                          "-k", "not test_role and not test_bad_input")
    assert result.returncode == 1, result.stdout[-4000:]
    verdict = verdict_block(result.stdout).splitlines()
    assert verdict[0] == "NOT CERTIFIED: 1 required check(s) failed", verdict
    failed = [line for line in verdict if line.startswith("  FAILED ") or line.startswith("  ERROR ")]
    assert len(failed) == 1 and "test_live[broken_detector]" in failed[0], verdict
    assert "weights.bin is missing next to model.py" in failed[0], failed
    assert sum("weights.bin is missing" in line for line in verdict) == 1, verdict
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    protocol = [c for c in report["checks"] if c["suite"] == "protocol"]
    assert protocol and "error" not in {c["verdict"] for c in protocol}, [c for c in protocol if c["verdict"] == "error"]
    assert report["not_servable_here"] == {}  # its own fault, not the host's


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


def test_environment_cause_is_the_hosts_once_and_blocks_no_other_check(tmp_path):
    """Issue #32 item 4: a Python model importing a package the server's Python lacks is "not tested on this
    host, because MODEL's model.py needs module X; provide it with EXECUTION_ENV_PATH or --triton-image", once;
    the server starts again without it, the protocol suite tests the rest and says so: tested 1 of 2 models.
    The checks of the whole server ran against a server serving the repository's other model: they count."""
    result = certify_repo(FIXTURES / "needs_module", tmp_path / "report", ("config", "protocol"),
                          "-k", "not test_role and not test_bad_input", certify_args=("--strict",))
    assert result.returncode == gate.EXIT_PARTIAL, result.stdout[-4000:]
    verdict = verdict_block(result.stdout, "PARTIAL").splitlines()
    cause = ("vendor_detector's model.py needs module 'yolo_vendor_ops', which the server's Python lacks; provide it "
             "with EXECUTION_ENV_PATH or --triton=container --triton-image IMAGE")
    assert verdict[0].startswith("PARTIAL: tested 1 of 2 models; not tested: vendor_detector (model.py needs module "
                                 "'yolo_vendor_ops'"), verdict
    assert sum(cause in line for line in verdict[1:]) == 1, verdict
    assert "Traceback" not in result.stdout and not any(line.startswith("  ERROR") for line in verdict)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["not_servable_here"]["vendor_detector"].startswith(cause)
    checks = {c["id"].split("::")[-1]: c for c in report["checks"]}
    assert checks["test_live[vendor_detector]"]["host_limited"] is True
    assert checks["test_live_and_ready"]["verdict"] == "passed" and "not_about_repository" not in checks["test_live_and_ready"]
    assert checks["test_server_metadata"]["not_about_repository"] is True  # Triton's, never the repository's
    assert "error" not in {c["verdict"] for c in report["checks"]}
    accepted = gate.judge(report, gate.load_profile("certified"))  # the default profile accepts it, saying so
    assert accepted.exit_status == 0 and accepted.line().startswith(
        "CERTIFIED for what could be tested here (PARTIAL, accepted by the profile): tested 1 of 2 models")


def test_environment_cause_is_told_from_the_models_own_fault(tmp_path):
    from harness.environment import environment_cause

    model = tmp_path / "detector"
    write_config(model, read_config(FIXTURES / "needs_module" / "vendor_detector"))
    assert environment_cause(model, "Internal: ModuleNotFoundError: No module named 'torch.nn'\n\nAt: ...") == (
        "detector's model.py needs module 'torch', which the server's Python lacks; provide it with EXECUTION_ENV_PATH "
        "or --triton=container --triton-image IMAGE (an image that has it)")
    assert environment_cause(model, "Internal: RuntimeError: weights.bin is missing next to model.py") is None
    config = read_config(model)
    config.parameters["EXECUTION_ENV_PATH"].string_value = "/opt/vendor/envs/yolo.tar.gz"  # the authors' machine
    write_config(model, config)
    assert environment_cause(model, "Internal: failed to start stub").startswith(
        "detector's config names EXECUTION_ENV_PATH /opt/vendor/envs/yolo.tar.gz, which this host lacks")
    config.parameters["EXECUTION_ENV_PATH"].string_value = "$$TRITON_MODEL_DIRECTORY/env.tar.gz"  # shipped, and absent
    write_config(model, config)
    assert environment_cause(model, "Internal: failed to start stub") is None


def test_a_run_that_served_nothing_of_the_repository_is_never_certified(tmp_path):
    """Issue #32 items 1, 3, 8: the Ultralytics-style repository's only model needs ONNX Runtime (read from its
    completed config, not "the <none> backend"); on a server without it nothing of the repository is served:
    NOT CERTIFIED whatever the profile accepts, and the protocol checks of that empty server are not its passes.
    (--no-adapter: the ONNX Runtime adapter would serve it, tests/test_onnx_adapter.py.)"""
    result = certify_repo(FIXTURES / "metadata_only", tmp_path / "report", ("config", "protocol"),
                          certify_args=("--no-adapter",))
    assert result.returncode == 1, result.stdout[-4000:]
    verdict = verdict_block(result.stdout).splitlines()
    assert verdict[0] == ("NOT CERTIFIED: no model of the repository was tested (tested 0 of 1 models); not tested: yolo "
                          "(needs the onnxruntime backend (this server has python); run with --triton=container "
                          "--triton-image nvcr.io/nvidia/tritonserver:<yy.mm>-py3)"), verdict
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    health = next(c for c in report["checks"] if c["id"].endswith("::test_live_and_ready"))
    assert health["verdict"] == "passed" and health["not_about_repository"] is True
    assert report["models"]["(not about the repository)"]["protocol"]["passed"] >= 3  # health, metadata, the warning
    assert report["models"]["(repository)"] == {"protocol": {"passed": 1}}  # its paths, read from its files
    # even a profile that accepts partial coverage does not certify a run that tested nothing
    assert gate.judge(report, {**gate.load_profile("certified"), "accept_partial": True}).exit_status == 1


def test_an_ensemble_over_a_step_the_host_cannot_load_is_the_hosts_whatever_its_name(tmp_path):
    """An ensemble named before its step ("detect" < "vendor_detector") whose load failed with it: the step's
    environment cause is judged first, so the ensemble is the host's too (not tested on this host), never
    blamed for its own fault — the verdict PARTIAL, not NOT CERTIFIED."""
    from harness.availability import load_failures, record_load_failures

    repository = tmp_path / "models"
    write_config(repository / "vendor_detector", read_config(FIXTURES / "needs_module" / "vendor_detector"))
    ensemble = read_config(FIXTURES / "host_limited" / "yolo_ensemble")
    ensemble.name = "detect"
    ensemble.ensemble_scheduling.step[1].model_name = "vendor_detector"
    write_config(repository / "detect", ensemble)
    (repository / "detect" / "1").mkdir()
    config = type("Config", (), {"stash": pytest.Stash()})()
    record_load_failures(config, repository, {
        "detect": "Internal: ensemble 'detect' depends on 'vendor_detector' which has no loaded version",
        "vendor_detector": "Internal: ModuleNotFoundError: No module named 'yolo_vendor_ops'\n\nAt: model.py(3)"})
    failures = load_failures(config)
    assert failures["vendor_detector"][1] is True and "needs module 'yolo_vendor_ops'" in failures["vendor_detector"][0]
    assert failures["detect"] == (
        f"detect needs its step 'vendor_detector', which cannot load here: {failures['vendor_detector'][0]}", True)


def test_a_model_known_unservable_here_whose_load_was_tried_anyway_stays_the_hosts(tmp_path):
    """Issue #32's public repositories (odlab-ai/odlab-triton): the batching bench loaded by name a model this
    host was known not to serve (host_needs); Triton's refusal was recorded as the model's own load failure, so
    its accuracy checks said "not tested, because model failed to load: [400] ..." beside "not tested on this
    host, because model needs ..." — one cause twice, the second as if the model were at fault. The known need
    stands; a servable model's load failure stays its own."""
    from harness.availability import _NEEDS, load_failures, reason, record_load_failures

    repository = FIXTURES / "host_limited"
    config = type("Config", (), {"stash": pytest.Stash()})()
    config.stash[_NEEDS] = host_needs(repository, {"python"}, frozenset(), adapted=frozenset({"yolo_onnx"}))
    assert config.stash[_NEEDS]["yolo_detector"] == "a GPU"
    record_load_failures(config, repository, {
        "yolo_detector": "[400] load failed for model 'yolo_detector': version 1 is at UNAVAILABLE state: Invalid "
                         "argument: instance group yolo_detector_0 of model yolo_detector specifies invalid or "
                         "unsupported gpu id 0. GPUs with at least the minimum required CUDA compute compatibility "
                         "of 6.000000 are: ;",
        "yolo_preprocess": "[400] load failed for model 'yolo_preprocess': version 1 is at UNAVAILABLE state: "
                           "Internal: RuntimeError: initialize raised"})
    failures = load_failures(config)
    assert failures["yolo_detector"] == (reason("yolo_detector", "a GPU"), True), failures
    assert failures["yolo_preprocess"] == (
        "[400] load failed for model 'yolo_preprocess': version 1 is at UNAVAILABLE state: Internal: RuntimeError: "
        "initialize raised", False), failures


def test_availability_and_the_collector_never_import_the_plugin_back():
    """Issue #32 item 9: the plugin fills the session's records (harness.session) and the availability records
    and the report collector read them there; neither imports harness.plugin (they did, in a circle)."""
    import ast

    for module in ("harness/availability.py", "harness/report/collector.py"):
        tree = ast.parse((ROOT / module).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "harness.plugin" not in imported, module
        assert "harness.session" in imported, module


def test_what_availability_decides_is_the_one_record_the_report_writes(tmp_path):
    """Issue #32 item 9: the models this host cannot serve are decided once, into the run's coverage record
    (harness.session.Coverage); availability's own readers, the report collector and report.json (the verdict's
    input) all read that record, not copies of it that could disagree."""
    from harness.availability import _NEEDS, not_servable, record_load_failures
    from harness.report.collector import ReportCollector
    from harness.session import coverage

    repository = FIXTURES / "host_limited"
    config = type("Config", (), {"stash": pytest.Stash()})()
    config.stash[_NEEDS] = host_needs(repository, {"python"}, frozenset(), adapted=frozenset({"yolo_onnx"}))
    collector = ReportCollector(tmp_path, coverage(config))
    record_load_failures(config, repository, {
        "yolo_preprocess": "load failed: Internal: ModuleNotFoundError: No module named 'yolo_vendor_ops'"})
    assert not_servable(config) is coverage(config).not_servable is collector.coverage.not_servable
    assert set(not_servable(config)) == {"yolo_detector", "yolo_ensemble", "yolo_preprocess"}, not_servable(config)
    written = json.loads(collector.write(complete=True).read_text())
    assert written["not_servable_here"] == not_servable(config)
    assert "needs module 'yolo_vendor_ops'" in written["not_servable_here"]["yolo_preprocess"]
