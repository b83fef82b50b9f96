"""Requests are sized from what the model can take, within a stated byte bound (issue #22 item 1: a
postprocess input [-1,-1,-1] filled with 640 became a 1 GiB request sent as JSON, and the kernel killed
pytest at 14 GB). harness.repository.sizing fills -1 dims from the ONNX graph, the ensemble step that
feeds the model, the leading batch dim, declared imgsz, or a small default; every request the protocol
suite builds is held to MAX_REQUEST_BYTES, and a case that would need more is "not applicable" with its
size. The unit tests are instant; the last test runs the protocol suite on a small repository of its own
(a [-1,-1,-1] postprocess standing alone, and the same fed 8 MiB items by an ensemble step): ~1-2 min."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2 as pb

from harness.load.payload import payload_from_config
from harness.paths import PROJECT_ROOT
from harness.protocol import badinput
from harness.protocol.models import ModelView, Port, RequestTooLarge, check_json_response, good_array
from harness.repository import sizing
from harness.repository.config import read_config
from harness.repository.writer import write_model

MODELS = Path(__file__).parent / "models"
MiB = 2**20


# -- a repository of our own ----------------------------------------------------------------------
def _python_model(repository: Path, name: str, source: str, inputs, outputs, max_batch_size=8, **fields) -> Path:
    config = pb.ModelConfig(name=name, backend="python", max_batch_size=max_batch_size)
    for port_name, dims in inputs:
        config.input.add(name=port_name, data_type=pb.TYPE_FP32, dims=list(dims))
    for port_name, dims in outputs:
        config.output.add(name=port_name, data_type=pb.TYPE_FP32, dims=list(dims))
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)
    for key, value in fields.items():
        config.parameters[key].string_value = value
    return write_model(repository, config, {1: {"model.py": MODELS / source / "model.py"}})


def write_sizing_repository(repository: Path, features=(2, 1024, 1024)) -> Path:
    """any_dims: X [-1,-1,-1] and nothing says more. post: the same model, fed FEATURES `features` (8 MiB
    per item by default) by the feeder step of the ensemble pipe."""
    _python_model(repository, "any_dims", "any_dims", [("X", (-1, -1, -1))], [("STATS", (2,))])
    _python_model(repository, "post", "any_dims", [("X", (-1, -1, -1))], [("STATS", (2,))])
    _python_model(repository, "feeder", "feeder", [("RAW", (4,))], [("FEATURES", features)])
    pipe = pb.ModelConfig(name="pipe", platform="ensemble", max_batch_size=8)
    pipe.input.add(name="RAW", data_type=pb.TYPE_FP32, dims=[4])
    pipe.output.add(name="STATS", data_type=pb.TYPE_FP32, dims=[2])
    feed = pipe.ensemble_scheduling.step.add(model_name="feeder", model_version=-1)
    feed.input_map["RAW"] = "RAW"
    feed.output_map["FEATURES"] = "features"
    post = pipe.ensemble_scheduling.step.add(model_name="post", model_version=-1)
    post.input_map["X"] = "features"
    post.output_map["STATS"] = "STATS"
    write_model(repository, pipe, {1: {}})
    return repository


@pytest.fixture
def repository(tmp_path) -> Path:
    return write_sizing_repository(tmp_path / "models")


def _configs(repository: Path) -> dict:
    return sizing.read_configs(repository)


def _view(name: str, dims, max_batch_size=8, size=None, datatype="FP32") -> ModelView:
    shape = ((-1,) if max_batch_size else ()) + tuple(dims)
    return ModelView(name, ("1",), (Port("X", datatype, shape),), (Port("STATS", "FP32", (-1, 2)),), max_batch_size,
                     "", size)


def _onnx(path: Path, inputs: dict, outputs: dict) -> Path:
    """A graph whose inputs/outputs have these dims (str: symbolic); Identity nodes, never run."""
    def info(name, dims):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))
    nodes = [helper.make_node("Identity", [next(iter(inputs))], [o]) for o in outputs]
    graph = helper.make_graph(nodes, "g", [info(n, d) for n, d in inputs.items()], [info(n, d) for n, d in outputs.items()])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), str(path))
    return path


# -- where the dims come from ---------------------------------------------------------------------
def test_a_lone_minus_one_input_gets_the_small_default(repository):
    size = sizing.Sizer(_configs(repository), repository).input_size("any_dims", "X")
    assert size.dims == (16, 16, 16), size
    assert "small default 16" in size.describe()


def test_the_ensemble_step_that_feeds_it_sizes_it(repository):
    size = sizing.Sizer(_configs(repository), repository).input_size("post", "X")
    assert size.dims == (2, 1024, 1024), size
    assert "feeder.FEATURES [2,1024,1024], the step that feeds it in pipe" in size.describe()


def test_the_onnx_graph_sizes_it_and_the_producers_graph_feeds_it(tmp_path):
    repository = tmp_path / "models"
    write_sizing_repository(repository, features=(-1, -1))
    # the producer's config says [-1,-1]; its graph says [batch, 10, 8400]
    _onnx(repository / "feeder" / "1" / "model.onnx", {"RAW": ["batch", 4]}, {"FEATURES": ["batch", 10, 8400]})
    size = sizing.Sizer(_configs(repository), repository).input_size("post", "X")
    # post's X is rank 3, FEATURES rank 2: ranks differ, the feed cannot be used; default it is
    assert size.dims == (16, 16, 16)
    config = read_config(repository / "post")
    del config.input[0].dims[:]
    config.input[0].dims.extend([-1, -1])
    from harness.repository.config import write_config

    write_config(repository / "post", config)
    size = sizing.Sizer(_configs(repository), repository).input_size("post", "X")
    assert size.dims == (10, 8400), size
    assert "from the ONNX graph feeder/1/model.onnx" in size.describe() and "the step that feeds it in pipe" in size.describe()
    # the model's own graph comes first
    _onnx(repository / "post" / "1" / "model.onnx", {"X": ["batch", 6, 2100]}, {"STATS": ["batch", 2]})
    size = sizing.Sizer(_configs(repository), repository).input_size("post", "X")
    assert size.dims == (6, 2100) and "from the ONNX graph post/1/model.onnx" in size.describe(), size


def test_image_shaped_inputs_take_imgsz_declared_then_parameter_then_yolo_default(tmp_path):
    repository = tmp_path / "models"
    _python_model(repository, "chw", "any_dims", [("X", (3, -1, -1))], [("STATS", (2,))])
    _python_model(repository, "hwc", "any_dims", [("X", (-1, -1, 3))], [("STATS", (2,))], max_batch_size=0)
    _python_model(repository, "param", "any_dims", [("X", (3, -1, -1))], [("STATS", (2,))], imgsz="320")
    configs = _configs(repository)
    assert sizing.Sizer(configs, repository, imgsz=256).input_size("chw", "X").dims == (3, 256, 256)
    assert sizing.Sizer(configs, repository).input_size("chw", "X").dims == (3, 640, 640)
    assert sizing.Sizer(configs, repository).input_size("hwc", "X").dims == (640, 640, 3)  # H first: no batch rule
    param = sizing.Sizer(configs, repository).input_size("param", "X")
    assert param.dims == (3, 320, 320) and "param's imgsz parameter" in param.describe()


def test_a_models_own_batch_dim_is_one():
    dims, sources = sizing.fallback_dims((-1, 3, -1, -1), batched=False)
    assert dims == (1, 3, 640, 640) and "its batch: 1" in sources[0]
    assert sizing.fallback_dims((-1, -1, -1), batched=False)[0] == (1, 16, 16)


# -- the bound ------------------------------------------------------------------------------------
def _largest_catalogue_request(view: ModelView) -> tuple[int, list[str]]:
    largest, not_applicable = 0, []
    for case in badinput.CATALOGUE:
        if case.role != "tensor":
            continue
        try:
            request = case.build(view)
        except RequestTooLarge as error:
            not_applicable.append(f"{case.name}: {error.line}")
            continue
        if request is not None:
            largest = max(largest, sum(len(t.data) for t in request.inputs) + len(request.http_body or b""))
    return largest, not_applicable


def test_every_catalogue_request_for_a_minus_one_model_stays_small():
    """What took the host down: [-1,-1,-1] with max_batch_size 8 would have been batch_above_max
    [9, 640, 640, 640] FP32 = 9 GiB (1 GiB per item). Now 16 KiB per item, whatever knows nothing more."""
    for view in (_view("any_dims", (-1, -1, -1)), _view("any_dims", (-1, -1, -1), max_batch_size=0)):
        largest, skipped = _largest_catalogue_request(view)
        assert skipped == []
        assert 0 < largest <= 9 * 16**3 * 4 * 2, largest  # ~147 KiB at most (unknown_input: two tensors)
        assert largest < sizing.MAX_REQUEST_BYTES


def test_a_case_over_the_bound_is_not_applicable_with_its_size(repository):
    size = sizing.Sizer(_configs(repository), repository).input_size("post", "X")
    view = _view("post", (-1, -1, -1), size=size)
    largest, skipped = _largest_catalogue_request(view)
    assert largest <= sizing.MAX_REQUEST_BYTES
    assert largest >= 2 * 8 * MiB  # the bound did not shrink what fits: unknown_input sends 2 x 8 MiB
    (line,) = [s for s in skipped if s.startswith("batch_above_max:")]
    assert "post: a request of [9, 2, 1024, 1024] FP32 would be 72.0 MiB, over the 64.0 MiB request bound" in line, line
    assert "feeder.FEATURES" in line  # and where the dims came from
    with pytest.raises(RequestTooLarge, match=r"as JSON would be 80.0 MiB") as raised:
        good_array(view, batch=2, json=True)  # the parity check's http_json way
    assert str(raised.value.msg).startswith("not applicable: post: ")
    good_array(view, batch=2)  # binary, 16 MiB: fine
    feeder = ModelView("feeder", ("1",), (Port("RAW", "FP32", (-1, 4)),), (Port("FEATURES", "FP32", (-1, 2, 1024, 1024)),), 8, "")
    with pytest.raises(RequestTooLarge, match=r"feeder: a response of \[2, 2, 1024, 1024\] FP32 FEATURES as JSON would be 80.0 MiB"):
        check_json_response(feeder, batch=2)  # what http_json would get back
    assert check_json_response(feeder, batch=1) == 40 * MiB


def test_the_bound_can_be_set_and_is_checked(monkeypatch):
    monkeypatch.setenv(sizing.BUDGET_ENV, str(MiB))
    with pytest.raises(RequestTooLarge, match=r"over the 1.0 MiB request bound"):
        good_array(_view("t", (3, 640, 640)))
    monkeypatch.setenv(sizing.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match="YTS_MAX_REQUEST_BYTES"):
        sizing.request_budget()


def test_load_payloads_are_sized_too(repository):
    config = read_config(repository / "post")
    alone = payload_from_config(config)
    assert alone.tensors[0].shape == [1, 16, 16, 16]
    sizer = sizing.Sizer(_configs(repository), repository)
    assert payload_from_config(config, sizer=sizer).tensors[0].shape == [1, 2, 1024, 1024]
    with pytest.raises(RequestTooLarge, match=r"\[16, 2, 1024, 1024\] FP32 would be 128.0 MiB"):
        payload_from_config(config, batch=16, sizer=sizer)
    assert payload_from_config(config, dynamic_size=3).tensors[0].shape == [1, 3, 3, 3]  # asked for: as asked


# -- through a server -----------------------------------------------------------------------------
_PEAK_OF_CHILD = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
                  "print(f'peak_kib={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
                  "sys.exit(code)")


@pytest.mark.server
def test_protocol_suite_on_minus_one_models_stays_small_and_says_what_it_did_not_send(tmp_path):
    repository = write_sizing_repository(tmp_path / "models")
    # the run goes through a fresh parent whose only child is this run, so its peak is this run's (pytest and the
    # server it reaped), never another test's child that this worker happens to reap meanwhile
    result = subprocess.run([sys.executable, "-c", _PEAK_OF_CHILD, sys.executable, "-m", "pytest",
                             str(PROJECT_ROOT / "suites" / "protocol"), "--repo", str(repository), "-q", "-rs",
                             "-p", "no:cacheprovider"],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600,
                            env={**os.environ, "YTS_CACHE": os.environ.get("YTS_CACHE", str(PROJECT_ROOT / ".cache"))})
    out = result.stdout
    assert result.returncode == 0, out[-5000:]
    # what needs more than the bound is not applicable to that model, with its size and where the dims came from
    assert "not applicable to some models, not sent (over the 64.0 MiB request bound" in out, out[-5000:]
    line = ("test_outputs_identical_across_protocols[http_json]: feeder: a response of [2, 2, 1024, 1024] FP32 "
            "FEATURES as JSON would be 80.0 MiB")
    assert line in out, f"missing: {line}\n{out[-5000:]}"
    # post, fed by the feeder step, is exercised through pipe only (no standalone request of its own to size;
    # its size from the feeding step is test_request_sizing's unit tests' and the load payloads' business)
    assert ": post: " not in out, out[-5000:]
    # the rest was judged: the cases that fit were sent to every standalone model
    assert "bad-input catalogue: 29 kinds, 15 judged on this repository, 15 conform" in out, out[-3000:]
    # nothing the run did came near the host's memory: the largest process (pytest or the server) stayed small
    peak_kib = int(result.stderr.rsplit("peak_kib=", 1)[1])
    print(f"largest process of the run: {peak_kib / 2**10:.0f} MiB")
    assert peak_kib < 3 * 2**20, f"a process of the run peaked at {peak_kib / 2**20:.1f} GiB"
