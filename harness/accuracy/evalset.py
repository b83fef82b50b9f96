"""The evaluation set as the accuracy suite uses it: a COCO annotations.json with a per-image "slice",
cut to a budget of images per slice (spread evenly, as harness.engines.calibration selects), so a full
run stays inside its time limit and says how many images each number rests on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from harness.engines.calibration import composition, load_rgb


@dataclass(frozen=True)
class EvalImage:
    id: int
    file_name: str
    slice: str
    path: Path

    def rgb(self) -> np.ndarray:
        return load_rgb(self.path)

    def encoded(self) -> bytes:
        return self.path.read_bytes()


@dataclass
class EvalSet:
    directory: Path
    images_per_slice: int | None = None
    slice_key: str = "slice"
    coco: dict = field(init=False)
    images: list[EvalImage] = field(init=False)

    def __post_init__(self):
        self.directory = Path(self.directory)
        annotations = self.directory / "annotations.json"
        if not annotations.exists():
            raise FileNotFoundError(f"{annotations} not found: the eval set needs COCO annotations with a per-image {self.slice_key!r}")
        coco = json.loads(annotations.read_text())
        by_slice: dict[str, list[dict]] = {}
        for image in coco["images"]:
            by_slice.setdefault(image.get(self.slice_key, "unlabelled"), []).append(image)
        chosen = []
        for name in sorted(by_slice):
            images = sorted(by_slice[name], key=lambda i: i["file_name"])
            if self.images_per_slice and len(images) > self.images_per_slice:
                picks = np.linspace(0, len(images) - 1, self.images_per_slice).round().astype(int)
                images = [images[i] for i in picks]
            chosen.extend(images)
        ids = {i["id"] for i in chosen}
        self.coco = {**coco, "images": chosen, "annotations": [a for a in coco["annotations"] if a["image_id"] in ids]}
        self.images = [EvalImage(i["id"], i["file_name"], i.get(self.slice_key, "unlabelled"), self._path(i["file_name"])) for i in chosen]

    def _path(self, file_name: str) -> Path:
        for candidate in (self.directory / "images" / file_name, self.directory / file_name):
            if candidate.exists():
                return candidate
        raise FileNotFoundError(f"{self.directory}: image {file_name!r} listed in annotations.json is missing")

    @property
    def names(self) -> dict[int, str]:
        return {i.id: i.file_name for i in self.images}

    @cached_property
    def composition(self) -> dict:
        """Per-slice counts and brightness histogram, the same record INT8 calibration writes."""
        return composition([(i.path, i.slice) for i in self.images])

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for image in self.images:
            counts[image.slice] = counts.get(image.slice, 0) + 1
        return f"{self.directory.name}: {len(self.images)} images ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), {len(self.coco['annotations'])} objects"
