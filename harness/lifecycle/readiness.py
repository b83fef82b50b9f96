"""Readiness seen from outside during a switch: /v2/health/ready and the model's /ready polled,
so "the model never stopped being ready" is an observation with a count, not an assumption.

The poller is a process of its own (`python -m harness.lifecycle.readiness`): in-process, K client
threads spinning on fast errors (a model that is gone answers NOT_FOUND in microseconds) starve a
probe thread of the GIL for seconds — exactly while the model is not ready."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter

import requests


# An orchestrator's probe gives up after PROBE_TIMEOUT_S (code 0 here) and marks the replica
# unready after FAILURE_THRESHOLD such probes in a row (Kubernetes' defaults: timeoutSeconds 1,
# failureThreshold 3). A single slow answer on a loaded 2-core host is not a verdict; a 400 is.
PROBE_TIMEOUT_S = 1.0
FAILURE_THRESHOLD = 3


def longest_run(flags: list[bool]) -> int:
    best = run = 0
    for flag in flags:
        run = run + 1 if flag else 0
        best = max(best, run)
    return best


def poll(http_url: str, model: str, interval_s: float) -> None:
    """Child side: one JSON line per sample on stdout until stdin closes."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    def code(session: requests.Session, path: str) -> int:
        try:
            return session.get(f"{http_url}{path}", timeout=PROBE_TIMEOUT_S).status_code
        except requests.RequestException:
            return 0

    with requests.Session() as session:
        print("started", flush=True)
        while not stop.is_set():
            sample = (time.monotonic(), code(session, "/v2/health/ready"), code(session, f"/v2/models/{model}/ready"))
            print(json.dumps(sample), flush=True)
            stop.wait(interval_s)


class ReadinessProbe:
    def __init__(self, http_url: str, model: str, interval_s: float = 0.02):
        self.http_url = http_url
        self.model = model
        self.interval_s = interval_s
        self.samples: list[tuple[float, int, int]] = []  # (monotonic time, server ready code, model ready code)
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> ReadinessProbe:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "harness.lifecycle.readiness", self.http_url, self.model, str(self.interval_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self._process.stdout.readline().strip() != "started":
            raise RuntimeError("the readiness probe process did not start")
        return self

    def __exit__(self, *exc) -> None:
        process, self._process = self._process, None
        try:
            out, _ = process.communicate(input="", timeout=30)  # closing stdin stops the poller
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        self.samples = [tuple(json.loads(line)) for line in out.splitlines() if line.startswith("[")]

    def codes(self, index: int) -> Counter:
        return Counter(sample[index] for sample in self.samples)

    def problems(self) -> list[str]:
        """Not-ready probes of the model. The server's own readiness is reported, not judged: with
        --strict-readiness Triton 2.51 answers 400 on /v2/health/ready while any version is LOADING
        (every hot reload), and keeps answering 400 after a version failed to load."""
        problems = []
        codes = self.codes(2)
        refused = sum(n for code, n in codes.items() if code not in (200, 0))
        if refused:
            problems.append(f"model {self.model!r} (/v2/models/{self.model}/ready) answered not-ready in {refused} of "
                            f"{len(self.samples)} probes during the switch (HTTP codes seen: {dict(codes)})")
        silent = longest_run([sample[2] == 0 for sample in self.samples])
        if silent >= FAILURE_THRESHOLD:
            problems.append(f"model {self.model!r} (/v2/models/{self.model}/ready) did not answer {silent} probes in a "
                            f"row within {PROBE_TIMEOUT_S} s each (an orchestrator gives up after {FAILURE_THRESHOLD})")
        if not self.samples:
            problems.append("the readiness probe took no samples")
        return problems


if __name__ == "__main__":
    poll(sys.argv[1], sys.argv[2], float(sys.argv[3]))
