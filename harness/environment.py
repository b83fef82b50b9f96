"""Why a model that failed to load failed: the host's environment or the model's own fault. A Python
model whose code imports a package the server's Python lacks (`No module named 'torch'`: its authors
serve it from their own image), or whose config names an EXECUTION_ENV_PATH this host does not have,
cannot load HERE — a fact of the host, with a way out, like a missing GPU or backend
(harness.availability) — while any other refusal (initialize() raising, a wrong config) is the model's.
Decided from Triton's own load error and the model's completed config, never from the model's name."""

from __future__ import annotations

import re
from pathlib import Path

MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
ENV_PATH = "EXECUTION_ENV_PATH"
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
IMAGE = "--triton=container --triton-image IMAGE (an image that has it)"


def environment_cause(model_dir: Path, triton_reason: str) -> str | None:
    """The verdict's reason ("MODEL's model.py needs module 'x' ...; provide it with ...") when the load
    failure `triton_reason` is this host's environment's doing, else None (the model's own fault)."""
    model_dir = Path(model_dir)
    env_path = _env_path(model_dir)
    if _host_lacks(env_path, model_dir):
        return f"{model_dir.name}'s config names {lacking_env_path(env_path)}; provide it there, or run with {IMAGE}"
    missing = MISSING_MODULE.search(triton_reason or "")
    if missing is None:
        return None
    module = missing.group(1).split(".")[0]
    where = "the Python environment it names" if env_path is not None else "the server's Python"
    return (f"{model_dir.name}'s model.py needs module {module!r}, which {where} lacks; provide it with {ENV_PATH} "
            f"or {IMAGE}")


def absent_env_path(model_dir: Path) -> Path | None:
    """The EXECUTION_ENV_PATH the model's config names, where this host lacks it: for a server on this host,
    the model cannot load here."""
    env_path = _env_path(Path(model_dir))
    return env_path if _host_lacks(env_path, Path(model_dir)) else None


def _host_lacks(env_path: Path | None, model_dir: Path) -> bool:
    """One the repository ships under $$TRITON_MODEL_DIRECTORY and lacks is the repository's fault, not the host's."""
    return env_path is not None and not env_path.exists() and not env_path.is_relative_to(model_dir)


def lacking_env_path(path: Path) -> str:
    return f"{ENV_PATH} {path}, which this host lacks"


def _env_path(model_dir: Path) -> Path | None:
    """The EXECUTION_ENV_PATH the model's config names, resolved as the Python backend resolves it."""
    from harness.checks.model import completed_config
    from harness.repository.config import ConfigError

    try:
        config = completed_config(model_dir)
    except (ConfigError, OSError):
        return None
    if ENV_PATH not in config.parameters:
        return None
    value = config.parameters[ENV_PATH].string_value
    return Path(value.replace(MODEL_DIRECTORY, str(model_dir))) if value else None
