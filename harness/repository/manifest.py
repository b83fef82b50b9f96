"""What a repository's owner declares about it, for what the suites cannot read from the configs: a
small TOML file (`--manifest PATH`, else `yts.toml` at the repository root) and `--model NAME=ROLE`,
`--imgsz`, `--nc` on the command line, which win over the file.

    # yts.toml
    imgsz = 640            # the input size the models were exported at
    nc = 80                # classes: raw outputs are [N, 4 + nc, anchors]
    [models]
    detector = "raw"       # [N, 3, H, W] FP32 letterboxed images -> [N, 4 + nc, anchors]
    pipeline = "e2e"       # encoded images (TYPE_STRING) -> detections [max_det, 6], num_detections
    tokenizer = "skip"     # not a detector: reported as not tested, never as passed

A model neither declared nor recognisable is reported "not tested, because its layout is unknown"."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_NAME = "yts.toml"
ROLES = ("raw", "e2e", "skip")
KEYS = ("imgsz", "nc", "models")


class ManifestError(ValueError):
    """The manifest or a command-line declaration is wrong; the message says which entry and why."""


@dataclass(frozen=True)
class Manifest:
    models: dict[str, str] = field(default_factory=dict)
    imgsz: int | None = None
    nc: int | None = None
    source: str = "none"

    def role(self, name: str) -> str | None:
        return self.models.get(name)

    def skipped(self, name: str) -> bool:
        return self.models.get(name) == "skip"


def _positive(key: str, value, origin: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ManifestError(f"{origin}: {key} = {value!r} must be a positive integer")
    return value


def _role(name: str, role, origin: str) -> str:
    if role not in ROLES:
        raise ManifestError(f"{origin}: model {name!r} = {role!r}: the role must be one of {list(ROLES)}")
    return role


def parse_model_option(text: str) -> tuple[str, str]:
    """`--model NAME=ROLE` -> (NAME, ROLE)."""
    name, sep, role = text.partition("=")
    if not sep or not name.strip():
        raise ManifestError(f"--model {text!r}: expected NAME=ROLE with ROLE one of {list(ROLES)}")
    return name.strip(), _role(name.strip(), role.strip(), "--model")


def load_manifest(repository: Path, path: Path | None = None, models: list[str] = (), imgsz: int | None = None,
                  nc: int | None = None) -> Manifest:
    repository = Path(repository)
    path = Path(path) if path is not None else (repository / MANIFEST_NAME if (repository / MANIFEST_NAME).is_file() else None)
    data: dict = {}
    if path is not None:
        if not path.is_file():
            raise ManifestError(f"--manifest {path}: no such file")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ManifestError(f"{path}: not valid TOML: {error}") from None
        unknown = sorted(set(data) - set(KEYS))
        if unknown:
            raise ManifestError(f"{path}: unknown keys {unknown} (a manifest has {list(KEYS)})")
        if not isinstance(data.get("models", {}), dict):
            raise ManifestError(f"{path}: [models] must be a table of NAME = ROLE")
    origin = str(path) if path else "command line"
    declared = {name: _role(name, role, origin) for name, role in data.get("models", {}).items()}
    declared.update(parse_model_option(text) for text in models)
    present = sorted(p.name for p in repository.iterdir() if p.is_dir()) if repository.is_dir() else []
    missing = sorted(set(declared) - set(present))
    if missing:
        raise ManifestError(f"{origin}: declares {missing}, which the repository {repository} does not have (it has {present})")
    return Manifest(models=declared, imgsz=_positive("imgsz", imgsz if imgsz is not None else data.get("imgsz"), origin),
                    nc=_positive("nc", nc if nc is not None else data.get("nc"), origin),
                    source=", ".join(s for s in (str(path) if path else "", "command line" if (models or imgsz or nc) else "") if s) or "none")
