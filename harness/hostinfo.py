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
def gpu_ids() -> frozenset[int] | None:
    """GPU ids the NVIDIA driver lists, or None without a driver (then nothing is known about them)."""
    if not has_gpu():
        return None
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    return frozenset(range(sum(1 for line in listed.splitlines() if line.startswith("GPU "))))


@functools.cache
def gpu_description() -> dict:
    """GPU name and driver for the report; empty on hosts without one."""
    if not has_gpu():
        return {}
    result = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=20)
    name, _, driver = result.stdout.splitlines()[0].partition(", ") if result.stdout else ("", "", "")
    return {"gpu": name or None, "gpu_driver": driver or None}


DEVICES = ("cpu", "gpu", "auto")


@functools.cache
def reference_device(requested: str = "auto") -> tuple[str, str]:
    """(cpu | gpu, why): which reference build to serve. `auto` takes the GPU build where an NVIDIA GPU
    and a CUDA torch (the GPU build's engine) are both here, else the CPU build, saying which is missing."""
    if requested not in DEVICES:
        raise ValueError(f"--device {requested!r}: one of {list(DEVICES)}")
    if requested != "auto":
        return requested, "asked for"
    if not has_gpu():
        return "cpu", "auto: no NVIDIA GPU here"
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return "cpu", "auto: a GPU, but no torch (the GPU build's engine): pip install torch"
    if not torch.cuda.is_available():
        return "cpu", f"auto: a GPU, but torch {torch.__version__} has no CUDA"
    return "gpu", f"auto: {gpu_description().get('gpu') or 'NVIDIA GPU'}, torch {torch.__version__}"
