"""The null (echo) model the load generator measures its own overhead against."""

from __future__ import annotations

from pathlib import Path

NAME = "yts_null"
HERE = Path(__file__).parent


def write_null_model(repository: Path, name: str = NAME, elements: int = 16) -> str:
    from harness.repository.config import ModelConfig
    from harness.repository.writer import write_model
    from tritonclient.grpc import model_config_pb2 as pb

    config = ModelConfig(name=name, backend="python", max_batch_size=64)
    config.input.add(name="INPUT0", data_type=pb.TYPE_FP32, dims=[elements])
    config.output.add(name="OUTPUT0", data_type=pb.TYPE_FP32, dims=[elements])
    config.dynamic_batching.SetInParent()
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)
    write_model(repository, config, {1: {"model.py": HERE / "model.py"}})
    return name
