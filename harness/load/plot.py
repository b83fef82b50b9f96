"""Throughput vs p95 latency, one point per concurrency: the curve a capacity decision is read from."""

from __future__ import annotations

from pathlib import Path


def plot_sweep(series: dict[str, list[dict]], path: Path, title: str = "throughput vs p95 latency") -> Path:
    """series: label → [{"concurrency", "throughput", "p95_ms"}, ...]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, points in series.items():
        xs = [p["p95_ms"] for p in points]
        ys = [p["throughput"] for p in points]
        axes.plot(xs, ys, marker="o", label=label)
        for p in points:
            axes.annotate(f"c{p['concurrency']}", (p["p95_ms"], p["throughput"]), textcoords="offset points",
                          xytext=(4, 4), fontsize=7)
    axes.set_xlabel("p95 latency (ms)")
    axes.set_ylabel("throughput (infer/s)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
