"""The stage breakdown as a picture: one stacked bar per model (ms per request), Triton's compute time beside it."""

from __future__ import annotations

from pathlib import Path


def plot_stages(breakdowns, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.8 * len(breakdowns)))
    stages = list(dict.fromkeys(stage for item in breakdowns for stage in item.stages_us))
    colours = {stage: f"C{i}" for i, stage in enumerate(stages)}
    labelled = set()
    for row, item in enumerate(breakdowns):
        left = 0.0
        for stage, us in item.stages_us.items():
            width = us / 1000 / max(item.requests, 1)
            axes.barh(row, width, left=left, color=colours[stage], label=None if stage in labelled else stage)
            labelled.add(stage)
            left += width
        axes.plot([item.compute_us / 1000 / max(item.requests, 1)] * 2, [row - 0.4, row + 0.4], color="black",
                  label="Triton compute_infer" if row == 0 else None)
    axes.set_yticks(range(len(breakdowns)), [b.model for b in breakdowns])
    axes.set_xlabel("ms per request")
    axes.set_title("where the time goes (stage metrics)")
    axes.legend(fontsize=8)
    path = Path(path)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
