"""One server at a time: no two servers of a run hold models on the same GPU at once.

Three suites start servers of their own (config's live loads, batching's measurement server with its
unbatched twins, lifecycle's explicit-control deployment); the others share the session server, which a
fixture starts at its first use. So the suites that own a server run first, each server is stopped when
the last test of its suite is done, and the session server comes up only after them. On an 80 GB card
two servers of the GPU reference build did not fit side by side (issue 31); on any host it halves what a
run needs. On a GPU host, the card's used memory must come back to where it was before the suite's
server started (no stub left holding memory); where it does not, the run says so."""

from __future__ import annotations

import time
from typing import Callable

OWN_SERVER_SUITES = ("config", "batching", "lifecycle")  # in this order, before every other suite
SETTLE_S = 30.0  # a stopped server's stubs release the card within seconds
LEFT_OVER_BYTES = 512 << 20


def suite_rank(suite: str | None) -> int:
    """Sort key of a test's suite: own-server suites first (in OWN_SERVER_SUITES order), then the rest as
    collected; tests outside the suites keep their place relative to each other."""
    return OWN_SERVER_SUITES.index(suite) if suite in OWN_SERVER_SUITES else len(OWN_SERVER_SUITES)


class SuiteServers:
    """Stops registered at a suite's start, run when its last test is done (then again, harmlessly, by
    the fixtures' own teardown at the end of the session)."""

    def __init__(self, gpu_used: Callable[[], int] | None = None):
        self._stops: dict[str, list[Callable[[], None]]] = {}
        self._gpu_used = gpu_used
        self.baseline = gpu_used() if gpu_used else None
        self.left_over: dict[str, int] = {}  # suite -> bytes still held on the card after its server stopped

    def register(self, suite: str, stop: Callable[[], None]) -> None:
        self._stops.setdefault(suite, []).append(stop)

    def close(self, suite: str) -> str | None:
        """Stop the suite's servers; on a GPU host wait for the card to come back to its baseline. Returns
        a line to show when it did not."""
        stops = self._stops.pop(suite, [])
        for stop in stops:
            stop()
        if not stops or self._gpu_used is None:
            return None
        deadline = time.monotonic() + SETTLE_S
        while (extra := self._gpu_used() - self.baseline) > LEFT_OVER_BYTES and time.monotonic() < deadline:
            time.sleep(1.0)
        if extra <= LEFT_OVER_BYTES:
            return None
        self.left_over[suite] = extra
        return (f"after the {suite} suite's server stopped, the GPU still holds {extra / (1 << 20):.0f} MiB more than "
                f"before it started ({SETTLE_S:.0f} s later): a process of that server kept GPU memory")
