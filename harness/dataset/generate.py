"""Write a split directory: images/NAME.jpg, labels/NAME.txt (YOLO), annotations.json (COCO), and
day.txt / night.txt image lists (what ultralytics `val` takes to score one slice).

Each image draws from its own Generator seeded by (seed, slice, index), so any image can be rebuilt
alone, images can be rendered in parallel, and the same seed gives the same bytes."""

from __future__ import annotations

import io
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from harness.dataset.lighting import SLICES
from harness.dataset.scene import Box, render
from harness.dataset.shapes import CLASSES

# (width, height) menus. "mixed" spans tiny to very large, portrait to panorama.
SIZES: dict[str, tuple[tuple[int, int], ...]] = {
    "mixed": ((64, 64), (96, 160), (160, 96), (320, 240), (240, 320), (416, 416), (480, 640), (640, 480),
              (640, 640), (720, 1280), (1280, 720), (800, 600), (1024, 768), (1280, 320), (1920, 1080),
              (2048, 1536)),
    "modest": ((64, 64), (96, 160), (160, 96), (320, 240), (240, 320), (416, 416), (480, 640), (640, 480),
               (640, 640), (720, 1280), (1280, 720), (800, 600), (1280, 320), (2048, 1152)),
    "square640": ((640, 640),),
    "square320": ((320, 320),),
}
# the very large sizes are drawn rarely: they dominate bytes and rendering time
_RARE = {(1920, 1080), (2048, 1536), (2048, 1152)}
JPEG_QUALITY = 80
SLICE_CODE = {name: k for k, name in enumerate(SLICES)}


def _pick_size(rng: np.random.Generator, sizes: str) -> tuple[int, int]:
    menu = SIZES[sizes]
    weights = np.array([0.1 if s in _RARE else 1.0 for s in menu])
    return menu[int(rng.choice(len(menu), p=weights / weights.sum()))]


def render_one(seed: int, slice_name: str, index: int, sizes: str) -> tuple[str, int, int, bytes, list[Box]]:
    """Render and encode one image; pure function of its arguments."""
    rng = np.random.default_rng([seed, SLICE_CODE[slice_name], index])
    w, h = _pick_size(rng, sizes)
    pixels, boxes = render(rng, w, h, slice_name)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=JPEG_QUALITY, subsampling=2, optimize=False)
    return f"{slice_name}_{index:05d}", w, h, buf.getvalue(), boxes


def _yolo_lines(boxes: list[Box], w: int, h: int) -> str:
    rows = []
    for b in boxes:
        cx, cy = (b.x0 + b.x1) / 2 / w, (b.y0 + b.y1) / 2 / h
        rows.append(f"{b.class_id} {cx:.6f} {cy:.6f} {(b.x1 - b.x0) / w:.6f} {(b.y1 - b.y0) / h:.6f}")
    return "\n".join(rows) + ("\n" if rows else "")


def generate_split(out_dir: str | Path, *, seed: int, n_day: int, n_night: int, sizes: str = "mixed",
                   workers: int = 1) -> Path:
    """Render n_day + n_night images into out_dir (created; existing files of the same names replaced)."""
    if sizes not in SIZES:
        raise ValueError(f"sizes={sizes!r}; choose one of {sorted(SIZES)}")
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(parents=True, exist_ok=True)
    jobs = [(seed, s, i, sizes) for s, n in (("day", n_day), ("night", n_night)) for i in range(n)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(render_one, *zip(*jobs), chunksize=8))
    else:
        results = [render_one(*job) for job in jobs]

    coco = {"info": {"description": "yolo-triton-suite synthetic shapes", "seed": seed, "sizes": sizes},
            "images": [], "annotations": [],
            "categories": [{"id": k, "name": n, "supercategory": "shape"} for k, n in enumerate(CLASSES)]}
    lists: dict[str, list[str]] = {s: [] for s in SLICES}
    for image_id, (name, w, h, jpeg, boxes) in enumerate(results, start=1):
        (out / "images" / f"{name}.jpg").write_bytes(jpeg)
        (out / "labels" / f"{name}.txt").write_text(_yolo_lines(boxes, w, h))
        slice_name = name.split("_")[0]
        lists[slice_name].append(f"./images/{name}.jpg")
        coco["images"].append({"id": image_id, "file_name": f"{name}.jpg", "width": w, "height": h, "slice": slice_name})
        for b in boxes:
            bw, bh = b.x1 - b.x0, b.y1 - b.y0
            coco["annotations"].append({"id": len(coco["annotations"]) + 1, "image_id": image_id,
                                        "category_id": b.class_id, "bbox": [b.x0, b.y0, bw, bh],
                                        "area": bw * bh, "iscrowd": 0})
    (out / "annotations.json").write_text(json.dumps(coco, indent=1))
    for s, rows in lists.items():
        (out / f"{s}.txt").write_text("".join(r + "\n" for r in rows))
    return out


def load_coco(path: str | Path) -> dict:
    """The COCO dict of a split (pass the split directory or its annotations.json)."""
    path = Path(path)
    if path.is_dir():
        path = path / "annotations.json"
    return json.loads(path.read_text())
