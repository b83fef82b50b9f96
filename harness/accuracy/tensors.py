"""Tensor-level comparison, the statistics Polygraphy's `--check-error-stat` prints: max / mean / median /
p99 of absolute and relative error, the share of elements outside atol + rtol * |ref|, NaN and Inf counts.

YOLO's single output mixes pixels (rows 0-3) and probabilities (rows 4..), so `views` splits it into
"output0:boxes" and "output0:scores" and each view gets its own tolerances. Box rows are compared only
at anchors where the reference scores at least `box_score_floor`: a background anchor's box regression
is unconstrained by training, swings by hundreds of pixels under INT8, and is never kept by NMS."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

REL_FLOOR = 1e-3  # |ref| below this counts as this in relative error, as Polygraphy's epsilon does


@dataclass(frozen=True)
class TensorStats:
    name: str
    elements: int
    abs_max: float
    abs_mean: float
    abs_median: float
    abs_p99: float
    rel_max: float
    rel_mean: float
    rel_median: float
    rel_p99: float
    outside: float  # share of elements with |d| > atol + rtol * |ref|
    atol: float
    rtol: float
    nan: int  # NaN in the candidate (the reference is checked separately: it must have none)
    inf: int
    worst_index: tuple[int, ...]  # where |d| is largest

    def as_dict(self) -> dict:
        return asdict(self)


def compare(name: str, reference: np.ndarray, candidate: np.ndarray, atol: float, rtol: float) -> TensorStats:
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape:
        raise ValueError(f"{name}: candidate shape {cand.shape} != reference shape {ref.shape}")
    nan, inf = int(np.isnan(cand).sum()), int(np.isinf(cand).sum())
    diff = np.abs(cand - ref)
    diff = np.where(np.isfinite(diff), diff, np.inf)  # a NaN element is as wrong as an element can be
    rel = diff / np.maximum(np.abs(ref), REL_FLOOR)
    finite, finite_rel = diff[np.isfinite(diff)], rel[np.isfinite(rel)]

    def q(values: np.ndarray, p: float) -> float:
        return float(np.percentile(values, p)) if values.size else float("inf")

    return TensorStats(
        name=name, elements=int(diff.size),
        abs_max=float(diff.max()) if diff.size else 0.0, abs_mean=float(finite.mean()) if finite.size else float("inf"),
        abs_median=q(finite, 50), abs_p99=q(finite, 99),
        rel_max=float(rel.max()) if rel.size else 0.0, rel_mean=float(finite_rel.mean()) if finite_rel.size else float("inf"),
        rel_median=q(finite_rel, 50), rel_p99=q(finite_rel, 99),
        outside=float((diff > atol + rtol * np.abs(ref)).mean()) if diff.size else 0.0,
        atol=atol, rtol=rtol, nan=nan, inf=inf,
        worst_index=tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) if diff.size else (),
    )


def views(name: str, array: np.ndarray, anchors: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """A YOLO raw output [N, 4 + nc, anchors] -> its box rows (at the `anchors` mask [N, anchors] when
    given, flattened to [4, k]) and score rows; other outputs stay whole."""
    array = np.asarray(array)
    if array.ndim == 3 and array.shape[1] > 4:
        box_rows = array[:, :4]
        if anchors is not None:
            box_rows = box_rows.transpose(1, 0, 2)[:, anchors]
        return {f"{name}:boxes": box_rows, f"{name}:scores": array[:, 4:]}
    return {name: array}


def compare_outputs(reference: dict[str, np.ndarray], candidate: dict[str, np.ndarray], tolerances: dict,
                    box_score_floor: float = 0.0) -> list[TensorStats]:
    """Every reference output, view by view. `tolerances` is a profile's [tensors.<precision>] table:
    {"boxes": {atol, rtol, max_outside}, "scores": {...}}; a whole output uses the "scores" entry."""
    missing = sorted(set(reference) - set(candidate))
    if missing:
        raise ValueError(f"candidate lacks output(s) {missing}; it has {sorted(candidate)}")
    stats = []
    for name, ref in reference.items():
        ref = np.asarray(ref)
        anchors = ref[:, 4:].max(axis=1) >= box_score_floor if ref.ndim == 3 and ref.shape[1] > 4 and box_score_floor > 0 else None
        cand_views = views(name, candidate[name], anchors)
        for view, ref_view in views(name, ref, anchors).items():
            kind = view.rsplit(":", 1)[-1] if ":" in view else "scores"
            tol = tolerances[kind]
            stats.append(compare(view, ref_view, cand_views[view], tol["atol"], tol["rtol"]))
    return stats


def failures(stats: list[TensorStats], tolerances: dict) -> list[str]:
    """What is wrong, one line per view: NaN/Inf first (a broken engine), then too many elements out."""
    out = []
    for s in stats:
        kind = s.name.rsplit(":", 1)[-1] if ":" in s.name else "scores"
        allowed = tolerances[kind]["max_outside"]
        if s.nan or s.inf:
            out.append(f"{s.name}: {s.nan} NaN and {s.inf} Inf values in the candidate's output")
        elif s.outside > allowed:
            out.append(f"{s.name}: {s.outside:.2%} of {s.elements} elements outside atol {s.atol:g} + rtol {s.rtol:g}"
                       f" (allowed {allowed:.2%}); abs err max {s.abs_max:.4g} at {s.worst_index}, p99 {s.abs_p99:.4g},"
                       f" median {s.abs_median:.4g}")
    return out


def table(stats: list[TensorStats]) -> str:
    head = f"{'output':<16} {'abs max':>9} {'abs mean':>9} {'abs med':>9} {'abs p99':>9} {'rel p99':>9} {'outside':>8} {'nan/inf':>7}"
    rows = [f"{s.name:<16} {s.abs_max:>9.3g} {s.abs_mean:>9.3g} {s.abs_median:>9.3g} {s.abs_p99:>9.3g} {s.rel_p99:>9.3g}"
            f" {s.outside:>8.2%} {s.nan + s.inf:>7}" for s in stats]
    return "\n".join([head, *rows])
