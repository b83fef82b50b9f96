"""What the host offers (GPU, Docker, versions), asked once and shared by plugin, engines and report."""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.cache
def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
