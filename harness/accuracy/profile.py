"""Thresholds profiles: one documented TOML file per profile (profiles/default.toml explains every key).

`--profile NAME` picks harness/accuracy/profiles/NAME.toml, `--profile path.toml` any file; a file may
say `extends = "default"` and override only what it names, so a team's profile stays a few lines."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

PROFILES = Path(__file__).parent / "profiles"
PRECISIONS = ("fp32", "fp16", "int8")


def _merge(base: dict, override: dict) -> dict:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"accuracy profile {path} does not exist")
        return path
    candidate = PROFILES / f"{name_or_path}.toml"
    if not candidate.is_file():
        known = sorted(p.stem for p in PROFILES.glob("*.toml"))
        raise FileNotFoundError(f"accuracy profile {name_or_path!r}: no {candidate.name} in {PROFILES} (known: {known})")
    return candidate


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    if path.resolve() in seen:
        raise ValueError(f"accuracy profile {path}: 'extends' loops through {[str(p) for p in seen]}")
    data = tomllib.loads(path.read_text())
    parent = data.pop("extends", None)
    if parent is None:
        return data
    parent_path = _resolve(parent) if not (path.parent / parent).is_file() else path.parent / parent
    return _merge(_read(parent_path, seen + (path.resolve(),)), data)


@dataclass(frozen=True)
class Profile:
    name: str
    source: Path
    data: dict

    def section(self, level: str, precision: str) -> dict:
        """Thresholds of one level ("tensors", "boxes", "map") for one precision."""
        try:
            return self.data[level][precision]
        except KeyError:
            raise KeyError(f"accuracy profile {self.source}: no [{level}.{precision}] table") from None

    @property
    def eval(self) -> dict:
        return self.data["eval"]

    def get(self, dotted: str, default=None):
        node = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node


def load_profile(name_or_path: str | Path = "default") -> Profile:
    """The profile, merged over what it extends; missing required tables fail here, not mid-run."""
    path = _resolve(name_or_path)
    data = _read(path)
    missing = [f"{level}.{p}" for level in ("tensors", "boxes", "map") for p in PRECISIONS
               if p not in data.get(level, {})] + [t for t in ("eval", "slices", "coverage") if t not in data]
    if missing:
        raise ValueError(f"accuracy profile {path}: missing tables {missing} (start it with extends = \"default\")")
    return Profile(name=path.stem, source=path, data=data)
