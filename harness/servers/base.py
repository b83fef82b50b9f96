"""The one contract every launcher keeps: start on a repository, expose endpoints, stop for good."""

from __future__ import annotations

import abc
import socket
from dataclasses import dataclass, field
from pathlib import Path

from harness.servers import wait


class ServerStartError(RuntimeError):
    """The server did not become ready; the message carries Triton's load errors and its log tail."""


class ModelsFailedToLoad(ServerStartError):
    """The server is live but not ready: models of its load list failed to load. `errors`: model name ->
    Triton's reason from the repository index (so the caller can start again without them)."""

    def __init__(self, message: str, errors: dict[str, str]):
        super().__init__(message)
        self.errors = errors


class PortTaken(ServerStartError):
    """Triton exited because a port chosen for it was taken in the meantime (another server, or a client
    connection's ephemeral port): a fresh launch on other ports is the remedy."""


@dataclass(frozen=True)
class Endpoints:
    http: str
    grpc: str
    metrics: str

    @property
    def http_url(self) -> str:
        return f"http://{self.http}"


EXIT_TIMEOUT_S = 5  # seconds Triton waits for its models to unload when asked to stop


@dataclass
class ServerSettings:
    """What every launcher is asked for; each maps it onto its own mechanics."""

    repository: Path | None = None
    model_control: str = "explicit"  # "none" | "poll" | "explicit"
    load_models: tuple[str, ...] = ("*",)
    startup_timeout: float = 120.0
    log_dir: Path | None = None
    log_verbose: int = 0
    shm_size: int = 512 * 1024 * 1024
    gpus: bool = False
    extra_args: tuple[str, ...] = field(default=())
    environment: dict[str, str] = field(default_factory=dict)  # more variables for the server and its stubs

    def triton_args(
        self, repository: str, http: int, grpc: int, metrics: int, address: str = "127.0.0.1"
    ) -> list[str]:
        """The tritonserver command line, identical for our binary and an NGC image. `address` is
        0.0.0.0 only inside a container, whose ports the host publishes on 127.0.0.1."""
        args = [
            f"--model-repository={repository}",
            f"--http-address={address}",
            f"--grpc-address={address}",
            f"--metrics-address={address}",
            f"--http-port={http}",
            f"--grpc-port={grpc}",
            f"--metrics-port={metrics}",
            f"--model-control-mode={self.model_control}",
            # Stay up when a model fails so the repository index can tell why (not a bare exit).
            "--exit-on-error=false",
            "--strict-readiness=true",
            # At stop no request is in flight: Triton's default 30 s wait for live models only measures how
            # long GPU stubs take to go (the session server took 30.3 s to stop on an H100); what is left is killed.
            f"--exit-timeout-secs={EXIT_TIMEOUT_S}",
            f"--log-verbose={self.log_verbose}",
        ]
        if self.model_control == "explicit":
            args += [f"--load-model={name}" for name in self.load_models]
        if self.model_control == "poll":
            args.append("--repository-poll-secs=2")
        if not self.gpus:
            args.append("--allow-gpu-metrics=false")
        return args + list(self.extra_args)


LAUNCH_ATTEMPTS = 3  # launches on fresh ports when a chosen port was taken before Triton bound it


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TritonServer(abc.ABC):
    """A started server is a context manager; stop() is idempotent and safe from signal handlers."""

    kind: str = "abstract"

    def __init__(self, settings: ServerSettings):
        self.settings = settings
        self.endpoints: Endpoints | None = None

    @property
    def controls_repository(self) -> bool:
        """Whether load/unload through the repository API is available."""
        return self.settings.model_control == "explicit"

    @abc.abstractmethod
    def _launch(self) -> Endpoints:
        """Start the server and return where it listens (not yet ready)."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """False once the server process/container has exited."""

    @abc.abstractmethod
    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the server's own log."""

    def bound(self) -> bool:
        """Whether this server itself listens on its endpoints, so that an answer there is its own (a
        launcher whose ports could be answered by another process says so from its log)."""
        return True

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop and reap the server; never raises for an already stopped one."""

    @property
    def log_path(self) -> Path | None:
        return None

    def start(self) -> TritonServer:
        from harness.servers import cleanup

        if cleanup.interrupted():  # a teardown restarting a server would only delay the stop
            raise ServerStartError(f"the run was interrupted ({cleanup.interrupted()}): no new server is started")
        for attempt in range(LAUNCH_ATTEMPTS):
            self.endpoints = self._launch()
            try:
                wait.ServerReady(self.settings.startup_timeout).wait_for(self)
                return self
            except PortTaken:
                self.stop()
                if attempt == LAUNCH_ATTEMPTS - 1:
                    raise
            except BaseException:
                self.stop()
                raise

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def describe(self) -> str:
        where = f" log: {self.log_path}" if self.log_path else ""
        return f"{self.kind} server at http={self.endpoints.http} grpc={self.endpoints.grpc}{where}"
