"""Machinery of the protocol suite without a server: path validation both ways, the Prometheus
parser wrapper, and the catalogue's size and shape."""

from __future__ import annotations

import os

import pytest

from harness.metrics import prometheus
from harness.protocol.badinput import CATALOGUE, Handled, Rejected
from harness.protocol.wire import Answer
from harness.repository.paths import validate_paths
from tests.conftest import write_scale_add

TRITON_TEXT = """# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 4
nv_inference_count{model="n",version="1"} 9
# HELP nv_inference_request_failure Number of failed inference requests
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 1
nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 2
"""


def test_clean_repository_has_no_escapes(tmp_path):
    write_scale_add(tmp_path)
    os.symlink("model.py", tmp_path / "scale_add" / "1" / "alias.py")
    assert validate_paths(tmp_path) == []


def test_symlink_and_dotdot_escapes_are_named(tmp_path):
    model = write_scale_add(tmp_path)
    os.symlink("../../../outside", model / "1" / "up.bin")
    os.symlink("/etc/hostname", model / "1" / "abs.txt")
    config = (model / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(config + 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: '
                                        '"$$TRITON_MODEL_DIRECTORY/../../env.tar.gz" } }\n')
    found = "\n".join(map(str, validate_paths(tmp_path)))
    assert "scale_add/1/up.bin: symlink to '../../../outside' resolves outside" in found
    assert "scale_add/1/abs.txt: symlink to '/etc/hostname'" in found
    assert "parameters[EXECUTION_ENV_PATH]: path '$$TRITON_MODEL_DIRECTORY/../../env.tar.gz' climbs out" in found


def test_prometheus_sums_over_labels_and_diffs():
    before = prometheus.parse(TRITON_TEXT)
    after = prometheus.parse(TRITON_TEXT.replace('version="1"} 4', 'version="1"} 7'))
    assert before.value("nv_inference_request_failure", model="m") == 3
    assert before.value("nv_inference_request_failure", model="m", reason="BACKEND") == 1
    assert prometheus.delta(before, after, "nv_inference_count", model="m") == 3
    assert prometheus.delta(before, after, "nv_inference_count", model="n") == 0
    assert before.types["nv_inference_count"] == "counter"


def test_prometheus_rejects_garbage():
    with pytest.raises(prometheus.MetricsFormatError):
        prometheus.parse('nv_inference_count{model="m" 4\n')


def test_catalogue_has_at_least_twenty_kinds_each_with_an_expectation():
    assert len(CATALOGUE) >= 20
    assert all(isinstance(c.expect, (Rejected, Handled)) and c.triton_answer for c in CATALOGUE)


def test_rejected_judges_both_ways():
    rule = Rejected(r"conf")
    assert rule.judge(Answer("http", False, "400", "request parameter conf=-1 out of range")) is None
    assert "does not name the problem" in rule.judge(Answer("http", False, "400", "bad request"))
    assert "expected status 400" in rule.judge(Answer("http", False, "500", "conf broke"))
    assert "errors swallowed" in rule.judge(Answer("grpc", True, "OK"))
