"""mAP gates, MLPerf's convention: the candidate's mAP as a ratio of the FP32 reference's, plus a drop
limit in absolute points, overall and on every slice. A slice's ratio may fall `slice_ratio_slack` lower
than the overall gate and drop `slice_drop_slack_points` more (fewer objects, noisier estimate: the
small slice of the committed set holds 21 objects), but a slice that collapses fails by name."""

from __future__ import annotations

import math

METRICS = ("mAP50_95", "mAP50")


def map_failures(reference: dict[str, dict], candidate: dict[str, dict], thresholds: dict, slice_ratio_slack: float = 0.0,
                 slice_drop_slack_points: float = 0.0) -> list[str]:
    out = []
    for slice_name, ref in reference.items():
        cand = candidate.get(slice_name)
        if cand is None:
            out.append(f"slice {slice_name!r}: the candidate was not scored on it")
            continue
        min_ratio = thresholds["min_ratio"] - (0.0 if slice_name == "all" else slice_ratio_slack)
        max_drop = thresholds["max_drop_points"] + (0.0 if slice_name == "all" else slice_drop_slack_points)
        for metric in METRICS:
            r, c = ref[metric], cand[metric]
            if math.isnan(r):
                continue  # no ground truth in this slice
            drop = (r - c) * 100
            ratio = c / r if r > 0 else 1.0
            where = "overall" if slice_name == "all" else f"slice {slice_name!r}"
            if ratio < min_ratio:
                out.append(f"{where}: {metric} {c:.4f} = {ratio:.1%} of FP32's {r:.4f} (need >= {min_ratio:.1%})")
            elif drop > max_drop:
                out.append(f"{where}: {metric} dropped {drop:.2f} points from FP32's {r:.4f} (allowed {max_drop:g})")
    return out


def settings_failures(at_profile: dict, at_candidate: dict, max_loss_points: float) -> list[str]:
    """The reference's overall mAP lost by the candidate's post-processing settings, in points."""
    out = []
    for metric in METRICS:
        loss = (at_profile[metric] - at_candidate[metric]) * 100
        if not math.isnan(loss) and loss > max_loss_points:
            out.append(f"{metric} {at_candidate[metric]:.4f} at its settings vs {at_profile[metric]:.4f} at the profile's:"
                       f" {loss:.2f} points lost by the settings alone (allowed {max_loss_points:g})")
    return out
