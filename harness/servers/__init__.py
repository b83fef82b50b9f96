"""Triton server launchers: `process` (the binary inside nvidia-pytriton), `container`
(testcontainers), `url` (a server someone else runs). One interface, chosen by --triton."""

from harness.servers.base import Endpoints, ServerSettings, ServerStartError, TritonServer
from harness.servers.choose import create_server, docker_available

__all__ = [
    "Endpoints",
    "ServerSettings",
    "ServerStartError",
    "TritonServer",
    "create_server",
    "docker_available",
]
