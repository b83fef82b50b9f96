"""Why a served model's boxes miss: the box-format and unit mix-ups no config can show. A layout says
how boxes are written (harness.repository.layouts: xyxy in pixels unless declared); a model that writes
x, y, w, h, centre-based boxes, or fractions of the image never scaled back breaks that promise silently.
The candidate's answers are decoded again under every other format and unit (harness.vision.detections,
the same decoder); one that makes them match the reference where the declared one did not is named,
with its cause and the declaration or fix, in the failing check's message."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.accuracy.boxes import BoxReport
from harness.repository.layouts import BOX_FORMATS, BOX_UNITS, OutputLayout

MIN_SHARE = 0.8  # of the reference's boxes an alternative must find again
MIN_GAIN = 0.25  # over the declared reading, in matched share or mean IoU

FORMAT_WORDS = {"xyxy": "x1, y1, x2, y2 (corners)", "xywh": "x, y, w, h (top-left corner, width, height)",
                "cxcywh": "cx, cy, w, h (centre, width, height)"}


def _score(reference: dict[int, np.ndarray], rows: dict[int, np.ndarray], conf: float, match_iou: float) -> tuple[float, float]:
    report = BoxReport()
    for image_id, ref in reference.items():
        cand = rows.get(image_id, np.zeros((0, 6)))
        report.add(image_id, ref, cand[cand[:, 4] > conf], match_iou)
    total = sum(i.reference for i in report.images)
    matched = sum(i.matched for i in report.images)
    return (matched / total if total else 1.0), (float(np.mean(report.ious)) if report.ious else 0.0)


def _reading(layout: OutputLayout) -> str:
    return f"{layout.box_format} " + ("in pixels" if layout.box_units == "pixels" else "normalised")


def cause(declared: OutputLayout, found: OutputLayout, assumed: tuple[str, ...] = ()) -> str:
    """`assumed`: which of box_format / box_units nothing declared (the defaults, xyxy in pixels, were read)."""
    def said(key: str) -> str:
        return f"is assumed (nothing declares {key})" if key in assumed else "is declared"

    parts = []
    if found.box_format != declared.box_format:
        parts.append(f"the model writes {FORMAT_WORDS[found.box_format]} where {FORMAT_WORDS[declared.box_format]} "
                     f"{said('box_format')}")
    if found.box_units != declared.box_units:
        parts.append("the boxes are normalised (fractions of the image) and never scaled back to pixels"
                     if found.box_units == "normalized" else
                     f"the boxes are in pixels where normalised coordinates {said('box_units').replace('is ', 'are ')}")
    return "; ".join(parts)


def hints(reference: dict[int, np.ndarray], answers: dict, decode, layout: OutputLayout, sizes: dict[int, tuple[int, int]],
          conf: float, match_iou: float, model: str, assumed: tuple[str, ...] = ()) -> list[str]:
    """Lines naming the mix-up that explains the mismatch, if one does. `reference`: image id -> rows at
    `conf`; `answers`: image id -> the served answer (harness.vision.served.Answer); `decode(answer, layout)`
    -> rows; `sizes`: image id -> source (h, w), for normalised readings; `assumed`: which of box_format /
    box_units nothing declared (the message then says the default was assumed)."""
    if not answers or layout is None:
        return []
    ids = [i for i in reference if i in answers]
    reference = {i: reference[i] for i in ids}
    filled = {i: answers[i] if answers[i].source is not None else replace(answers[i], source=sizes.get(i)) for i in ids}

    def read(output: OutputLayout) -> dict[int, np.ndarray]:
        return {i: decode(a, output) for i, a in filled.items()}

    base_share, base_iou = _score(reference, read(layout), conf, match_iou)
    best = None
    for box_format in BOX_FORMATS:
        for units in BOX_UNITS:
            if (box_format, units) == (layout.box_format, layout.box_units):
                continue
            other = replace(layout, box_format=box_format, box_units=units)
            try:
                share, iou = _score(reference, read(other), conf, match_iou)
            except (TypeError, ValueError):  # e.g. a normalised reading without the source size
                continue
            if share >= MIN_SHARE and (share >= base_share + MIN_GAIN or iou >= base_iou + MIN_GAIN):
                if best is None or (share, iou) > best[1:]:
                    best = (other, share, iou)
    if best is None:
        return []
    other, share, iou = best
    return [f"{model}: {cause(layout, other, assumed)}: read as {_reading(other)}, its boxes match the reference (matched "
            f"{share:.0%}, mean IoU {iou:.2f}; as declared, {_reading(layout)}: "
            f"{base_share:.0%}, IoU {base_iou:.2f}). Fix the model, or if that is its contract declare it in yts.toml: "
            f'[layout.{model}] box_format = "{other.box_format}", box_units = "{other.box_units}"']
