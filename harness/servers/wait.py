"""Readiness as small wait objects (testcontainers' idea): a deadline, a poll interval, and a failure
that says why — Triton's own load error from the repository index and the server log tail — rather
than a bare timeout."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import requests

if TYPE_CHECKING:
    from harness.servers.base import TritonServer


def repository_index(http_url: str) -> list[dict]:
    response = requests.post(f"{http_url}/v2/repository/index", json={}, timeout=10)
    response.raise_for_status()
    return response.json()


def load_errors(http_url: str) -> dict[str, str]:
    """Model name (and version) → Triton's reason, for every model that is not READY."""
    errors = {}
    for entry in repository_index(http_url):
        if entry.get("state") not in (None, "READY") or entry.get("reason"):
            label = entry["name"] + (f" v{entry['version']}" if entry.get("version") else "")
            errors[label] = f"{entry.get('state')}: {entry.get('reason', '')}".strip()
    return errors


# Lines after which a Triton 2.51 startup hangs instead of reporting (measured: the Python backend
# stub when the model file is missing). Ordinary load failures are not here: with --exit-on-error=false
# the server goes live and the repository index reports them.
FATAL_LOG_LINES = re.compile(r"Failed to preinitialize Python stub|error: creating server")


def fatal_log_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if FATAL_LOG_LINES.search(line)]


PORT_TAKEN = re.compile(r"failed to start .*already in use")


def _failure(server: TritonServer, headline: str, errors: dict[str, str] | None = None, error=None) -> Exception:
    """`error` (default ServerStartError) with the headline, Triton's load errors and the log tail."""
    from harness.servers.base import ServerStartError

    lines = [headline]
    if errors:
        lines.append("Models that failed to load (Triton's repository index):")
        lines += [f"  {name}: {reason}" for name, reason in sorted(errors.items())]
    lines.append(f"--- last lines of the {server.kind} server log ---")
    lines.append(server.log_tail())
    return (error or ServerStartError)("\n".join(lines))


class _Wait:
    def __init__(self, timeout: float, interval: float = 0.25):
        self.timeout = timeout
        self.interval = interval

    def _poll(self, server: TritonServer, condition) -> bool:
        deadline = time.monotonic() + self.timeout
        polls = 0
        while time.monotonic() < deadline:
            if not server.alive():
                if PORT_TAKEN.search(server.log_tail(400)):
                    from harness.servers.base import PortTaken

                    raise _failure(server, f"The {server.kind} Triton server could not bind a port chosen for it.",
                                   error=PortTaken)
                raise _failure(server, f"The {server.kind} Triton server exited during startup.")
            polls += 1
            if polls % 8 == 0 and (fatal := fatal_log_lines(server.log_tail(400))):
                raise _failure(server, "Triton reported a model load failure:\n" + "\n".join(fatal))
            try:
                if condition():
                    return True
            except requests.RequestException:
                pass
            time.sleep(self.interval)
        return False


class ServerReady(_Wait):
    """Live first (startup loads are done by then), then ready; not ready ⇒ name the failed models."""

    def wait_for(self, server: TritonServer) -> None:
        url = server.endpoints.http_url

        def live() -> bool:
            return server.bound() and requests.get(f"{url}/v2/health/live", timeout=2).status_code == 200

        if not self._poll(server, live):
            raise _failure(server, f"Triton did not become live within {self.timeout:.0f} s.")
        if requests.get(f"{url}/v2/health/ready", timeout=5).status_code == 200:
            return
        from harness.servers.base import ModelsFailedToLoad

        errors = load_errors(url)
        failure = _failure(server, "Triton is live but not ready: a model failed to load.", errors)
        raise ModelsFailedToLoad(str(failure), {label.split(" ")[0]: reason for label, reason in errors.items()})


class ModelReady(_Wait):
    """A model (optionally one version) is READY; a load failure is reported at once."""

    def __init__(self, model: str, version: str = "", timeout: float = 60.0):
        super().__init__(timeout)
        self.model = model
        self.version = version

    def wait_for(self, server: TritonServer) -> None:
        url = server.endpoints.http_url
        path = f"{url}/v2/models/{self.model}" + (f"/versions/{self.version}" if self.version else "")
        if self._poll(server, lambda: requests.get(f"{path}/ready", timeout=2).status_code == 200):
            return
        errors = {k: v for k, v in load_errors(url).items() if k.split(" ")[0] == self.model}
        raise _failure(server, f"Model {self.model!r} did not become ready.", errors)


class ModelUnloaded(_Wait):
    """A model has left the repository index's READY/UNLOADING states: Triton's unload call answers before the
    model's instances have finalized and freed their memory."""

    def __init__(self, model: str, timeout: float = 60.0):
        super().__init__(timeout)
        self.model = model

    def wait_for(self, server: TritonServer) -> None:
        url = server.endpoints.http_url

        def gone() -> bool:
            index = requests.post(f"{url}/v2/repository/index", json={}, timeout=5).json()
            return not any(e["name"] == self.model and e.get("state") in ("READY", "UNLOADING") for e in index)

        if not self._poll(server, gone):
            raise _failure(server, f"Model {self.model!r} was still unloading {self.timeout:.0f} s after its unload call.")


def not_ready(server: TritonServer, models: list[str]) -> list[str]:
    """Those of `models` whose /v2/models/NAME/ready does not answer 200."""
    url = server.endpoints.http_url
    return [m for m in models if requests.get(f"{url}/v2/models/{m}/ready", timeout=5).status_code != 200]


def load(server: TritonServer, models: list[str], timeout: float = 300.0) -> None:
    """Explicit model control's load call for each model, side by side (Triton loads them in parallel), then each
    waited for until READY. A refused load raises at once with Triton's answer and the server log's tail."""
    from concurrent.futures import ThreadPoolExecutor

    if not models:
        return
    url = server.endpoints.http_url

    def post(model: str) -> requests.Response:
        return requests.post(f"{url}/v2/repository/models/{model}/load", json={}, timeout=timeout)

    with ThreadPoolExecutor(len(models)) as pool:
        answers = list(pool.map(post, models))
    for model, answer in zip(models, answers):
        if not answer.ok:
            raise _failure(server, f"Loading {model!r} failed: {answer.text.strip()}", error=RuntimeError)
        ModelReady(model, timeout=timeout).wait_for(server)
