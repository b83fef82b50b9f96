"""Fixtures for the harness's own tests: small repositories written through the repository writer."""

from pathlib import Path

import pytest

# Loaded before pytester snapshots sys.modules: in-process suite runs build the reference at collection
# time (harness.availability), and onnx's C++ extension aborts the process when imported a second time.
import harness.reference.build  # noqa: F401
from harness.repository.writer import write_model

pytest_plugins = ["pytester"]

MODELS = Path(__file__).parent / "models"


def write_scale_add(repository: Path, name: str = "scale_add", **config_fields) -> Path:
    from tritonclient.grpc import model_config_pb2 as pb

    config = pb.ModelConfig(name=name, backend="python", max_batch_size=8)
    config.input.add(name="X", data_type=pb.TYPE_FP32, dims=[4])
    config.output.add(name="Y", data_type=pb.TYPE_FP32, dims=[4])
    config.output.add(name="BATCH", data_type=pb.TYPE_INT32, dims=[1])
    config.dynamic_batching.max_queue_delay_microseconds = 20000
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)
    for field, value in config_fields.items():
        setattr(config, field, value)
    return write_model(repository, config, {1: {"model.py": MODELS / "scale_add" / "model.py"}})


@pytest.fixture(scope="session")
def tiny_repository(tmp_path_factory) -> Path:
    repository = tmp_path_factory.mktemp("tiny") / "models"
    write_scale_add(repository)
    return repository
