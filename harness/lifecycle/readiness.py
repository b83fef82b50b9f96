"""Readiness seen from outside during a switch: /v2/health/ready and the model's /ready polled in a
thread, so "the model never stopped being ready" is an observation with a count, not an assumption."""

from __future__ import annotations

import threading
import time
from collections import Counter

import requests


class ReadinessProbe:
    def __init__(self, http_url: str, model: str, interval_s: float = 0.02):
        self.http_url = http_url
        self.model = model
        self.interval_s = interval_s
        self.samples: list[tuple[float, int, int]] = []  # (time, server ready code, model ready code)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="readiness-probe")

    def _code(self, session: requests.Session, path: str) -> int:
        try:
            return session.get(f"{self.http_url}{path}", timeout=5).status_code
        except requests.RequestException:
            return 0

    def _run(self) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                now = time.monotonic()
                self.samples.append((now, self._code(session, "/v2/health/ready"),
                                     self._code(session, f"/v2/models/{self.model}/ready")))
                self._stop.wait(self.interval_s)

    def __enter__(self) -> ReadinessProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def codes(self, index: int) -> Counter:
        return Counter(sample[index] for sample in self.samples)

    def problems(self) -> list[str]:
        """Not-ready probes of the model. The server's own readiness is reported, not judged: with
        --strict-readiness Triton 2.51 answers 400 on /v2/health/ready while any version is LOADING
        (every hot reload), and keeps answering 400 after a version failed to load."""
        problems = []
        for index, what in [(2, f"model {self.model!r} (/v2/models/{self.model}/ready)")]:
            codes = self.codes(index)
            bad = sum(n for code, n in codes.items() if code != 200)
            if bad:
                problems.append(f"{what} was not ready in {bad} of {len(self.samples)} probes during the switch "
                                f"(HTTP codes seen: {dict(codes)})")
        if not self.samples:
            problems.append("the readiness probe took no samples")
        return problems
