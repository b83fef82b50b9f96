"""INT8 calibration sets: which images, from which slices, and a record of that choice.

The record (per-slice counts, brightness histogram) is written beside the INT8 artifact, because an INT8
model's accuracy on night scenes depends on whether night scenes were in its calibration set, and the
accuracy suite checks coverage from that record alone."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnxruntime.quantization import CalibrationDataReader
from PIL import Image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
UNLABELLED = "unlabelled"
HISTOGRAM_BINS = 16  # of per-image mean luma, 0..255


@dataclass(frozen=True)
class CalibrationSet:
    """A deterministic selection: `slices=None` takes every image; `per_slice` caps each slice
    (images spread evenly over the sorted list, not the first N, so one scene type does not dominate)."""

    directory: str
    slices: tuple[str, ...] | None = None
    per_slice: int = 64

    def select(self) -> list[tuple[Path, str]]:
        by_slice = _images_by_slice(Path(self.directory))
        wanted = sorted(by_slice) if self.slices is None else list(self.slices)
        missing = [s for s in wanted if s not in by_slice]
        if missing:
            raise ValueError(f"{self.directory}: no images in slice(s) {missing}; slices present: {sorted(by_slice)}")
        chosen = []
        for name in wanted:
            paths = sorted(by_slice[name])
            if len(paths) > self.per_slice:
                picks = np.linspace(0, len(paths) - 1, self.per_slice).round().astype(int)
                paths = [paths[i] for i in picks]
            chosen.extend((path, name) for path in paths)
        return chosen

    def params(self) -> dict:
        return {"directory": str(self.directory), "slices": list(self.slices) if self.slices else None, "per_slice": self.per_slice}


def _images_by_slice(directory: Path) -> dict[str, list[Path]]:
    """COCO annotations.json with a per-image "slice" when present, else every image file, unlabelled."""
    annotations = directory / "annotations.json"
    found: dict[str, list[Path]] = {}
    if annotations.exists():
        coco = json.loads(annotations.read_text())
        for image in coco["images"]:
            candidates = [directory / image["file_name"], directory / "images" / image["file_name"]]
            path = next((p for p in candidates if p.exists()), None)
            if path is None:
                raise FileNotFoundError(f"{annotations}: image {image['file_name']!r} not found under {directory}")
            found.setdefault(image.get("slice", UNLABELLED), []).append(path)
        return found
    paths = [p for p in sorted(directory.rglob("*")) if p.suffix.lower() in IMAGE_SUFFIXES]
    if not paths:
        raise FileNotFoundError(f"{directory}: no images ({', '.join(IMAGE_SUFFIXES)}) and no annotations.json")
    return {UNLABELLED: paths}


def load_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def mean_luma(rgb: np.ndarray) -> float:
    """BT.601 luma, the brightness measure that separates day from night scenes."""
    return float((rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114).mean())


def composition(selection: list[tuple[Path, str]]) -> dict:
    """What went into calibration: counts and a brightness histogram, overall and per slice, and a
    digest of the image bytes so the record identifies the exact set."""
    edges = np.linspace(0, 256, HISTOGRAM_BINS + 1)
    lumas: dict[str, list[float]] = {}
    digest = hashlib.sha256()
    for path, name in selection:
        digest.update(path.read_bytes())
        lumas.setdefault(name, []).append(mean_luma(load_rgb(path)))
    everything = [v for values in lumas.values() for v in values]

    def stats(values: list[float]) -> dict:
        return {
            "count": len(values),
            "mean_luma": round(float(np.mean(values)), 2),
            "min_luma": round(float(np.min(values)), 2),
            "max_luma": round(float(np.max(values)), 2),
            "luma_histogram": np.histogram(values, bins=edges)[0].tolist(),
        }

    return {
        "images": len(selection),
        "slices": {name: stats(values) for name, values in sorted(lumas.items())},
        "overall": stats(everything),
        "histogram_edges": edges.tolist(),
        "sha256": digest.hexdigest(),
        "files": [path.name for path, _ in selection],
    }


class ImageCalibrationReader(CalibrationDataReader):
    """onnxruntime.quantization.CalibrationDataReader over letterboxed images: the same preprocessing as
    serving, or the ranges describe inputs the model never sees. Batches match a static batch dim."""

    def __init__(self, selection: list[tuple[Path, str]], *, input_name: str, imgsz: int, batch: int = 1):
        from harness.vision.letterbox import letterbox  # noqa: PLC0415  (OpenCV only needed when calibrating)

        self._letterbox = letterbox
        self.paths = [path for path, _ in selection]
        self.input_name = input_name
        self.imgsz = imgsz
        self.batch = batch
        self._iter = self._batches()

    def _batches(self):
        for start in range(0, len(self.paths) - self.batch + 1, self.batch):
            tensors = [self._letterbox(load_rgb(p), self.imgsz)[0] for p in self.paths[start:start + self.batch]]
            yield {self.input_name: np.stack(tensors)}

    def get_next(self):
        return next(self._iter, None)

    def rewind(self):
        self._iter = self._batches()
