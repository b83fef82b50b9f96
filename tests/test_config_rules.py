"""Bugs the Triton QA corpus run found in the offline checks, each pinned on a repository of its own
(the corpus itself is not always beside the project)."""

from __future__ import annotations

from harness.checks.bindings import check_bindings
from harness.checks.findings import NotApplicable
from harness.checks.model import load_entry
from harness.checks.schema import check_schema
from harness.repository.config import parse_config, write_config


def _model(repository, text: str, version: bool = True):
    config = parse_config(text)
    write_config(repository / config.name, config)
    if version:
        (repository / config.name / "1").mkdir()


def test_an_empty_step_model_name_is_named_not_resolved_to_the_repository_root(tmp_path):
    _model(tmp_path, 'name: "pipe" platform: "ensemble" max_batch_size: 1 '
                     'input { name: "IN" data_type: TYPE_FP32 dims: [1] } output { name: "OUT" data_type: TYPE_FP32 dims: [1] } '
                     'ensemble_scheduling { step { model_name: "" input_map { key: "x" value: "IN" } '
                     'output_map { key: "y" value: "OUT" } } }')
    messages = [f.message for f in check_schema(load_entry(tmp_path, "pipe"))]
    assert any("must specify 'model_name' in step 0 of ensemble 'pipe'" in m for m in messages), messages


def test_an_ensemble_step_without_batching_under_a_batching_ensemble_loads(tmp_path):
    """Triton allows a max_batch_size 0 step in a batching ensemble when the full shapes agree."""
    _model(tmp_path, 'name: "step" backend: "python" max_batch_size: 0 '
                     'input { name: "x" data_type: TYPE_FP32 dims: [-1, 4] } output { name: "y" data_type: TYPE_FP32 dims: [-1, 4] }')
    (tmp_path / "step" / "1" / "model.py").write_text("")
    _model(tmp_path, 'name: "pipe" platform: "ensemble" max_batch_size: 8 '
                     'input { name: "IN" data_type: TYPE_FP32 dims: [4] } output { name: "OUT" data_type: TYPE_FP32 dims: [4] } '
                     'ensemble_scheduling { step { model_name: "step" model_version: -1 input_map { key: "x" value: "IN" } '
                     'output_map { key: "y" value: "OUT" } } }')
    assert check_schema(load_entry(tmp_path, "pipe")) == []


def test_bindings_says_why_it_has_nothing_to_compare_only_as_layout_would(tmp_path):
    """An auto-completed ONNX model is compared with its graph; a model whose file is missing points at
    the layout check only when that check does report it."""
    _model(tmp_path, 'name: "onnx" platform: "onnxruntime_onnx" max_batch_size: 0', version=True)
    try:
        check_bindings(load_entry(tmp_path, "onnx"))
    except NotApplicable as reason:
        assert "the layout check reports it" in str(reason)
    else:
        raise AssertionError("no model file: bindings has nothing to judge")


def test_a_plan_completes_a_config_as_the_tensorrt_backend_does():
    """TensorRT is not installable here: the plan path is driven with the signature a plan reports."""
    from harness.checks.autocomplete import Completion, complete_from_signature
    from harness.engines.signature import Signature, TensorSpec
    from harness.repository.config import ModelConfig

    config = ModelConfig(name="yolo_trt", platform="tensorrt_plan", backend="tensorrt")
    completion = Completion(config)
    complete_from_signature(config, Signature(inputs=(TensorSpec("images", "FP16", (-1, 3, 640, 640)),),
                                              outputs=(TensorSpec("output0", "FP16", (-1, 6, 8400)),)), completion)
    assert config.max_batch_size == 4 and list(config.input[0].dims) == [3, 640, 640]
    assert completion.filled["input"] == ["images"] and completion.filled["output"] == ["output0"]
    fixed = ModelConfig(name="yolo_trt", max_batch_size=8)
    refused = Completion(fixed)
    complete_from_signature(fixed, Signature(inputs=(TensorSpec("images", "FP32", (1, 3, 640, 640)),),
                                             outputs=(TensorSpec("output0", "FP32", (1, 6, 8400)),)), refused)
    assert refused.errors == ["autofill failed for model 'yolo_trt': model does not support batching while "
                              "non-zero max_batch_size is specified"]
