"""Pipeline steps (harness.repository.pipeline) are reached only through their ensemble (issue 22 item
4): the protocol suite's models_by_role and the lifecycle target leave them out. A postprocess fed by
the detector's output is one; a detector an ensemble also feeds is not (it has a role of its own); a
model fed by the ensemble's own input is not."""

from __future__ import annotations

from harness.repository.config import parse_config, write_config
from harness.repository.manifest import Manifest
from harness.repository.pipeline import pipeline_step_of

RAW = ('name: "det" backend: "python" max_batch_size: 1 input { name: "images" data_type: TYPE_FP32 dims: [3, 64, 64] } '
       'output { name: "out" data_type: TYPE_FP32 dims: [84, 84] }')
PRE = ('name: "pre" backend: "python" input { name: "bytes" data_type: TYPE_STRING dims: [1] } '
       'output { name: "pixels" data_type: TYPE_FP32 dims: [1, 3, 64, 64] }')
POST = ('name: "post" backend: "python" input { name: "raw" data_type: TYPE_FP32 dims: [1, 84, 84] } '
        'output { name: "rows" data_type: TYPE_FP32 dims: [10] }')
PIPE = ('name: "pipe" platform: "ensemble" input { name: "IMAGE" data_type: TYPE_STRING dims: [1] } '
        'output { name: "ROWS" data_type: TYPE_FP32 dims: [10] } ensemble_scheduling { '
        'step { model_name: "pre" model_version: -1 input_map { key: "bytes" value: "IMAGE" } '
        'output_map { key: "pixels" value: "p" } } '
        'step { model_name: "det" model_version: -1 input_map { key: "images" value: "p" } '
        'output_map { key: "out" value: "r" } } '
        'step { model_name: "post" model_version: -1 input_map { key: "raw" value: "r" } '
        'output_map { key: "rows" value: "ROWS" } } }')


def test_only_steps_without_a_role_are_pipeline_steps(tmp_path):
    repository = tmp_path / "models"
    for text in (RAW, PRE, POST, PIPE):
        config = parse_config(text)
        (repository / config.name / "1").mkdir(parents=True)
        write_config(repository / config.name, config)
    steps = {name: pipeline_step_of(repository, name) for name in ("det", "pre", "post", "pipe")}
    assert steps == {"det": None, "pre": None, "post": "pipe", "pipe": None}
    assert pipeline_step_of(repository, "post", Manifest(models={"post": "e2e"})) is None  # declared: driven
