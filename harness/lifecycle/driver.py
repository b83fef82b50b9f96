"""The promotion driver: how a deployment puts version N+1 (or back N) into a live server in explicit
model-control mode. The conforming way is the one Triton's own lifecycle tests rely on: place the
version directory (or the config) first, then POST load — Triton loads the new version while the old
one keeps serving and retires the old one only once the new one is READY.

A driver is the thing under test when someone wraps Triton (a deploy script, an operator): subclass
it and override `load` (see fixtures/lifecycle/) and the suite judges that wrapper instead."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from harness.lifecycle.target import disk_versions
from harness.repository.config import read_config, write_config


@dataclass(frozen=True)
class LoadResult:
    ok: bool
    error: str  # Triton's own message when the load failed
    seconds: float


class Driver:
    def __init__(self, http_url: str, repository: Path, model: str, timeout_s: float = 300.0):
        self.http_url = http_url
        self.repository = Path(repository)
        self.model = model
        self.timeout_s = timeout_s

    @property
    def model_dir(self) -> Path:
        return self.repository / self.model

    def _post(self, action: str) -> LoadResult:
        started = time.monotonic()
        response = requests.post(f"{self.http_url}/v2/repository/models/{self.model}/{action}", json={},
                                 timeout=self.timeout_s)
        error = "" if response.ok else _error_text(response)
        return LoadResult(response.ok, error, time.monotonic() - started)

    def load(self) -> LoadResult:
        """Ask Triton to (re)load the model from the repository as it is on disk now."""
        return self._post("load")

    def unload(self) -> LoadResult:
        return self._post("unload")

    def add_version(self, source: int | None = None, version: int | None = None) -> int:
        """Copy version `source` (default: the highest) to `version` (default: highest + 1)."""
        versions = disk_versions(self.model_dir)
        source = versions[-1] if source is None else source
        version = versions[-1] + 1 if version is None else version
        shutil.copytree(self.model_dir / str(source), self.model_dir / str(version), symlinks=True)
        return version

    def promote(self, source: int | None = None) -> tuple[int, LoadResult]:
        version = self.add_version(source)
        return version, self.load()

    def remove_version(self, version: int) -> LoadResult:
        """Rollback by removal: the version directory goes, the load retires it."""
        shutil.rmtree(self.model_dir / str(version))
        return self.load()

    def pin(self, versions: list[int]) -> LoadResult:
        """Rollback by policy: `specific { versions: [...] }`, the newer directory stays on disk."""
        config = read_config(self.model_dir)
        config.version_policy.specific.versions[:] = versions
        write_config(self.model_dir, config)
        return self.load()


def _error_text(response: requests.Response) -> str:
    try:
        return response.json().get("error", response.text)
    except ValueError:
        return response.text or f"HTTP {response.status_code}"


def load_driver(spec: str | None):
    """None → Driver; 'path/to/file.py:ATTR' or 'package.module:ATTR' → that class."""
    if not spec:
        return Driver
    import importlib
    import importlib.util

    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"driver spec wants MODULE:ATTR, got {spec!r}")
    if module_name.endswith(".py"):
        if not Path(module_name).is_file():
            raise ValueError(f"driver spec {spec!r}: no such file {module_name}")
        loaded = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    return getattr(module, attr)
