"""config.pbtxt is a text-format ModelConfig: parsed and written only through the protobuf that
tritonclient ships, so what the harness writes is what Triton reads, field for field."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

ModelConfig = model_config_pb2.ModelConfig
DataType = model_config_pb2.DataType
CONFIG_NAME = "config.pbtxt"


class ConfigError(ValueError):
    """A config.pbtxt that does not parse as ModelConfig; the message names the file and the line."""


def parse_config(text: str, source: str = "<string>") -> model_config_pb2.ModelConfig:
    try:
        return text_format.Parse(text, model_config_pb2.ModelConfig())
    except text_format.ParseError as error:
        raise ConfigError(f"{source}: does not parse as ModelConfig: {error}") from error


def read_config(model_dir: Path) -> model_config_pb2.ModelConfig:
    path = Path(model_dir) / CONFIG_NAME
    return parse_config(path.read_text(), str(path))


def write_config(model_dir: Path, config: model_config_pb2.ModelConfig) -> Path:
    path = Path(model_dir) / CONFIG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_format.MessageToString(config))
    return path


def from_json(payload: dict) -> model_config_pb2.ModelConfig:
    """The server's JSON model config (HTTP /config) as a ModelConfig, for comparing with the file."""
    return json_format.ParseDict(payload, model_config_pb2.ModelConfig(), ignore_unknown_fields=True)


def dtype_name(value: int) -> str:
    """TYPE_FP32 → "FP32": the strings tritonclient and harness.engines.signature use."""
    return model_config_pb2.DataType.Name(value).removeprefix("TYPE_")
