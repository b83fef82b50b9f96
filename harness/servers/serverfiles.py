"""Where the embedded Triton comes from: the real server that the nvidia-pytriton wheel ships
(PLATFORM.md). Its Python backend needs the stub built for *our* interpreter copied beside it, and
the stub embeds that interpreter, so the harness's own venv (numpy < 2) is the models' Python."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from importlib import util
from pathlib import Path

from harness.paths import cache_dir


class ServerFilesMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class ServerFiles:
    root: Path  # .../site-packages/pytriton/tritonserver

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def libs(self) -> Path:
        return self.root.parent.parent / "nvidia_pytriton.libs"

    def stub(self, python: tuple[int, int] = sys.version_info[:2]) -> Path:
        stub = self.root / "python_backend_stubs" / f"{python[0]}.{python[1]}" / "triton_python_backend_stub"
        if not stub.exists():
            raise ServerFilesMissing(f"nvidia-pytriton ships no Python backend stub for Python {python[0]}.{python[1]}")
        return stub

    def backend_directory(self) -> Path:
        """A backends/ tree with python/ and the stub for this interpreter (built once, cached)."""
        version = "%d.%d" % sys.version_info[:2]
        target = cache_dir("triton-backends", f"py{version}")
        python_dir = target / "python"
        if not (python_dir / "triton_python_backend_stub").exists():
            staging = target / "python.tmp"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(self.root / "backends" / "python", staging, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copy2(self.stub(), staging / "triton_python_backend_stub")
            shutil.rmtree(python_dir, ignore_errors=True)
            staging.rename(python_dir)
        return target

    def environment(self) -> dict[str, str]:
        """PATH puts our interpreter first (the stub embeds the first python3 on PATH);
        LD_LIBRARY_PATH gives the stub its libpython and the wheel's bundled libraries."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        libdirs = [sysconfig.get_config_var("LIBDIR") or "", str(self.libs), env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libdirs if p)
        env.pop("PYTHONPATH", None)
        return env


def locate() -> ServerFiles:
    spec = util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServerFilesMissing("the embedded server needs the `nvidia-pytriton` wheel: pip install nvidia-pytriton==0.7.0")
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    files = ServerFiles(root)
    if not files.binary.exists():
        raise ServerFilesMissing(f"no tritonserver binary at {files.binary}")
    return files
