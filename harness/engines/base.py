"""The one interface every runtime sits behind, so suites compare ONNX Runtime, PyTorch and TensorRT
outputs (and signatures) without knowing which is which."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from harness.engines.signature import Signature


@runtime_checkable
class Engine(Protocol):
    """A loaded model that runs named numpy tensors. `precision` is what the arithmetic runs in
    ("fp32", "fp16", "int8"), `device` where ("cpu", "cuda:0")."""

    name: str
    precision: str
    device: str

    @property
    def signature(self) -> Signature: ...

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


class EngineUnavailable(RuntimeError):
    """The runtime an engine needs is not installed or has no device here; the message says which.
    Tests turn it into a skip with that reason."""


def check_inputs(signature: Signature, inputs: dict[str, np.ndarray]) -> None:
    """Fail before the runtime does, with names and shapes in the message (runtimes' own errors rarely
    say which tensor was wrong)."""
    expected = {spec.name: spec for spec in signature.inputs}
    missing = sorted(set(expected) - set(inputs))
    extra = sorted(set(inputs) - set(expected))
    if missing or extra:
        raise ValueError(f"inputs: expected {sorted(expected)}, got {sorted(inputs)} (missing {missing}, extra {extra})")
    for name, array in inputs.items():
        spec = expected[name]
        if len(array.shape) != len(spec.shape) or any(
            want != -1 and want != got for want, got in zip(spec.shape, array.shape)
        ):
            raise ValueError(f"input {name!r}: expected shape {spec.shape} (-1 = any), got {tuple(array.shape)}")
