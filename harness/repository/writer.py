"""Writes model directories: `NAME/config.pbtxt` from a ModelConfig and `NAME/<version>/<files>`."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.repository.config import ModelConfig, write_config


def write_model(
    repository: Path,
    config: ModelConfig,
    versions: dict[int, dict[str, Path | bytes | str]],
    extra_files: dict[str, Path | bytes | str] | None = None,
) -> Path:
    """versions: {1: {"model.py": Path(...)}}. A Path is copied (a directory recursively), bytes or
    str are written as they are. extra_files land beside config.pbtxt."""
    model_dir = Path(repository) / config.name
    model_dir.mkdir(parents=True, exist_ok=True)
    write_config(model_dir, config)
    for version, files in versions.items():
        _place(model_dir / str(version), files)
    _place(model_dir, extra_files or {})
    return model_dir


def _place(directory: Path, files: dict[str, Path | bytes | str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = directory / name
        if isinstance(content, Path):
            if content.is_dir():
                shutil.copytree(content, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(content, target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
