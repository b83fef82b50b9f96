"""The server's side of a measurement, from Triton's statistics API: snapshots at window
boundaries, and per-request queue / compute-input / compute-infer / compute-output averages over
the span between two snapshots (perf_analyzer's "server-side" breakdown)."""

from __future__ import annotations

PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def _int(value) -> int:
    return int(value or 0)  # the gRPC JSON renders uint64 as strings


class StatisticsProbe:
    """Callable: returns the model's statistics as JSON, every version merged by the caller."""

    def __init__(self, grpc_url: str, model: str):
        import tritonclient.grpc as grpcclient

        self._client = grpcclient.InferenceServerClient(grpc_url)
        self.url = grpc_url  # the Locust master builds its own probe from these two
        self.model = model

    def __call__(self) -> dict:
        return self._client.get_inference_statistics(self.model, as_json=True)

    def close(self) -> None:
        self._client.close()


def model_stats(snapshot: dict, model: str | None = None) -> dict:
    """Sum the entries of one model (one per loaded version)."""
    total = {"execution_count": 0, "inference_count": 0, "success": [0, 0],
             **{phase: [0, 0] for phase in PHASES}, "batch_stats": {}}
    for entry in snapshot.get("model_stats", []):
        if model is not None and entry.get("name") != model:
            continue
        total["execution_count"] += _int(entry.get("execution_count"))
        total["inference_count"] += _int(entry.get("inference_count"))
        stats = entry.get("inference_stats", {})
        for phase in ("success", *PHASES):
            total[phase][0] += _int(stats.get(phase, {}).get("count"))
            total[phase][1] += _int(stats.get(phase, {}).get("ns"))
        for batch in entry.get("batch_stats", []):
            size = _int(batch.get("batch_size"))
            total["batch_stats"][size] = total["batch_stats"].get(size, 0) + _int(batch.get("compute_infer", {}).get("count"))
    return total


def delta(start: dict, end: dict, model: str | None = None) -> dict:
    a, b = model_stats(start or {}, model), model_stats(end, model)
    out = {"execution_count": b["execution_count"] - a["execution_count"],
           "inference_count": b["inference_count"] - a["inference_count"],
           "batch_stats": {size: count - a["batch_stats"].get(size, 0) for size, count in b["batch_stats"].items()}}
    out["batch_stats"] = {size: count for size, count in sorted(out["batch_stats"].items()) if count > 0}
    for phase in ("success", *PHASES):
        out[phase] = [b[phase][0] - a[phase][0], b[phase][1] - a[phase][1]]
    return out


def split(start: dict, end: dict, model: str | None = None) -> dict:
    """Average milliseconds per request in each phase over the span, plus the request count."""
    d = delta(start, end, model)
    requests = d["success"][0]
    table = {"requests": requests, "executions": d["execution_count"]}
    for phase in PHASES:
        count, ns = d[phase]
        table[f"{phase}_ms"] = ns / count / 1e6 if count else 0.0
    return table
