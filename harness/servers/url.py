"""A server someone else runs (`--triton-url`). The harness starts and stops nothing; repository
control is available only if that server runs in explicit model-control mode, which is probed."""

from __future__ import annotations

import requests

from harness.servers.base import Endpoints, ServerSettings, TritonServer


class UrlServer(TritonServer):
    kind = "url"

    def __init__(self, settings: ServerSettings, http: str, grpc: str, metrics: str = ""):
        super().__init__(settings)
        self._endpoints = Endpoints(http=http, grpc=grpc, metrics=metrics or http.rsplit(":", 1)[0] + ":8002")
        self._explicit: bool | None = None

    def _launch(self) -> Endpoints:
        return self._endpoints

    @property
    def controls_repository(self) -> bool:
        """Explicit mode is the only one that accepts load/unload; a no-op load of an unknown name
        answers differently in 'none' mode ("explicit model load / unload is not allowed")."""
        if self._explicit is None:
            response = requests.post(
                f"{self._endpoints.http_url}/v2/repository/models/__yts_probe__/unload", json={}, timeout=10
            )
            self._explicit = "not allowed" not in response.text
        return self._explicit

    def alive(self) -> bool:
        try:
            return requests.get(f"{self._endpoints.http_url}/v2/health/live", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def log_tail(self, lines: int = 60) -> str:
        return "(the server at --triton-url is not ours: read its log where it runs)"

    def stop(self) -> None:
        """Not ours to stop."""
