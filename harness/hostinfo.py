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


@functools.cache
def gpu_description() -> dict:
    """GPU name and driver for the report; empty on hosts without one."""
    if not has_gpu():
        return {}
    result = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=20)
    name, _, driver = result.stdout.splitlines()[0].partition(", ") if result.stdout else ("", "", "")
    return {"gpu": name or None, "gpu_driver": driver or None}
