"""Box-level comparison: candidate detections against the reference's, image by image, after NMS, by the
greedy class-agnostic IoU matching of harness.vision.matching. The report says how many reference boxes
were found again, what was missed or added, how well the matched boxes overlap, how far scores moved and
how many classes flipped; `worst` ranks images by how much they differ, for pictures and messages;
`missing_causes` says why reference boxes are missing (a cap, empty answers, class-agnostic NMS, misses)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.vision.boxes import iou_matrix
from harness.vision.matching import match_detections


@dataclass(frozen=True)
class ImageComparison:
    image_id: int
    reference: int  # boxes
    candidate: int
    matched: int
    missed: int
    extra: int
    class_flips: int
    mean_iou: float  # of matched pairs (1.0 when there is nothing to match)
    max_score_delta: float

    @property
    def badness(self) -> float:
        """Ordering key for the worst images: unmatched boxes count most, then overlap and score."""
        return self.missed + self.extra + self.class_flips + (1.0 - self.mean_iou) * max(self.matched, 1) + self.max_score_delta


@dataclass
class BoxReport:
    images: list[ImageComparison] = field(default_factory=list)
    ious: list[float] = field(default_factory=list)
    score_deltas: list[float] = field(default_factory=list)
    compared: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # ref, cand, missed

    def add(self, image_id: int, reference: np.ndarray, candidate: np.ndarray, iou_threshold: float) -> ImageComparison:
        ref, cand = valid_rows(reference), valid_rows(candidate)
        result = match_detections(ref, cand, iou_threshold)
        deltas = np.abs(ref[result.pairs[:, 0], 4] - cand[result.pairs[:, 1], 4]) if len(result.pairs) else np.zeros(0)
        self.ious.extend(result.ious.tolist())
        self.score_deltas.extend(deltas.tolist())
        self.compared.append((ref, cand, result.missed))
        comparison = ImageComparison(
            image_id=image_id, reference=len(ref), candidate=len(cand), matched=len(result.pairs),
            missed=len(result.missed), extra=len(result.extra), class_flips=len(result.class_flips),
            mean_iou=float(result.ious.mean()) if len(result.ious) else 1.0,
            max_score_delta=float(deltas.max()) if len(deltas) else 0.0,
        )
        self.images.append(comparison)
        return comparison

    def summary(self) -> dict:
        reference = sum(i.reference for i in self.images)
        matched = sum(i.matched for i in self.images)
        ious = np.asarray(self.ious) if self.ious else np.ones(1)
        deltas = np.asarray(self.score_deltas) if self.score_deltas else np.zeros(1)
        return {
            "images": len(self.images), "reference_boxes": reference, "candidate_boxes": sum(i.candidate for i in self.images),
            "matched": matched / reference if reference else 1.0,
            "missed": sum(i.missed for i in self.images), "extra": sum(i.extra for i in self.images),
            "extra_share": sum(i.extra for i in self.images) / max(reference, 1),
            "class_flips": sum(i.class_flips for i in self.images),
            "class_flip_share": sum(i.class_flips for i in self.images) / max(matched, 1),
            "iou_mean": float(ious.mean()), "iou_p5": float(np.percentile(ious, 5)), "iou_min": float(ious.min()),
            "score_delta_mean": float(deltas.mean()), "score_delta_p99": float(np.percentile(deltas, 99)),
            "score_delta_max": float(deltas.max()),
        }

    def worst(self, n: int) -> list[ImageComparison]:
        ranked = sorted(self.images, key=lambda i: i.badness, reverse=True)
        return [i for i in ranked[:n] if i.badness > 0]

    def failures(self, thresholds: dict) -> list[str]:
        s = self.summary()
        if s["reference_boxes"] == 0:
            return [f"the reference detected no boxes on {s['images']} images: nothing to compare (untrained model or conf too high?)"]
        out = []
        if s["matched"] < thresholds["min_matched"]:
            out.append(f"matched {s['matched']:.1%} of {s['reference_boxes']} reference boxes (need >= {thresholds['min_matched']:.1%});"
                       f" {s['missed']} missed")
        if s["extra_share"] > thresholds["max_extra"]:
            out.append(f"{s['extra']} extra boxes = {s['extra_share']:.1%} of the reference's (allowed {thresholds['max_extra']:.1%})")
        if s["iou_mean"] < thresholds["min_mean_iou"]:
            out.append(f"mean IoU of matched boxes {s['iou_mean']:.4f} (need >= {thresholds['min_mean_iou']}), p5 {s['iou_p5']:.3f}")
        p99_limit = thresholds.get("max_score_delta_p99")
        if p99_limit is not None and s["score_delta_p99"] > p99_limit:
            out.append(f"p99 score movement {s['score_delta_p99']:.4f} (allowed {p99_limit}), max {s['score_delta_max']:.4f}")
        if s["score_delta_max"] > thresholds["max_score_delta"]:
            out.append(f"score moved by up to {s['score_delta_max']:.4f} (allowed {thresholds['max_score_delta']}), p99 {s['score_delta_p99']:.4f}")
        if s["class_flip_share"] > thresholds["max_class_flips"]:
            out.append(f"{s['class_flips']} class flips = {s['class_flip_share']:.1%} of matched boxes (allowed {thresholds['max_class_flips']:.1%})")
        return out


    def missing_causes(self, nms_iou: float | None) -> str | None:
        """Why reference boxes are missing, each missed box counted under the first cause that explains it:
        an empty answer where the reference detects (intermittent when other answers are not empty); a cap
        (no answer has more than K rows, and on images where the reference has more the candidate answers
        exactly K and what is missing are the reference's lowest scores); class-agnostic suppression (the
        missed box overlaps a kept candidate box of another class above the NMS IoU threshold `nms_iou`;
        None when the harness ran the candidate's NMS, class-aware); else a plain miss. None when nothing
        is missing."""
        missed = sum(len(m) for _, _, m in self.compared)
        if not missed:
            return None
        answered = [len(c) for r, c, _ in self.compared if len(r)]
        cap = max((len(c) for _, c, _ in self.compared), default=0)
        capped = [(r, c, m) for r, c, m in self.compared
                  if len(c) == cap and len(r) > cap and len(m) and r[m, 4].max() <= _kept_min_score(r, m)]
        counts = {"empty": 0, "cap": 0, "agnostic": 0, "plain": 0}
        for ref, cand, miss in self.compared:
            if not len(miss):
                continue
            if not len(cand):
                counts["empty"] += len(miss)
            elif cap and len(capped) >= 2 and any(c is cand for _, c, _ in capped):
                counts["cap"] += len(miss)
            elif nms_iou is None:
                counts["plain"] += len(miss)
            else:
                overlap = iou_matrix(ref[miss, :4], cand[:, :4]) > nms_iou
                other = ref[miss, 5][:, None] != cand[None, :, 5]
                suppressed = int((overlap & other).any(axis=1).sum())
                counts["agnostic"] += suppressed
                counts["plain"] += len(miss) - suppressed
        empty = sum(1 for n in answered if n == 0)
        parts = []
        if counts["empty"]:
            how = "intermittent empty answers" if empty < len(answered) else "every answer empty"
            parts.append(f"{how}: {empty} of {len(answered)} requests came back with no detection where the reference"
                         f" detects ({counts['empty']} boxes)")
        if counts["cap"]:
            parts.append(f"a cap: no answer has more than {cap} rows although the reference has up to"
                         f" {max(len(r) for r, _, _ in capped)}; on {len(capped)} images the answer stops at {cap} and"
                         f" the reference's lowest-scoring boxes are the ones missing ({counts['cap']} boxes)")
        if counts["agnostic"]:
            parts.append(f"class-agnostic suppression: {counts['agnostic']} missed boxes each overlap a kept box of another"
                         f" class at IoU > {nms_iou:g} (NMS across classes removes them; class-aware NMS keeps them)")
        if counts["plain"]:
            parts.append(f"{counts['plain']} plain misses (no empty answer, cap or overlapping box of another class explains them)")
        return f"{missed} reference boxes missing: " + "; ".join(parts)


def _kept_min_score(reference: np.ndarray, missed: np.ndarray) -> float:
    """The lowest score among the reference boxes that were found again (inf when none was)."""
    kept = np.ones(len(reference), dtype=bool)
    kept[missed] = False
    return float(reference[kept, 4].min()) if kept.any() else np.inf


def differs(reference: np.ndarray, candidate: np.ndarray, thresholds: dict) -> list[str]:
    """The box gates of a precision (`thresholds`, a profile's [boxes.PRECISION]) on one image's answer against
    the answer it should equal: what fails, [] when it holds (a batched answer against the image's own
    sequential one, a served answer against the reference's on the same pixels)."""
    if not len(reference):
        return [f"{len(candidate)} boxes where the answer it is held to has none"] if len(candidate) else []
    report = BoxReport()
    report.add(0, reference, candidate, thresholds["match_iou"])
    return report.failures(thresholds)


def valid_rows(detections: np.ndarray) -> np.ndarray:
    """Rows x1, y1, x2, y2, score, class without the -1 padding of a fixed-size detection tensor and
    without zero-area boxes (a box wholly in the letterbox padding is clipped to a line): IoU cannot
    match those, not even to an identical twin, and they mark nothing in the image."""
    rows = np.asarray(detections, dtype=np.float64).reshape(-1, 6)
    rows = rows[rows[:, 5] >= 0]
    return rows[(rows[:, 2] > rows[:, 0]) & (rows[:, 3] > rows[:, 1])]


def describe(worst: list[ImageComparison], names: dict[int, str]) -> str:
    return "; ".join(f"{names.get(w.image_id, w.image_id)}: {w.matched}/{w.reference} matched, {w.missed} missed,"
                     f" {w.extra} extra, IoU {w.mean_iou:.3f}, flips {w.class_flips}" for w in worst)
