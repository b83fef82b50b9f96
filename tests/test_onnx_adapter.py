"""Issue #32 item 2: on the embedded server (Python backend only) an onnxruntime_onnx model is served
through the harness's ONNX Runtime adapter (harness.adapters.onnx_runtime), running its own ONNX file,
wherever Triton's onnxruntime backend would load it. fixtures/accuracy/onnx_adapter (built from the
reference FP32 ONNX at 320): `yolo`, a metadata-only config beside model.onnx, is served and passes;
`yolo_rescaled`, whose graph multiplies its input by 255 again, fails the accuracy checks through the
adapter; `yolo_misnamed`, which Triton would refuse (config input `image`, graph input `images`), is not
served and its checks are "not tested" citing the bindings finding. Every check of a served model and the
verdict say it went through the adapter. `--no-adapter` brings back "not tested on this host"
(tests/test_availability.py's host_limited and metadata_only runs).

Speed: one `yts certify --suites accuracy` run, 8 images at 320 (fixtures/accuracy/profiles/quick.toml),
~40-60 s; the rest reads files."""

from __future__ import annotations

import json
import shutil

import pytest

from harness import paths
from harness.adapters.onnx_runtime import NOTE, Plan, adapt, adapted_config, plan, plan_label
from harness.checks.model import completed_config
from harness.reference.loadable import host_needs, loadable_models
from harness.repository.config import ModelConfig, write_config
from harness.repository.scratch import fingerprint
from tests.conftest import certify_repo, load_module, verdict_block

pytestmark = pytest.mark.server
IMGSZ = 320
PROFILE = paths.FIXTURES / "accuracy" / "profiles" / "quick.toml"
JUDGED = ("test_tensors", "test_boxes", "test_map")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    try:
        onnx = load_module(paths.FIXTURES / "layouts" / "build.py").reference_onnx(IMGSZ)
    except FileNotFoundError as error:
        pytest.skip(f"needs the reference model: {error}")
    root = tmp_path_factory.mktemp("onnx_adapter")
    return load_module(paths.FIXTURES / "accuracy" / "onnx_adapter" / "build.py").build(root / "models", onnx, IMGSZ), onnx


@pytest.fixture(scope="module")
def certified(built, tmp_path_factory):
    repo, onnx = built
    before = fingerprint(repo)
    report_dir = tmp_path_factory.mktemp("report")
    result = certify_repo(repo, report_dir, ("accuracy",), "--profile", str(PROFILE), "-k", " or ".join(JUDGED),
                          certify_args=("--reference", str(onnx)))
    assert fingerprint(repo) == before  # the adapter rewrote the scratch copy only
    return result, json.loads((report_dir / "report.json").read_text())


def _checks(report: dict, model: str) -> dict[str, dict]:
    return {c["id"].split("::")[-1].split("[")[0]: c for c in report["checks"] if c.get("model") == model}


def test_served_through_the_adapter_passes_a_broken_graph_fails_a_refused_one_is_not_tested(certified):
    result, report = certified
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    good, broken, refused = (_checks(report, m) for m in ("yolo", "yolo_rescaled", "yolo_misnamed"))
    assert {name: c["verdict"] for name, c in good.items() if name in JUDGED} == dict.fromkeys(JUDGED, "passed"), good
    assert all(c["values"]["served_through"] == NOTE for c in good.values())
    assert broken["test_boxes"]["verdict"] == "failed" and broken["test_map"]["verdict"] == "failed", broken
    assert "extra boxes" in broken["test_boxes"]["message"] and broken["test_boxes"]["message"].endswith(f"[{NOTE}]")
    assert {c["verdict"] for c in refused.values()} == {"not tested"}
    assert all(c["message"].startswith("not tested: Triton's onnxruntime backend would refuse it: [bindings] "
                                       "yolo_misnamed: yolo_misnamed/1/model.onnx: input 'image' of config.pbtxt is "
                                       "not an input of the model") for c in refused.values()), refused
    assert report["adapter_served"] == {"yolo": NOTE, "yolo_rescaled": NOTE}
    verdict = verdict_block(result.stdout).splitlines()
    assert f"  {NOTE}: yolo, yolo_rescaled" in verdict, verdict
    assert any(line.startswith("  not tested: Triton's onnxruntime backend would refuse it") for line in verdict), verdict


