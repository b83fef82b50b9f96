"""The reference Triton repository: built for this machine from the cached artifacts and the model
folders in reference_repo/, and which of its models a given server can load.

Imports are lazy: the served model.py files import `harness.reference.serving` inside Triton's Python
stub (in the container, from a copy vendored into the version folder), where the build side's
dependencies (tritonclient's protobufs, onnx tooling) need not exist."""

from __future__ import annotations

__all__ = ["build_reference_repository", "loadable_models", "server_backends"]


def __getattr__(name: str):
    if name == "build_reference_repository":
        from harness.reference.build import build_reference_repository

        return build_reference_repository
    if name in ("loadable_models", "server_backends"):
        from harness.reference import loadable

        return getattr(loadable, name)
    raise AttributeError(f"module 'harness.reference' has no attribute {name!r}")
