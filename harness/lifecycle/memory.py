"""The server's memory, for the unload/load leak bound: the process server's own resident set and how
many stub processes it has (each Python-backend model version is a stub process of its own), or a
container's usage."""

from __future__ import annotations

import os
from pathlib import Path


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..." — comm may hold spaces, so split after the last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry.name))
    return kids


def _private_rss(pid: int) -> int:
    """Resident anonymous and file-backed memory (VmRSS less RssShmem), bytes; 0 once the process is gone."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return sum(int(fields[name].split()[0]) * 1024 for name in ("RssAnon", "RssFile"))
    except (OSError, KeyError, ValueError):
        return 0


def server_memory(server) -> tuple[int, int] | None:
    """(bytes, stub processes), or None where the harness cannot see the server's memory (a server at a
    URL). For the process server, the bytes are tritonserver's own resident set less its shared memory:
    every load starts fresh stub processes for the Python-backend versions, so a stub cannot carry a leak
    across unload/load cycles, but one left running can, and that is what the stub count shows. The stubs'
    shared-memory regions mapped into the server come and go with them (RssShmem swung 5-114 MB between
    consecutive cycles on 2 cores, while the rest moved by tens), and a region left behind keeps its stub.
    A container's usage (everything in it) has no stub count: 0."""
    process = getattr(server, "process", None)
    if process is not None and os.path.exists(f"/proc/{process.pid}"):
        return _private_rss(process.pid), len(_children(process.pid))
    container = getattr(server, "container", None)
    if container is not None:
        try:
            stats = container.get_wrapped_container().stats(stream=False)
            return int(stats["memory_stats"]["usage"]), 0
        except Exception:
            return None
    return None


def floor_growth(samples: list[int]) -> int:
    """How much the memory floor rose across unload/load cycles: the lowest sample of the later half minus
    the lowest of the earlier half. Samples taken under traffic carry the stubs' transient pool and arena
    use of the moment (seen on 2 cores: ±150 MB between consecutive cycles, up and down), so two endpoints
    judge noise; a leak lifts every sample after it, and with it the floor."""
    if len(samples) < 2:
        raise ValueError(f"floor_growth needs at least 2 samples, got {len(samples)}")
    half = len(samples) // 2
    return min(samples[-half:]) - min(samples[:half])
