"""Judging a served answer to a catalogue entry (harness.vision.catalogue) by its detections.

The objects are what the reference pipeline finds on the entry's displayed pixels at OBJECT_SCORE or more
(a confident, stable set: the same pixels give the same rows on any correct deployment, up to the runtime's
rounding). The answer must return each at its displayed position: same class, IoU >= MATCH_IOU, for at least
MIN_FOUND of them. When it does not, each of the entry's mistakes is tried: the reference on the pixels that
mistake produces; those the answer agrees with name the cause (an empty answer may
agree with several).

A `gated` entry (partial alpha) is held to more than its objects: the answer must equal the reference's on
the decoded pixels (alpha dropped) within the box gates of the model's precision (`Gates`: matched boxes,
extra boxes, mean IoU, score movement). When it does not, the failure says what the model did with alpha:
the reference is run on each treatment's pixels (composited over black or white, un-premultiplied) and the
answer's distance to each, alpha dropped included, is listed nearest first -- measured, not guessed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from harness.accuracy.boxes import BoxReport, differs
from harness.vision.catalogue import ALPHA_DROPPED, Entry
from harness.vision.matching import match_detections

OBJECT_SCORE = 0.5  # reference rows below it are borderline: a different runtime may or may not keep them
MATCH_IOU = 0.5
MIN_FOUND = 0.6  # of the objects: room for a runtime's rounding on a borderline box, none for a wrong decode

Reference = Callable[[np.ndarray], np.ndarray]  # HWC RGB uint8 -> detection rows [k, 6]


@dataclass(frozen=True)
class Gates:
    """The box gates a gated entry's answer is held to: the model's precision and its profile's [boxes.PRECISION]."""

    precision: str
    thresholds: dict


def objects(reference: Reference, pixels: np.ndarray) -> np.ndarray:
    rows = np.asarray(reference(pixels), dtype=np.float64).reshape(-1, 6)
    return rows[rows[:, 4] >= OBJECT_SCORE]


def found(truth: np.ndarray, rows: np.ndarray) -> int:
    """How many of `truth`'s objects `rows` returns at their place with their class."""
    match = match_detections(truth, np.asarray(rows, dtype=np.float64).reshape(-1, 6), MATCH_IOU)
    return len(match.pairs) - len(match.class_flips)


def enough(truth: np.ndarray, rows: np.ndarray) -> bool:
    return found(truth, rows) >= math.ceil(MIN_FOUND * len(truth))


def agrees(truth: np.ndarray, rows: np.ndarray) -> bool:
    """`rows` look like the reference's answer `truth` on some pixels: its objects found, nothing confident besides."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 6)
    confident = rows[rows[:, 4] >= OBJECT_SCORE]
    return enough(truth, rows) and found(confident, truth) >= math.ceil(MIN_FOUND * len(confident))


def judge(entry: Entry, rows: np.ndarray, reference: Reference, model: str, gates: Gates | None = None) -> str | None:
    """None when the answer finds the entry's objects (a gated entry: equals the reference's answer within
    `gates`); else the failure message, naming the mistake it matches."""
    truth = objects(reference, entry.displayed())
    if not len(truth):
        raise ValueError(f"catalogue entry {entry.name}: the reference finds no object on it; it cannot judge")
    if entry.gated:
        if gates is None:
            raise ValueError(f"catalogue entry {entry.name} is judged by the box gates of the model's precision: pass gates")
        return _judge_gated(entry, np.asarray(rows, dtype=np.float64).reshape(-1, 6), reference, model, gates)
    if enough(truth, rows):
        return None
    message = (f"{model}, client input {entry.name} ({entry.what}): {found(truth, rows)} of {len(truth)} objects "
               f"found at the displayed position (class and IoU >= {MATCH_IOU}; the reference on the decoded, "
               f"EXIF-transposed RGB pixels finds {_classes(truth)}; the deployment returned {len(rows)} boxes "
               f"{_classes(rows)})")
    causes = [cause for cause, pixels in entry.mistakes.items() if agrees(objects(reference, pixels()), rows)]
    return f"{message}; " + (" -- or ".join(causes) or "the boxes match none of the known decoding mistakes")


def _classes(rows: np.ndarray) -> str:
    rows = np.asarray(rows).reshape(-1, 6)
    return "[" + ", ".join(f"class {int(r[5])} at {np.round(r[:4]).astype(int).tolist()}" for r in rows[:4]) + \
        (", ..." if len(rows) > 4 else "") + "]"


def _judge_gated(entry: Entry, rows: np.ndarray, reference: Reference, model: str, gates: Gates) -> str | None:
    expected = np.asarray(reference(entry.displayed()), dtype=np.float64).reshape(-1, 6)
    failures = differs(expected, rows, gates.thresholds)
    if not failures:
        return None
    candidates = {f"{ALPHA_DROPPED}, the contract": expected,
                  **{treatment: reference(pixels()) for treatment, pixels in entry.mistakes.items()}}
    distances = sorted((_distance(np.asarray(truth, dtype=np.float64).reshape(-1, 6), rows, gates), treatment)
                       for treatment, truth in candidates.items())
    return (f"{model}, client input {entry.name} ({entry.what}): the answer is not the reference pipeline's on the "
            f"decoded pixels ({ALPHA_DROPPED}) within the {gates.precision} box gates: {'; '.join(failures)} "
            f"(the reference returns {len(expected)} boxes {_classes(expected)}; the deployment {len(rows)} "
            f"{_classes(rows)}); what the model did with alpha -- its answer against the reference's on each "
            f"treatment, nearest first: " + "; ".join(f"{treatment} [{words}]" for (_, words), treatment in distances))


def _distance(expected: np.ndarray, rows: np.ndarray, gates: Gates) -> tuple[float, str]:
    """How far an answer is from the reference's on one treatment's pixels (BoxReport's badness: unmatched
    boxes, then overlap and score), its boxes matched at the gates' match_iou as the gates match them, with the
    words that say it."""
    comparison = BoxReport().add(0, expected, rows, gates.thresholds["match_iou"])
    return comparison.badness, (f"{comparison.matched} of {comparison.reference} boxes matched, {comparison.extra} "
                                f"extra, mean IoU {comparison.mean_iou:.4f}, score moved by up to "
                                f"{comparison.max_score_delta:.4f}")
