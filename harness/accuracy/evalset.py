"""The evaluation set as the accuracy suite uses it: a COCO annotations.json with a per-image "slice",
cut to a budget of images per slice (spread evenly, as harness.engines.calibration selects), so a full
run stays inside its time limit and says how many images each number rests on."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from PIL import Image

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

    def lossless(self) -> bytes:
        """The pixels `rgb()` gives, as a PNG: every decoder returns exactly these, so a served model fed
        this is judged on the reference's pixels, whatever JPEG decoder it runs (nvJPEG's 4:2:0 chroma
        upsampling differs from libjpeg-turbo's by up to 120 grey levels at coloured edges). Stored, not
        deflated (compress_level 0): a carrier of pixels over loopback, 10 ms an image less to make and read."""
        out = io.BytesIO()
        Image.fromarray(self.rgb()).save(out, format="PNG", compress_level=0)
        return out.getvalue()


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
        if annotations.exists():
            coco = json.loads(annotations.read_text())
        elif (self.directory / "labels").is_dir():
            coco = coco_from_yolo(self.directory, self.slice_key)
        else:
            raise FileNotFoundError(f"{self.directory}: neither COCO annotations.json (per-image {self.slice_key!r} optional) "
                                    "nor YOLO images/ + labels/ found")
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


def coco_from_yolo(directory: Path, slice_key: str = "slice") -> dict:
    """A YOLO-format set (images/, labels/NAME.txt rows "class cx cy w h" normalised, optional classes.txt
    with one name per line, optional SLICE.txt lists of image paths) as the COCO dict EvalSet reads."""
    from PIL import Image

    directory = Path(directory)
    images_dir = directory / "images"
    files = sorted(p for p in images_dir.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".bmp"))
    if not files:
        raise FileNotFoundError(f"{images_dir}: no images")
    slices = {}
    for listing in sorted(directory.glob("*.txt")):
        if listing.name == "classes.txt":
            continue
        for line in listing.read_text().split():
            slices[Path(line).name] = listing.stem
    images, annotations, classes = [], [], set()
    for image_id, path in enumerate(files, start=1):
        with Image.open(path) as image:
            width, height = image.size
        entry = {"id": image_id, "file_name": path.name, "width": width, "height": height}
        if path.name in slices:
            entry[slice_key] = slices[path.name]
        images.append(entry)
        label = directory / "labels" / f"{path.stem}.txt"
        for row in (label.read_text().splitlines() if label.exists() else []):
            if not row.strip():
                continue
            cls, cx, cy, w, h = row.split()[:5]
            bw, bh = float(w) * width, float(h) * height
            box = [float(cx) * width - bw / 2, float(cy) * height - bh / 2, bw, bh]
            classes.add(int(cls))
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": int(cls),
                                "bbox": box, "area": bw * bh, "iscrowd": 0})
    names = _class_names(directory)
    count = max(max(classes, default=-1) + 1, len(names))
    categories = [{"id": i, "name": names[i] if i < len(names) else f"class{i}"} for i in range(count)]
    return {"info": {"source": f"YOLO labels in {directory}"}, "images": images, "annotations": annotations,
            "categories": categories}


def _class_names(directory: Path) -> list[str]:
    names = directory / "classes.txt"
    return [line.strip() for line in names.read_text().splitlines() if line.strip()] if names.exists() else []
