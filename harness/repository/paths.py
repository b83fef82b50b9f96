"""A vendor's repository must not reach outside itself: no symlink resolving outside the root, no
config field naming a path with `..` or an absolute path (the Python backend's EXECUTION_ENV_PATH,
default_model_filename, cc_model_filenames). Checked on the files, before any server reads them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.repository.config import CONFIG_NAME, ConfigError, read_config

PATH_PARAMETERS = ("EXECUTION_ENV_PATH",)
MODEL_DIR_VARIABLE = "$$TRITON_MODEL_DIRECTORY"


@dataclass(frozen=True)
class Escape:
    path: str  # relative to the root
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _inside(root: Path, target: Path) -> bool:
    try:
        target.relative_to(root)
        return True
    except ValueError:
        return False


def _config_path_escapes(value: str) -> str | None:
    """A path-valued config field may name files under the model directory only."""
    rest = value.replace(MODEL_DIR_VARIABLE, "", 1) if value.startswith(MODEL_DIR_VARIABLE) else value
    rest = rest.lstrip("/") if value.startswith(MODEL_DIR_VARIABLE) else rest
    if PurePosixPath(rest).is_absolute():
        return f"absolute path {value!r}"
    if ".." in PurePosixPath(rest).parts:
        return f"path {value!r} climbs out with '..'"
    return None


def validate_paths(root: Path) -> list[Escape]:
    """Every way the repository under `root` points outside itself; empty when it does not."""
    root = Path(root).resolve()
    escapes: list[Escape] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if ".." in name.split(os.sep):
                escapes.append(Escape(rel, "a name of '..'"))
            if path.is_symlink():
                target = os.readlink(path)
                resolved = path.resolve()
                if not _inside(root, resolved):
                    escapes.append(Escape(rel, f"symlink to {target!r} resolves outside the repository ({resolved})"))
    for config_path in sorted(root.glob(f"*/{CONFIG_NAME}")):
        rel = str(config_path.relative_to(root))
        try:
            config = read_config(config_path.parent)
        except ConfigError:
            continue  # a config that does not parse is the config suite's finding, not a path escape
        fields = [("default_model_filename", config.default_model_filename)]
        fields += [(f"cc_model_filenames[{k}]", v) for k, v in config.cc_model_filenames.items()]
        fields += [(f"parameters[{k}]", config.parameters[k].string_value) for k in PATH_PARAMETERS if k in config.parameters]
        for field_name, value in fields:
            reason = value and _config_path_escapes(value)
            if reason:
                escapes.append(Escape(rel, f"{field_name}: {reason}"))
    return escapes
