"""Which model the lifecycle suite reloads (harness.lifecycle.target) and what its traffic sends, on
configs alone (issue 22 item 7): a `skip` model is never driven, nor a pipeline step fed by other
steps (a postprocess: driven through its ensemble, which is a dependent); an e2e model is picked when it
is all there is; no drivable model → "not tested, because…" naming each model's reason; every input gets
its own type (encoded, base64, decoded pixels). The served runs are in tests/test_lifecycle.py."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from harness.lifecycle.target import NoTarget, choose_model, dependent_ensembles, models_to_load
from harness.lifecycle.traffic import request_inputs
from harness.repository.config import parse_config, write_config
from harness.repository.layouts import parse_declaration, read_layout
from harness.repository.manifest import Manifest
from harness.repository.sizing import read_configs

E2E = ('name: "e2e" backend: "python" max_batch_size: 4 input { name: "images" data_type: TYPE_STRING dims: [1] } '
       'output { name: "detections" data_type: TYPE_FP32 dims: [100, 6] } '
       'output { name: "num_detections" data_type: TYPE_INT32 dims: [1] }')
POST = ('name: "post" backend: "python" input { name: "raw" data_type: TYPE_FP32 dims: [84, 8400] } '
        'output { name: "detections" data_type: TYPE_FP32 dims: [100, 6] }')
ENSEMBLE = ('name: "pipe" platform: "ensemble" input { name: "IMAGE" data_type: TYPE_STRING dims: [1] } '
            'output { name: "DETS" data_type: TYPE_FP32 dims: [100, 6] } ensemble_scheduling { '
            'step { model_name: "e2e" model_version: -1 input_map { key: "images" value: "IMAGE" } '
            'output_map { key: "detections" value: "mid" } } '
            'step { model_name: "post" model_version: -1 input_map { key: "raw" value: "mid" } '
            'output_map { key: "detections" value: "DETS" } } }')


def _repository(tmp_path, *texts):
    repository = tmp_path / "models"
    for text in texts:
        config = parse_config(text)
        (repository / config.name / "1").mkdir(parents=True)
        write_config(repository / config.name, config)
    return repository


def test_e2e_is_driven_pipeline_steps_and_skip_never(tmp_path):
    repository = _repository(tmp_path, E2E, POST, ENSEMBLE)
    assert choose_model(repository) == "e2e"  # post is fed by e2e inside pipe; pipe is an ensemble
    assert dependent_ensembles(read_configs(repository), "e2e") == ["pipe"]
    with pytest.raises(NoTarget) as caught:
        choose_model(repository, manifest=Manifest(models={"e2e": "skip"}, source="yts.toml"))
    message = str(caught.value)
    assert message.startswith("not tested, because no model of the repository can be driven: ")
    assert "e2e: yts.toml marks it skip" in message
    assert "post: a pipeline step of ensemble 'pipe', fed by its other steps" in message
    assert "pipe: an ensemble" in message


def test_the_server_loads_the_model_its_ensembles_and_their_steps_only(tmp_path):
    """An unrelated model (`other`) is not loaded beside the driven one: it would only add start-up time and GPU
    memory, which every restart of the lifecycle server pays again."""
    other = E2E.replace('name: "e2e"', 'name: "other"')
    configs = read_configs(_repository(tmp_path, E2E, POST, ENSEMBLE, other))
    assert models_to_load(configs, "e2e", ("pipe",)) == ("e2e", "pipe", "post")
    assert models_to_load(configs, "e2e", ()) == ("e2e",)


def test_unloadable_models_are_not_driven(tmp_path):
    repository = _repository(tmp_path, E2E)
    with pytest.raises(NoTarget, match="e2e: needs the python backend"):
        choose_model(repository, unloadable={"e2e": "needs the python backend"})


def test_each_image_input_gets_its_own_form():
    encoded = parse_config(E2E)
    [(_, images)] = request_inputs(encoded, read_layout(encoded))
    assert images.dtype == np.object_ and images[0, 0][:2] == b"\xff\xd8"  # JPEG bytes
    b64 = parse_config(E2E.replace('name: "images"', 'name: "image_b64"'))
    layout = read_layout(b64, parse_declaration("e2e", {"input": "base64"}, "test"))
    [(_, text)] = request_inputs(b64, layout)
    assert base64.b64decode(text[0, 0])[:2] == b"\xff\xd8"
    pixels = parse_config(E2E.replace("TYPE_STRING dims: [1]", "TYPE_UINT8 dims: [-1, -1, 3]"))
    layout = read_layout(pixels, parse_declaration("e2e", {"input": "pixels"}, "test"))
    [(_, array)] = request_inputs(pixels, layout)
    assert array.dtype == np.uint8 and array.ndim == 4 and array.shape[0] == 1 and array.shape[3] == 3
    assert min(array.shape[1:3]) > 1 and array.std() > 0  # a decoded image, not a 1x1 pixel of noise
