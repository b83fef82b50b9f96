"""The reference repository without a server: committed configs are what the writer produces, the GPU
build's configs have the GPU shape, the load list leaves out what a server cannot load, the build is
content-addressed, and the vendored harness copy is complete on its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as pb

from harness.reference import build as reference_build
from harness.reference import configs, loadable_models, serving
from harness.reference.configs import Target
from harness.reference.loadable import unloadable_models
from harness.repository.config import read_config, write_config

DEV_MODEL = Path(__file__).resolve().parent.parent / ".cache" / "dev" / "yolov8n-nc6.onnx"


@pytest.fixture(scope="module")
def model_source():
    """The reference model, else $YTS_DEV_MODEL, else the dev export other sessions left in .cache/dev."""
    try:
        return reference_build.source_model()
    except FileNotFoundError:
        if DEV_MODEL.exists():
            os.environ["YTS_DEV_MODEL"] = str(DEV_MODEL)
            return DEV_MODEL
        pytest.skip("no reference model, $YTS_DEV_MODEL unset and no dev export in .cache/dev")


@pytest.fixture(scope="module")
def cpu_repository(model_source) -> Path:
    return reference_build.build_reference_repository("cpu")


def test_committed_configs_are_what_the_writer_writes():
    """reference_repo/*/config.pbtxt must be regenerated (write_committed_configs) after configs.py changes."""
    expected = reference_build.committed_target_configs()
    committed = sorted(p.parent.name for p in reference_build.SOURCES.glob("*/config.pbtxt"))
    assert committed == sorted(expected), f"committed configs {committed}, writer produces {sorted(expected)}"
    for name, config in expected.items():
        text = (reference_build.SOURCES / name / "config.pbtxt").read_text()
        assert text == text_format.MessageToString(config), (
            f"reference_repo/{name}/config.pbtxt differs from configs.{name}(): run "
            "`python -c 'from harness.reference.build import write_committed_configs as w; w()'`")


def test_every_model_folder_has_its_contract_readme():
    for folder in sorted(p for p in reference_build.SOURCES.iterdir() if p.is_dir()):
        assert (folder / "README.md").is_file(), f"{folder} has no README.md of its contract"


def test_gpu_target_runs_torch_fp16_on_kind_gpu_instances():
    gpu = reference_build.configs_for(Target(device="gpu"), plan_max_batch=16)
    for name in ("yolo_raw", "yolo_e2e", "yolo_onnx", "yolo_trt"):
        kinds = {g.kind for g in gpu[name].instance_group}
        assert kinds == {pb.ModelInstanceGroup.KIND_GPU}, f"{name}: instance kinds {kinds}"
    for name, instances, first_graph, compiled in (("yolo_raw", 2, 1, None), ("yolo_e2e", 8, 8, None)):
        params = {k: v.string_value for k, v in gpu[name].parameters.items()}
        assert (params["runtime"], params["precision"]) == ("torch", "fp16"), f"{name}: {params}"
        assert params.get("torch_compile") == compiled, f"{name}: {params}"
        graphs = [int(b) for b in params["cuda_graph_batches"].split(",")]
        assert graphs[0] == first_graph and graphs[-1] == gpu[name].max_batch_size, f"{name}: CUDA graphs for {graphs}"
        assert gpu[name].instance_group[0].count == instances, f"{name}: {gpu[name].instance_group}"
    for name in ("yolo_preprocess", "yolo_postprocess"):  # image decoding and NMS stay CPU work here
        assert {g.kind for g in gpu[name].instance_group} == {pb.ModelInstanceGroup.KIND_CPU}
    trt = gpu["yolo_trt"]
    assert trt.max_batch_size == 16 and max(trt.dynamic_batching.preferred_batch_size) <= 16
    assert list(trt.input[0].dims) == [3, 640, 640] and list(trt.output[0].dims) == [10, 8400]


def test_cpu_target_shapes_and_batching():
    cpu = reference_build.configs_for(Target(device="cpu", imgsz=320, nc=3))
    raw = cpu["yolo_raw"]
    assert raw.version_policy.latest.num_versions == 2
    assert list(raw.input[0].dims) == [3, 320, 320] and list(raw.output[0].dims) == [7, 2100]
    assert raw.max_batch_size >= max(raw.dynamic_batching.preferred_batch_size)
    assert raw.dynamic_batching.max_queue_delay_microseconds > 0
    assert sum(g.count for g in raw.instance_group) == 1
    assert list(cpu["yolo_onnx"].version_policy.specific.versions) == [1, 2, 3]
    assert cpu["yolo_onnx"].platform == "onnxruntime_onnx"
    assert [s.model_name for s in cpu["yolo_ensemble"].ensemble_scheduling.step] == [
        "yolo_preprocess", "yolo_raw", "yolo_postprocess"]
    with pytest.raises(ValueError, match="multiple of the largest stride"):
        Target(imgsz=600)


def _write_configs(repository: Path, target: Target) -> Path:
    for name, config in reference_build.configs_for(target, plan_max_batch=8).items():
        write_config(repository / name, config)
    return repository


def test_loadable_models_leave_out_missing_backends_and_their_ensembles(tmp_path):
    repository = _write_configs(tmp_path / "models", Target())
    python_only = loadable_models(repository, {"python"})
    assert set(python_only) == {"yolo_raw", "yolo_e2e", "yolo_preprocess", "yolo_postprocess", "yolo_ensemble"}
    assert "tensorrt" in unloadable_models(repository, {"python"})["yolo_trt"]
    assert loadable_models(repository, None) == ("*",)
    assert set(loadable_models(repository, {"python", "onnxruntime", "tensorrt"}, frozenset({0}))) == {
        p.name for p in repository.iterdir()}
    # An ensemble whose step cannot load is not loadable either.
    raw = read_config(repository / "yolo_raw")
    raw.backend = "pytorch"
    write_config(repository / "yolo_raw", raw)
    reasons = unloadable_models(repository, {"python"})
    assert "yolo_raw" in reasons["yolo_ensemble"], reasons


