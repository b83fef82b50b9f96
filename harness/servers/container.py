"""Triton in a container through testcontainers-python: the user's image (an NGC
`nvcr.io/nvidia/tritonserver:<tag>-py3`) or the locally built CPU default. The repository is mounted
read-only at /models, ports are published on 127.0.0.1 only (random host ports), shm sized for the
largest request, a memory limit set, GPUs passed through device requests when the host has them."""

from __future__ import annotations

import os
import time

from harness.paths import cache_dir
from harness.servers import cleanup
from harness.servers.base import Endpoints, ServerSettings, TritonServer

# No Ryuk here (its image cannot be pulled): the harness reaps by label and record (cleanup.py).
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")

from testcontainers.core.container import DockerContainer  # noqa: E402

HTTP, GRPC, METRICS = 8000, 8001, 8002
MOUNT_POINT = "/models"


class TritonContainer(DockerContainer):
    """One service, one class: defaults for Triton; readiness is the harness's ServerReady wait."""

    def __init__(self, image: str, settings: ServerSettings, mem_limit: str = "8g"):
        import docker

        device_requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if settings.gpus else None
        super().__init__(
            image,
            # with_kwargs() would replace these: everything docker run needs goes in at construction.
            shm_size=settings.shm_size,
            mem_limit=mem_limit,
            labels={cleanup.OWNER_LABEL: str(os.getpid()), "yts.role": "tritonserver"},
            device_requests=device_requests,
        )
        for port in (HTTP, GRPC, METRICS):
            # with_bind_ports cannot bind to 127.0.0.1; a (host_ip, None) value can (PLATFORM.md).
            self.ports[f"{port}/tcp"] = ("127.0.0.1", None)
        self.with_volume_mapping(str(settings.repository), MOUNT_POINT, mode="ro")
        for name, value in settings.environment.items():
            self.with_env(name, value)
        self.with_command(["tritonserver", *settings.triton_args(MOUNT_POINT, HTTP, GRPC, METRICS, address="0.0.0.0")])


class ContainerServer(TritonServer):
    kind = "container"

    def __init__(self, settings: ServerSettings, image: str | None = None):
        super().__init__(settings)
        self.image = image
        self.container: TritonContainer | None = None
        self._log_path = None

    @property
    def log_path(self):
        return self._log_path

    def _launch(self) -> Endpoints:
        from harness.servers.image import ensure_image

        cleanup.track(self)
        self.image = ensure_image(self.image)
        self.container = TritonContainer(self.image, self.settings)
        self.container.start()
        cleanup.record_container(self.container.get_container_id())
        log_dir = self.settings.log_dir or cache_dir("logs")
        self._log_path = log_dir / f"tritonserver-container-{time.strftime('%Y%m%d-%H%M%S')}-{self.container.get_container_id()[:12]}.log"
        host = "127.0.0.1"
        return Endpoints(*(f"{host}:{self.container.get_exposed_port(port)}" for port in (HTTP, GRPC, METRICS)))

    def alive(self) -> bool:
        if self.container is None:
            return False
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return wrapped.status in ("created", "running")

    def log_tail(self, lines: int = 60) -> str:
        if self.container is None:
            return "(no container)"
        stdout, stderr = self.container.get_logs()
        text = (stdout + stderr).decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _save_log(self, container: TritonContainer) -> None:
        """The container's log is gone with it: keep a copy per run, beside the process logs."""
        try:
            stdout, stderr = container.get_logs()
            self._log_path.write_bytes(stdout + stderr)
        except Exception:
            pass

    def stop(self) -> None:
        container, self.container = self.container, None
        if container is not None:
            self._save_log(container)
            container_id = container.get_container_id()
            try:
                container.stop()
            finally:
                cleanup.record_container(container_id, add=False)
        cleanup.untrack(self)
