"""One server on its own scratch repository that the lifecycle suite may mutate: the model under
test, the ensembles that depend on it (loaded too, and driven alongside), the promotion driver, a
baseline to return to after each test, and a restart on the same repository. Restoring uses the
harness's own load call, never the driver under test. One server serves the whole suite: a test that
judges the server's own readiness asks for a clean one (require_server_ready), and only then, after a
failed version load left /v2/health/ready at 400, is the server restarted."""

from __future__ import annotations

import filecmp
import os
import shutil
import time
import tempfile
from pathlib import Path
from typing import Callable

import requests

from harness.checks.model import completed_config
from harness.lifecycle.driver import Driver
from harness.lifecycle.traffic import request_inputs
from harness.servers import wait


class Deployment:
    def __init__(self, start: Callable[[], object], repository: Path, model: str, driver_class=Driver,
                 dependents: tuple[str, ...] = (), manifest=None):
        self._start = start
        self.repository = Path(repository)
        self.model = model
        self.driver_class = driver_class
        self.dependents = tuple(dependents)
        self.manifest = manifest
        self.server = start()
        self.restarts = 0
        self.ready_since: dict[str, float] = {}  # version -> when it was last seen (re)loaded and READY
        self.reloaded()
        self._baseline_ready = self.ready_versions()
        self._baseline = Path(tempfile.mkdtemp(prefix=f"baseline-{model}-", dir=self.repository.parent))
        shutil.copytree(self.model_dir, self._baseline / model, symlinks=True)

    @property
    def model_dir(self) -> Path:
        return self.repository / self.model

    @property
    def http_url(self) -> str:
        return self.server.endpoints.http_url

    @property
    def grpc(self) -> str:
        return self.server.endpoints.grpc

    @property
    def config(self):
        return completed_config(self.model_dir)

    def driver(self) -> Driver:
        return self.driver_class(self.http_url, self.repository, self.model)

    def inputs(self, model: str | None = None):
        """Requests for `model` (default: the one under test) as its layout takes them."""
        from harness.repository.layouts import read_layout

        model = model or self.model
        config = completed_config(self.repository / model)
        declared = self.manifest.layout(model) if self.manifest is not None else None
        return request_inputs(config, read_layout(config, declared, model))

    def index(self) -> list[dict]:
        return [e for e in wait.repository_index(self.http_url) if e.get("name") == self.model]

    def ready_versions(self) -> set[str]:
        return {e["version"] for e in self.index() if e.get("state") == "READY"}

    def reloaded(self) -> None:
        """Every READY version was (re)loaded just now (a start, a restore, a policy change): their READY times."""
        now = time.monotonic()
        self.ready_since = {version: now for version in self.ready_versions()}

    def note_ready(self, at: float | None = None) -> dict[str, float]:
        """Versions READY now that were not before get `at` (default now) as their READY time; gone ones are
        dropped. So a record can tell requests failed right after a version reported READY (harness.lifecycle.checks)."""
        ready = self.ready_versions()
        at = time.monotonic() if at is None else at
        self.ready_since = {version: self.ready_since.get(version, at) for version in ready}
        return self.ready_since

    def restore(self, timeout_s: float = 300.0) -> None:
        """Back to the repository as copied: same version directories and config, loaded and ready. A server
        that died meanwhile is replaced, so that one crash fails the test it happened in, not every test after
        it; that test is then told why (RuntimeError with the end of the dead server's log). A model still
        serving as copied is not loaded again (a reload restarts its stubs: ~4 s a test on the H100)."""
        as_copied = self.server.alive() and self._serving_as_copied()
        shutil.rmtree(self.model_dir)
        shutil.copytree(self._baseline / self.model, self.model_dir, symlinks=True)
        if not self.server.alive():
            last_words = self.server.log_tail(4)
            self.restarts += 1
            self.restart()
            wait.ModelReady(self.model, timeout=timeout_s).wait_for(self.server)
            raise RuntimeError(f"the Triton server died during this test; a fresh one serves the next tests. "
                               f"The end of its log:\n{last_words}")
        if not as_copied:
            wait.load(self.server, [self.model], timeout_s)
            self.reloaded()
        # Triton reloads the ensembles built on a model with it; one a test's version broke, and that is not READY
        # now, is loaded again. A READY one is not: POST load of an ensemble may reload its steps too (their stubs
        # restarted in one restore of an H100 run, ~1.6 s; once in a CPU run).
        wait.load(self.server, wait.not_ready(self.server, list(self.dependents)), timeout_s)

    def _serving_as_copied(self) -> bool:
        """The versions READY are the ones READY at the start, and the config and every file copied are
        unchanged: what is served was loaded from the copy. The suite's tests change a model only by adding
        version directories (new, broken), changing the config (a pinned policy) or removing versions, never
        by editing a served version's files and putting them back, so a version whose files equal the copy's
        was loaded from them; a version a test added and never got READY is just removed."""
        if self.ready_versions() != self._baseline_ready:
            return False
        copied = self._baseline / self.model
        for directory, _, files in os.walk(copied):
            for name in files:
                path = Path(directory, name)
                current = self.model_dir / path.relative_to(copied)
                if not (current.is_file() and filecmp.cmp(path, current, shallow=False)):
                    return False
        return True

    def require_server_ready(self, settle_s: float = 5.0) -> None:
        """A server whose /v2/health/ready answers 200, for a test that judges it: Triton 2.5x keeps a
        failed version's UNAVAILABLE record (and, with strict readiness, /v2/health/ready at 400) through
        unload and reload; only a restart clears it. Every other test shares the server as it is."""
        deadline = time.monotonic() + settle_s
        while not self.server_ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not self.server_ready():
            self.restarts += 1
            self.restart()
            wait.ModelReady(self.model, timeout=300).wait_for(self.server)

    def server_ready(self) -> bool:
        return requests.get(f"{self.http_url}/v2/health/ready", timeout=5).status_code == 200

    def restart(self) -> None:
        self.server.stop()
        self.server = self._start()
        self.reloaded()

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self._baseline, ignore_errors=True)
