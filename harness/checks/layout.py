"""Layout: what Triton reads from a model directory, and what it ignores without a word.

Triton takes versions only from numeric subdirectories (others are skipped: a repository whose only
version is `v1/` fails with "at least one version must be available"), loads only the default model
filename of the platform/backend (or `default_model_filename`), and refuses a config whose `name`
differs from the directory with the bare "failed to poll from model repository"."""

from __future__ import annotations

import os
from pathlib import Path

from harness.checks.findings import Finding
from harness.checks.model import MODEL_SUFFIXES, ModelEntry
from harness.repository.config import CONFIG_NAME

CHECK = "layout"
# Files beside config.pbtxt that are documentation, not something Triton should have read.
DOC_SUFFIXES = (".md", ".rst", ".txt", ".json", ".yaml", ".yml")


def check_layout(entry: ModelEntry) -> list[Finding]:
    findings: list[Finding] = []

    def add(file: str, message: str) -> None:
        findings.append(Finding(CHECK, entry.name, file, message))

    if not entry.config_path.is_file() and not entry.autocomplete:
        add(f"{entry.name}/{CONFIG_NAME}", f"missing: with auto-complete disabled every model directory needs a "
            f"{CONFIG_NAME}")
    config = entry.declared
    if config is not None and config.name and config.name != entry.name:
        add(f"{entry.name}/{CONFIG_NAME}", f"config name {config.name!r} differs from its directory "
            f"{entry.name!r}: Triton refuses the model (\"failed to poll from model repository\"); "
            f"expected name: \"{entry.name}\"")
    _versions(entry, add)
    _model_files(entry, add)
    _stray(entry, add)
    _links(entry, add)
    return findings


def _versions(entry: ModelEntry, add) -> None:
    non_numeric = sorted(p.name for p in entry.path.iterdir()
                         if p.is_dir() and not p.name.isdigit() and not _allowed_dir(p.name))
    for name in non_numeric:
        add(f"{entry.name}/{name}/", f"version directory {name!r} is not a number: Triton skips it silently "
            f"(expected numeric version directories such as 1/)")
    if not entry.version_dirs:
        add(f"{entry.name}/", "no version directory: expected at least one numeric directory such as "
            f"{entry.name}/1/ (Triton: \"at least one version must be available\")")
    elif entry.config is not None and not entry.served_versions():
        present = [p.name for p in entry.version_dirs]
        add(f"{entry.name}/{CONFIG_NAME}", f"version_policy selects none of the version directories present {present}")


def _allowed_dir(name: str) -> bool:
    # configs/: alternative configs for --model-config-name; warmup/: model_warmup input files.
    return name in ("configs", "warmup", "__pycache__") or name.startswith(".")


def _model_files(entry: ModelEntry, add) -> None:
    filename = entry.model_filename
    if filename is None:
        return
    for version in entry.version_dirs:
        if entry.served_versions() and int(version.name) not in entry.served_versions():
            continue
        expected = version / filename
        if expected.exists() or expected.is_symlink():
            continue
        found = sorted(p.name for p in version.iterdir() if p.name.endswith(MODEL_SUFFIXES) and p.name != "__pycache__")
        rel = f"{entry.name}/{version.name}/{filename}"
        how = (f"default_model_filename {filename!r}" if entry.config.default_model_filename
               else f"the default filename for {entry.platform or entry.backend}")
        add(rel, f"missing: Triton loads only {filename} ({how}); found {found or 'no model file'}"
            + (f" — rename {found[0]} to {filename} or set default_model_filename" if found else ""))


def _stray(entry: ModelEntry, add) -> None:
    for path in sorted(entry.path.iterdir()):
        if path.is_dir() or path.name == CONFIG_NAME or path.name.startswith("."):
            continue
        if path.name.endswith(MODEL_SUFFIXES):
            add(f"{entry.name}/{path.name}", "model file beside config.pbtxt: Triton loads model files only "
                f"from a version directory (expected {entry.name}/1/{entry.model_filename or path.name})")
        elif path.suffix == ".pbtxt" or path.name.startswith(CONFIG_NAME):
            add(f"{entry.name}/{path.name}", f"Triton reads only {CONFIG_NAME}; this file is ignored")
    filename = entry.model_filename
    for version in entry.version_dirs:
        for path in sorted(version.iterdir()):
            rel = f"{entry.name}/{version.name}/{path.name}"
            if path.name == CONFIG_NAME:
                add(rel, f"{CONFIG_NAME} inside a version directory is ignored: Triton reads {entry.name}/{CONFIG_NAME}")
            elif (filename and path.name != filename and path.name.endswith(MODEL_SUFFIXES)
                  and not filename.endswith(".py") and (version / filename).exists()):
                add(rel, f"ignored: Triton loads {filename} from this directory, never {path.name}")


def _links(entry: ModelEntry, add) -> None:
    root = entry.repository.resolve()
    for dirpath, dirnames, filenames in os.walk(entry.path, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not path.is_symlink():
                continue
            rel = str(path.relative_to(entry.repository))
            target = Path(os.path.realpath(path))
            if not target.exists():
                add(rel, f"dangling symlink to {os.readlink(path)}")
            elif root not in (target, *target.parents):
                add(rel, f"symlink escapes the repository: points to {target}, outside {root} "
                    "(a container mount or a copy of the repository will not see it)")
