"""INT8 calibration coverage: an INT8 model's activation ranges are only as good as the images they were
measured on. The calibration.json sidecar (harness.engines.calibration.composition) records per-slice
counts and a brightness histogram; this module sets it against the evaluation set's composition and
fails when a slice of the evaluation set is missing or thin in calibration, or when evaluation images
fall in brightness bins that calibration never saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SIDECAR = "calibration.json"


def read_sidecar(model_path: Path) -> dict | None:
    """The calibration record beside an artifact built by harness.engines.artifacts, or None."""
    sidecar = Path(model_path).parent / SIDECAR
    return json.loads(sidecar.read_text()) if sidecar.exists() else None


def coverage_report(calibration: dict, evaluation: dict) -> dict:
    """Both arguments are `composition()` records (calibration: the sidecar's "composition")."""
    cal_slices, eval_slices = calibration["slices"], evaluation["slices"]
    total = max(calibration["images"], 1)
    cal_hist = np.asarray(calibration["overall"]["luma_histogram"])
    eval_hist = np.asarray(evaluation["overall"]["luma_histogram"])
    uncovered_bins = [i for i, (c, e) in enumerate(zip(cal_hist, eval_hist)) if e > 0 and c == 0]
    edges = evaluation["histogram_edges"]
    return {
        "slices": {name: {"eval_images": eval_slices[name]["count"],
                          "calibration_images": cal_slices.get(name, {}).get("count", 0),
                          "calibration_share": cal_slices.get(name, {}).get("count", 0) / total,
                          "eval_mean_luma": eval_slices[name]["mean_luma"],
                          "calibration_mean_luma": cal_slices.get(name, {}).get("mean_luma")}
                   for name in sorted(eval_slices)},
        "uncovered_bins": [(round(edges[i]), round(edges[i + 1]), int(eval_hist[i])) for i in uncovered_bins],
        "uncovered_eval_share": float(eval_hist[uncovered_bins].sum() / max(eval_hist.sum(), 1)),
        "calibration_images": calibration["images"],
        "eval_images": evaluation["images"],
    }


def coverage_failures(report: dict, thresholds: dict) -> list[str]:
    out = []
    for name, s in report["slices"].items():
        if s["calibration_images"] == 0:
            out.append(f"eval slice {name!r} ({s['eval_images']} images, mean luma {s['eval_mean_luma']}) has no calibration image")
        elif s["calibration_share"] < thresholds["min_slice_share"]:
            out.append(f"eval slice {name!r} is {s['calibration_share']:.0%} of the calibration set"
                       f" ({s['calibration_images']} of {report['calibration_images']}; need >= {thresholds['min_slice_share']:.0%})")
    if report["uncovered_eval_share"] > thresholds["max_uncovered_eval"]:
        bins = ", ".join(f"luma {lo}-{hi}: {n} eval images" for lo, hi, n in report["uncovered_bins"])
        out.append(f"{report['uncovered_eval_share']:.0%} of eval images are in brightness bins with no calibration image ({bins})")
    return out
