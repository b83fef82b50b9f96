"""A served model is judged at the precision it computes in: declared by its owner (yts.toml
`[precision]`, `--precision NAME=fp16`), else its config's `precision` parameter (the reference GPU
build serves an FP32 ONNX file through a PyTorch FP16 engine), else its ONNX file's weights."""

from __future__ import annotations

import pytest

from harness.accuracy.served import served_precision
from harness.repository.config import parse_config
from harness.repository.manifest import ManifestError, load_manifest


@pytest.fixture
def repository(tmp_path):
    for name in ("yolo_e2e", "yolo_raw"):
        (tmp_path / name).mkdir()
    return tmp_path


def test_declared_precision_wins_then_config_parameter_then_artifact(repository):
    (repository / "yts.toml").write_text('[precision]\nyolo_raw = "int8"\n')
    manifest = load_manifest(repository, precisions=["yolo_e2e=fp16"])
    gpu_config = parse_config('name: "yolo_e2e" parameters { key: "precision" value { string_value: "fp32" } }')
    assert served_precision(gpu_config, manifest, "yolo_e2e", "fp32") == "fp16"  # --precision wins
    assert served_precision(parse_config('name: "yolo_raw"'), manifest, "yolo_raw", "fp32") == "int8"  # yts.toml
    bare = load_manifest(repository)
    gpu_config = parse_config('name: "yolo_e2e" parameters { key: "precision" value { string_value: "FP16" } }')
    assert served_precision(gpu_config, bare, "yolo_e2e", "fp32") == "fp16"  # the config's parameter
    assert served_precision(parse_config('name: "yolo_e2e"'), bare, "yolo_e2e", "int8") == "int8"  # the ONNX file


@pytest.mark.parametrize("declaration, words", [
    (["yolo_e2e=fp8"], "precision of 'yolo_e2e' = 'fp8': one of ['fp32', 'fp16', 'int8']"),
    (["yolo_e2e"], "expected NAME=PRECISION"),
    (["yolo_nope=fp16"], "declares ['yolo_nope'], which the repository"),
])
def test_a_wrong_precision_declaration_is_named(repository, declaration, words):
    with pytest.raises(ManifestError, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        load_manifest(repository, precisions=declaration)


def test_an_ensemble_computes_in_the_lowest_precision_of_its_steps(repository):
    """The GPU build's yolo_ensemble declares no precision; its detector step says fp16."""
    from harness.repository.config import write_config

    write_config(repository / "yolo_raw", parse_config(
        'name: "yolo_raw" parameters { key: "precision" value { string_value: "fp16" } }'))
    (repository / "yolo_pre").mkdir()
    write_config(repository / "yolo_pre", parse_config('name: "yolo_pre" backend: "python"'))
    ensemble = parse_config('name: "yolo_e2e" platform: "ensemble" ensemble_scheduling { '
                            'step { model_name: "yolo_pre" } step { model_name: "yolo_raw" } }')
    bare = load_manifest(repository)
    assert served_precision(ensemble, bare, "yolo_e2e", "fp32", repository) == "fp16"
    assert served_precision(ensemble, bare, "yolo_e2e", "fp32") == "fp32"  # without the repository: its file


def test_the_local_twin_is_exact_only_for_an_fp32_engine():
    from types import SimpleNamespace

    from harness.accuracy.session import AccuracySession

    assert AccuracySession.twin_tolerance(SimpleNamespace(precision="fp32")) == "fp32"
    assert AccuracySession.twin_tolerance(SimpleNamespace(precision="fp16")) == "fp16"
    assert AccuracySession.twin_tolerance(SimpleNamespace(precision="int8")) == "int8"
