"""Judging a served answer to a catalogue entry (harness.vision.catalogue) by its detections.

The objects are what the reference pipeline finds on the entry's displayed pixels at OBJECT_SCORE or more
(a confident, stable set: the same pixels give the same rows on any correct deployment, up to the runtime's
rounding). The answer must return each at its displayed position: same class, IoU >= MATCH_IOU, for at least
MIN_FOUND of them. When it does not, each of the entry's mistakes is tried: the reference on the pixels that
mistake produces; those the answer agrees with name the cause (an empty answer may
agree with several)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from harness.vision.catalogue import Entry
from harness.vision.matching import match_detections

OBJECT_SCORE = 0.5  # reference rows below it are borderline: a different runtime may or may not keep them
MATCH_IOU = 0.5
MIN_FOUND = 0.6  # of the objects: room for a runtime's rounding on a borderline box, none for a wrong decode

Reference = Callable[[np.ndarray], np.ndarray]  # HWC RGB uint8 -> detection rows [k, 6]


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


def judge(entry: Entry, rows: np.ndarray, reference: Reference, model: str) -> str | None:
    """None when the answer finds the entry's objects; else the failure message, naming the mistake it matches."""
    truth = objects(reference, entry.displayed())
    if not len(truth):
        raise ValueError(f"catalogue entry {entry.name}: the reference finds no object on it; it cannot judge")
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
