"""The synthetic shapes dataset: deterministic to the byte, labels consistent across formats, slices
that differ the way day and night do. (~20 s: the committed evaluation set is regenerated once.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.dataset import CLASSES, SLICES, generate_split, load_coco
from harness.paths import FIXTURES

EVAL = FIXTURES / "shapes_eval"
EVAL_ARGS = dict(seed=2026, n_day=50, n_night=50, sizes="modest")  # as fixtures/shapes_eval/README.md says
GENERATED = ("images", "labels", "annotations.json", "day.txt", "night.txt")


def digest(split: Path) -> dict[str, str]:
    """sha256 of every file the generator writes (not READMEs or ultralytics' labels.cache)."""
    files = [p for name in GENERATED for p in ([split / name] if (split / name).is_file() else sorted((split / name).iterdir()))]
    return {str(p.relative_to(split)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = digest(generate_split(tmp_path / "a", seed=11, n_day=3, n_night=3, sizes="modest"))
    b = digest(generate_split(tmp_path / "b", seed=11, n_day=3, n_night=3, sizes="modest", workers=2))
    c = digest(generate_split(tmp_path / "c", seed=12, n_day=3, n_night=3, sizes="modest"))
    assert a == b, "same seed gave different bytes (serial vs 2 workers)"
    assert a["annotations.json"] != c["annotations.json"]
    assert sum(a[k] == c[k] for k in a if k.startswith("images/")) == 0


def test_committed_eval_set_regenerates_byte_identical(tmp_path):
    fresh = digest(generate_split(tmp_path / "eval", workers=2, **EVAL_ARGS))
    committed = digest(EVAL)
    differ = sorted(k for k in fresh if committed.get(k) != fresh[k])
    assert fresh.keys() == committed.keys() and not differ, f"fixtures/shapes_eval differs from its generator: {differ[:5]}"


@pytest.fixture(scope="module")
def coco() -> dict:
    return load_coco(EVAL)


def test_coco_schema(coco):
    assert [c["id"] for c in coco["categories"]] == list(range(len(CLASSES)))
    assert [c["name"] for c in coco["categories"]] == list(CLASSES)
    assert {im["slice"] for im in coco["images"]} == set(SLICES)
    sizes = {im["id"]: (im["width"], im["height"]) for im in coco["images"]}
    for a in coco["annotations"]:
        x, y, w, h = a["bbox"]
        W, H = sizes[a["image_id"]]
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= W and y + h <= H, a
        assert a["area"] == w * h and a["iscrowd"] == 0
    assert {a["category_id"] for a in coco["annotations"]} == set(range(len(CLASSES)))


def test_yolo_labels_match_coco(coco):
    by_image: dict[int, list] = {}
    for a in coco["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    for im in coco["images"]:
        stem = Path(im["file_name"]).stem
        text = (EVAL / "labels" / f"{stem}.txt").read_text()
        rows = np.array([line.split() for line in text.splitlines()], dtype=float).reshape(-1, 5)
        anns = by_image.get(im["id"], [])
        assert len(rows) == len(anns), stem
        W, H = im["width"], im["height"]
        for (c, cx, cy, w, h), a in zip(rows, anns):
            x, y, bw, bh = a["bbox"]
            assert int(c) == a["category_id"]
            np.testing.assert_allclose([(cx - w / 2) * W, (cy - h / 2) * H, w * W, h * H], [x, y, bw, bh], atol=1e-3 * max(W, H))
        with Image.open(EVAL / "images" / im["file_name"]) as img:
            assert img.size == (W, H) and img.format == "JPEG"


def test_eval_set_spans_sizes_and_aspects(coco):
    dims = [(im["width"], im["height"]) for im in coco["images"]]
    assert min(max(d) for d in dims) <= 64, "no tiny image"
    assert max(max(d) for d in dims) >= 2000, "no very large image"
    assert any(h > w for w, h in dims) and any(w > h for w, h in dims), "needs portrait and landscape"


def test_night_is_darker_and_flatter(coco):
    """Night = low light and low contrast: per-image mean and spread of luminance both drop."""
    stats = {s: [] for s in SLICES}
    for im in coco["images"]:
        lum = np.asarray(Image.open(EVAL / "images" / im["file_name"]).convert("L"), dtype=np.float32)
        stats[im["slice"]].append((lum.mean(), lum.std()))
    day, night = np.median(stats["day"], axis=0), np.median(stats["night"], axis=0)
    assert night[0] < 0.5 * day[0], f"median luminance night {night[0]:.1f} vs day {day[0]:.1f}"
    assert night[1] < 0.6 * day[1], f"median contrast night {night[1]:.1f} vs day {day[1]:.1f}"
