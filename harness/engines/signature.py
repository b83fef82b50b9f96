"""The I/O signature of a model file, as the config suite compares it against config.pbtxt.

Dtypes are Triton's names without the TYPE_ prefix ("FP32", "FP16", "INT64", "BYTES"), the same
strings tritonclient uses, so signatures, configs and client tensors compare without translation.
A dynamic dim is -1, as in config.pbtxt.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Profile:
    """A TensorRT optimization profile for one input: min/opt/max shapes, batch dim included."""

    input: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    profiles: tuple[Profile, ...] = field(default=())
    source: str = ""
