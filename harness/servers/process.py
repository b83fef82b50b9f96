"""The embedded default: tritonserver as a local child process. No Docker needed; model code runs on
the host with the harness's own interpreter (a warning says so for untrusted repositories)."""

from __future__ import annotations

import ctypes
import re
import signal
import subprocess
import time
from pathlib import Path

from harness.paths import cache_dir
from harness.servers import cleanup, serverfiles
from harness.servers.base import Endpoints, ServerSettings, TritonServer, free_port

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel SIGKILLs the server when the harness dies,
    even by SIGKILL, so no server can be orphaned by a crashed run. (The server runs in a session of
    its own: a Ctrl-C at the terminal reaches the harness, which stops it, not the server directly.)"""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ProcessServer(TritonServer):
    kind = "process"

    def __init__(self, settings: ServerSettings, files: serverfiles.ServerFiles | None = None):
        super().__init__(settings)
        self.files = files or serverfiles.locate()
        self.process: subprocess.Popen | None = None
        self._log_path: Path | None = None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def _launch(self) -> Endpoints:
        cleanup.track(self)
        ports = free_port(), free_port(), free_port()
        args = [str(self.files.binary), *self.settings.triton_args(str(self.settings.repository), *ports)]
        args.append(f"--backend-directory={self.files.backend_directory()}")
        log_dir = self.settings.log_dir or cache_dir("logs")
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = log_dir / f"tritonserver-{time.strftime('%Y%m%d-%H%M%S')}-{ports[0]}.log"
        with open(self._log_path, "wb") as log:
            self.process = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.files.environment(), **self.settings.environment},
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )
        cleanup.record_pid(self.process.pid)
        return Endpoints(*(f"127.0.0.1:{port}" for port in ports))

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def bound(self) -> bool:
        """Triton logs each service it started on its address; until all three are there, a health answer
        on these ports may come from another process that took a port meanwhile (Triton then exits with
        "failed to start HTTP service: … already in use")."""
        log = self.log_tail(400)
        return all(re.search(rf"Started [\w ]+ at {re.escape(endpoint)}(?!\d)", log)
                   for endpoint in (self.endpoints.http, self.endpoints.grpc, self.endpoints.metrics))

    def log_tail(self, lines: int = 60) -> str:
        if not self._log_path or not self._log_path.exists():
            return "(no log)"
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM, up to 30 s for Triton to finish in-flight requests (FAST_GRACE_S when the run is
        interrupted), then SIGKILL; whatever is left of its process group (stubs) goes too."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=cleanup.stop_grace(self, 30.0))
                except subprocess.TimeoutExpired:
                    cleanup.kill_server_group(process.pid)
                    process.kill()
                    process.wait()
            cleanup.kill_server_group(process.pid)
            cleanup.record_pid(process.pid, add=False)
        cleanup.untrack(self)
