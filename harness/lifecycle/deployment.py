"""One server on its own scratch repository that the lifecycle suite may mutate: the model under
test, the promotion driver, a baseline to return to after each test, and a restart on the same
repository. Restoring uses the harness's own load call, never the driver under test."""

from __future__ import annotations

import shutil
import time
import tempfile
from pathlib import Path
from typing import Callable

import requests

from harness.lifecycle.driver import Driver
from harness.lifecycle.traffic import request_inputs
from harness.repository.config import read_config
from harness.servers import wait


class Deployment:
    def __init__(self, start: Callable[[], object], repository: Path, model: str, driver_class=Driver):
        self._start = start
        self.repository = Path(repository)
        self.model = model
        self.driver_class = driver_class
        self.server = start()
        self.restarts = 0
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
        return read_config(self.model_dir)

    def driver(self) -> Driver:
        return self.driver_class(self.http_url, self.repository, self.model)

    def inputs(self):
        return request_inputs(self.config)

    def index(self) -> list[dict]:
        return [e for e in wait.repository_index(self.http_url) if e.get("name") == self.model]

    def ready_versions(self) -> set[str]:
        return {e["version"] for e in self.index() if e.get("state") == "READY"}

    def restore(self, timeout_s: float = 300.0) -> None:
        """Back to the repository as copied: same version directories and config, loaded and ready."""
        shutil.rmtree(self.model_dir)
        shutil.copytree(self._baseline / self.model, self.model_dir, symlinks=True)
        response = requests.post(f"{self.http_url}/v2/repository/models/{self.model}/load", json={},
                                 timeout=timeout_s)
        if not response.ok:
            raise RuntimeError(f"restoring {self.model} failed: {response.text}")
        wait.ModelReady(self.model, timeout=timeout_s).wait_for(self.server)
        deadline = time.monotonic() + 5
        while not self.server_ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not self.server_ready():
            # Triton 2.5x keeps a failed version's UNAVAILABLE record (and, with strict readiness,
            # /v2/health/ready at 400) through unload and reload; only a restart clears it.
            self.restarts += 1
            self.restart()

    def server_ready(self) -> bool:
        return requests.get(f"{self.http_url}/v2/health/ready", timeout=5).status_code == 200

    def restart(self) -> None:
        self.server.stop()
        self.server = self._start()

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self._baseline, ignore_errors=True)
