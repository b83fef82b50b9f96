"""GPU utilisation and memory while a load runs, sampled from Triton's own metrics endpoint
(nv_gpu_utilization, nv_gpu_memory_used_bytes) in a thread: what the GPU did for the throughput a
measurement reports. A server without GPU metrics (a CPU host) gives no samples and no summary."""

from __future__ import annotations

import threading
import time


class GpuSampler:
    """`with GpuSampler(metrics_url) as sampler: run the load`; then `sampler.summary(skip_s=warm-up)`."""

    def __init__(self, endpoint: str | None, interval: float = 0.5):
        self.endpoint, self.interval = endpoint, interval
        self.samples: list[tuple[float, float, float]] = []  # (monotonic s, utilisation 0..1, memory used bytes)
        self._stop = threading.Event()
        self._thread = None
        self.error = None

    def __enter__(self):
        if self.endpoint:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        from harness.metrics.prometheus import scrape

        while not self._stop.is_set():
            try:
                snap = scrape(self.endpoint, timeout=2.0)
                if not snap.has("nv_gpu_utilization"):
                    return  # no GPU metrics on this server: nothing to sample
                self.samples.append((time.monotonic(), snap.value("nv_gpu_utilization"),
                                     snap.value("nv_gpu_memory_used_bytes")))
            except Exception as error:  # noqa: BLE001 -- a missed sample is reported, the load goes on
                self.error = f"{type(error).__name__}: {error}"
            self._stop.wait(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def summary(self, skip_s: float = 0.0) -> dict:
        """Mean and peak utilisation (%) and peak memory after the first `skip_s` (the warm-up); {} when
        the server reported no GPU metrics."""
        if not self.samples:
            return {"samples": 0, "error": self.error} if self.error else {}
        t0 = self.samples[0][0]
        use = [s for s in self.samples if s[0] - t0 >= skip_s] or self.samples
        util = [s[1] * 100 for s in use]
        return {"samples": len(use), "util_pct_mean": round(sum(util) / len(util), 1), "util_pct_max": round(max(util), 1),
                "memory_used_gib_max": round(max(s[2] for s in use) / 2**30, 2)}