def test_thresholds_override_and_reject_bad_request_parameters():
    defaults = serving.Thresholds.from_parameters({"conf": "0.25", "iou": "0.7", "max_det": "300"})
    assert defaults.override('{"conf": 0.5, "max_det": 10}', limit=300) == serving.Thresholds(0.5, 0.7, 10)
    for bad, message in [('{"conf": 2}', r"conf=2.0 is outside \[0, 1\]"), ('{"iou": "x"}', "iou='x' is not a number"),
                         ('{"max_det": 301}', r"max_det=301 is outside \[1, 300\]")]:
        with pytest.raises(ValueError, match=message):
            defaults.override(bad, limit=300)
    with pytest.raises(serving.ConfigParameterError, match="'max_det' is required"):
        serving.Thresholds.from_parameters({"conf": "0.25", "iou": "0.7"})


def test_torch_compile_parameter_is_checked_against_the_engine_modes(tmp_path):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.onnx").write_bytes(b"")
    args = {"model_repository": str(tmp_path), "model_version": "1", "model_instance_kind": "GPU"}
    params = {"runtime": "torch", "model_file": "model.onnx", "torch_compile": "reduce-overhead"}
    with pytest.raises(serving.ConfigParameterError, match="'torch_compile'='reduce-overhead' is not one of"):
        serving.open_model_engine(args, params)


def test_cpu_session_parameters_reach_the_session_and_a_bad_value_is_refused(cpu_repository):
    args = {"model_repository": str(cpu_repository / "yolo_raw"), "model_version": "1", "model_instance_kind": "CPU"}
    params = serving.parameters(json_format.MessageToDict(read_config(cpu_repository / "yolo_raw"),
                                                          preserving_proto_field_name=True))
    assert params["enable_cpu_mem_arena"] == "false"  # the reference stub's memory must not depend on its traffic
    assert params["intra_op_spinning"] == "false"  # idle threads must not take the cores a co-tenant needs
    options = serving.open_model_engine(args, params).session.get_session_options()
    assert options.enable_cpu_mem_arena is False
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    spinning = serving.open_model_engine(args, {**params, "intra_op_spinning": "true"}).session.get_session_options()
    assert spinning.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    for key in ("enable_cpu_mem_arena", "intra_op_spinning"):
        with pytest.raises(serving.ConfigParameterError, match=f"'{key}'='off' is not 'true' or 'false'"):
            serving.open_model_engine(args, {**params, key: "off"})


def test_letterbox_geometry_survives_the_ensemble_tensor():
    import numpy as np

    from harness.vision.letterbox import letterbox

    metas = [letterbox(np.zeros((h, w, 3), np.uint8), 640)[1] for h, w in [(96, 160), (1280, 320), (7, 5)]]
    assert serving.meta_from_array(serving.meta_to_array(metas)) == metas


def test_build_is_content_addressed_and_complete(cpu_repository):
    started = time.perf_counter()
    again = reference_build.build_reference_repository("cpu")
    assert again == cpu_repository and time.perf_counter() - started < 5, "a cached build must be a lookup"
    assert sorted(p.name for p in cpu_repository.iterdir()) == [
        "yolo_e2e", "yolo_ensemble", "yolo_onnx", "yolo_postprocess", "yolo_preprocess", "yolo_raw"]
    assert sorted(p.name for p in (cpu_repository / "yolo_onnx").iterdir() if p.is_dir()) == ["1", "2", "3"]
    for name in ("yolo_raw", "yolo_e2e"):
        assert (cpu_repository / name / "1" / "model.onnx").is_file()
    record = reference_build.manifest(cpu_repository)
    assert record["target"]["device"] == "cpu" and "no TensorRT plan" in record["plan_skipped"]
    for name in ("yolo_raw", "yolo_e2e", "yolo_ensemble", "yolo_onnx"):  # nc=6 model: the committed configs
        if record["target"]["nc"] == 6:
            assert read_config(cpu_repository / name) == read_config(reference_build.SOURCES / name)


def test_vendored_harness_imports_on_its_own(cpu_repository):
    """In the container there is no harness package: the copy in the version folder must be enough,
    and must not pull in the build side (tritonclient)."""
    version = cpu_repository / "yolo_e2e" / "1"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "import harness.reference.serving, harness.engines.ort, harness.vision.pipeline, harness; "
            "assert harness.__file__.startswith(sys.argv[1]), harness.__file__; "
            "assert 'tritonclient' not in sys.modules; print('ok')")
    result = subprocess.run([sys.executable, "-I", "-c", code, str(version)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_gpu_build_writes_the_gpu_configs(model_source, tmp_path):
    """Built here for config shape (run on the H200 by the GPU sessions); without TensorRT no yolo_trt."""
    repository = reference_build.build_reference_repository("gpu", precisions=("fp32",), root=tmp_path)
    raw = read_config(repository / "yolo_raw")
    assert raw.instance_group[0].kind == pb.ModelInstanceGroup.KIND_GPU
    assert raw.parameters["runtime"].string_value == "torch"
    record = reference_build.manifest(repository)
    assert record["gpu_sizing"] is None  # no GPU here: sized where it is served (tests/test_gpu_sizing.py)
    if not (repository / "yolo_trt").exists():
        assert record["plan_skipped"], "no yolo_trt and no reason recorded"
    assert sorted(p.name for p in (repository / "yolo_onnx").iterdir() if p.is_dir()) == ["1"]
    assert list(read_config(repository / "yolo_onnx").version_policy.specific.versions) == [1]