def test_adapted_config_keeps_the_models_contract_and_ensembles_over_it_are_served(built, tmp_path):
    """Offline: the adapted config is the completed one with the backend changed (a metadata-only config
    completed from model.onnx); a model the adapter serves no longer needs the onnxruntime backend, nor does
    an ensemble over it, and after adapt() the server's load list holds both."""
    repo, _ = built
    assert plan(repo, {"python"}).served == {"yolo": NOTE, "yolo_rescaled": NOTE}
    assert plan(repo, {"python", "onnxruntime"}).served == {}  # a server with the backend serves them itself
    completed = completed_config(repo / "yolo_rescaled")
    adapted = adapted_config(completed, "model.onnx")
    assert (adapted.backend, adapted.platform) == ("python", "")
    for field in ("name", "input", "output", "max_batch_size", "dynamic_batching", "version_policy"):
        assert getattr(adapted, field) == getattr(completed, field), field
    assert [(g.count, g.kind) for g in adapted.instance_group] == [(g.count, g.KIND_CPU) for g in completed.instance_group]

    scratch = tmp_path / "models"
    for name in ("yolo", "yolo_misnamed"):
        shutil.copytree(repo / name, scratch / name)
    ensemble = ModelConfig(name="pipeline", platform="ensemble", max_batch_size=completed.max_batch_size)
    ensemble.input.add().CopyFrom(completed.input[0])
    ensemble.output.add().CopyFrom(completed.output[0])
    step = ensemble.ensemble_scheduling.step.add(model_name="yolo", model_version=-1)
    step.input_map["images"], step.output_map["output0"] = "images", "output0"
    write_config(scratch / "pipeline", ensemble)
    (scratch / "pipeline" / "1").mkdir()
    assert set(host_needs(scratch, {"python"}, frozenset())) == {"yolo", "pipeline", "yolo_misnamed"}
    assert host_needs(scratch, {"python"}, frozenset(), adapted=frozenset({"yolo", "yolo_misnamed"})) == {}
    assert adapt(scratch, Plan(served={"yolo": NOTE})) == ["yolo"] and adapt(scratch, Plan(served={"yolo": NOTE})) == []
    assert (scratch / "yolo" / "1" / "model.py").is_file()
    assert loadable_models(scratch, {"python"}, frozenset()) == ("pipeline", "yolo")


def test_a_plan_is_served_from_the_onnx_it_was_built_from_only_when_named_and_fitting(built, tmp_path):
    """`--onnx-for MODEL=FILE`: a tensorrt_plan model this server cannot run is adapted from that ONNX (copied
    beside the plan as model.onnx, labelled with its file) when the file's signature fits the config; a file
    that does not fit is refused naming the mismatch; unnamed, the plan stays not tested on this host."""
    repo, onnx = built
    plan_config = completed_config(repo / "yolo_rescaled")
    plan_config.name, plan_config.platform, plan_config.backend = "yolo_trt", "tensorrt_plan", ""
    plan_config.ClearField("default_model_filename")
    write_config(tmp_path / "yolo_trt", plan_config)
    (tmp_path / "yolo_trt" / "1").mkdir()
    (tmp_path / "yolo_trt" / "1" / "model.plan").write_bytes(b"built for a GPU elsewhere")
    assert plan(tmp_path, {"python"}).served == {}
    found = plan(tmp_path, {"python"}, {"yolo_trt": onnx})
    assert found.served == {"yolo_trt": plan_label(onnx)} and "(the ONNX its plan was built from, at that ONNX's " \
        "precision); Triton's tensorrt backend and the plan itself not exercised" in plan_label(onnx)
    assert adapt(tmp_path, found) == ["yolo_trt"]
    assert (tmp_path / "yolo_trt" / "1" / "model.onnx").read_bytes() == onnx.read_bytes()
    assert completed_config(tmp_path / "yolo_trt").parameters["onnx_model_filename"].string_value == "model.onnx"
    wrong = tmp_path / "other"
    plan_config.input[0].dims[1:] = [640, 640]
    write_config(wrong / "yolo_trt", plan_config)
    assert plan(wrong, {"python"}, {"yolo_trt": onnx}).refused["yolo_trt"].startswith(
        f"the ONNX --onnx-for names ({onnx}) does not fit its config: [bindings] yolo_trt:")


def test_a_repository_whose_every_model_the_adapter_refused_is_not_tested_not_an_error(built, tmp_path):
    """Issue #32's public repositories (levipereira/triton-server-yolo with --onnx-for a file that does not fit):
    every model refused, the server served none, and each protocol check errored at setup ("the server serves
    no READY model") instead of being not tested, naming the refused models."""
    repo, _ = built
    scratch = tmp_path / "models"
    shutil.copytree(repo / "yolo_misnamed", scratch / "yolo_misnamed")
    result = certify_repo(scratch, tmp_path / "report", ("protocol",), "-k", "test_bad_input")
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    checks = [c for c in report["checks"] if "test_bad_input" in c["id"]]
    assert checks and {c["verdict"] for c in checks} == {"not tested"}, result.stdout[-3000:]
    assert {c["message"] for c in checks} == {"not tested, because nothing it can drive is served: yolo_misnamed not "
                                              "served through the ONNX Runtime adapter (each one's cause is listed "
                                              "once in the verdict)"}, result.stdout[-3000:]
