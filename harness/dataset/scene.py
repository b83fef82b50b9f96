"""One image: backdrop, clutter, class objects placed with occlusion, then the slice's capture.

Boxes are the tight box of each object's *visible* pixels; an object left less than half visible (by
other objects or the frame edge) is removed before drawing, so every drawn object has a label and every
label a recognisable object."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from harness.dataset.lighting import expose
from harness.dataset.shapes import CLASSES, polygon_mask, shape_polygons
from harness.dataset.textures import background, random_color, surface

MIN_VISIBLE_FRACTION = 0.5
MIN_VISIBLE_PIXELS = 40


@dataclass
class Placed:
    class_id: int
    x0: int
    y0: int
    mask: np.ndarray  # crop mask, top-left at (x0, y0)
    area: float  # whole-object area in pixels (inside and outside the frame)


@dataclass(frozen=True)
class Box:
    class_id: int
    x0: int
    y0: int
    x1: int
    y1: int


def _poly_area(p: np.ndarray) -> float:
    x, y = p[:, 0], p[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))


def _crop_mask(h: int, w: int, outer: np.ndarray, hole: np.ndarray | None) -> tuple[int, int, np.ndarray] | None:
    x0, y0 = np.floor(outer.min(axis=0)).astype(int)
    x1, y1 = np.ceil(outer.max(axis=0)).astype(int) + 1
    x0, y0, x1, y1 = max(int(x0), 0), max(int(y0), 0), min(int(x1), w), min(int(y1), h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    shift = np.array([x0, y0])
    mask = polygon_mask((y1 - y0, x1 - x0), outer - shift, None if hole is None else hole - shift)
    return x0, y0, mask


def _plan(rng: np.random.Generator, h: int, w: int) -> list[Placed]:
    short, long_ = min(h, w), max(h, w)
    s_max = 0.6 * short
    s_min = min(max(12.0, 0.045 * long_), 0.5 * s_max)
    n_max = int(np.clip(h * w / (110.0 * 110.0), 1, 9))
    planned: list[Placed] = []
    for _ in range(int(rng.integers(1, n_max + 1))):
        class_id = int(rng.integers(0, len(CLASSES)))
        d = math.exp(rng.uniform(math.log(s_min), math.log(s_max)))
        aspect = math.exp(rng.uniform(math.log(0.7), math.log(1.4)))
        angle = rng.uniform(0, 2 * math.pi)
        cx = rng.uniform(-0.1 * d, w + 0.1 * d)
        cy = rng.uniform(-0.1 * d, h + 0.1 * d)
        outer, hole = shape_polygons(CLASSES[class_id], cx, cy, d / 2, aspect, angle, rng)
        crop = _crop_mask(h, w, outer, hole)
        if crop is None:
            continue
        area = _poly_area(outer) - (_poly_area(hole) if hole is not None else 0.0)
        planned.append(Placed(class_id, crop[0], crop[1], crop[2], area))
    return planned


def _owners(h: int, w: int, objs: list[Placed]) -> np.ndarray:
    owner = np.full((h, w), -1, np.int16)
    for k, o in enumerate(objs):
        mh, mw = o.mask.shape
        region = owner[o.y0:o.y0 + mh, o.x0:o.x0 + mw]
        region[o.mask] = k
    return owner


def _resolve_occlusion(h: int, w: int, objs: list[Placed]) -> tuple[list[Placed], np.ndarray]:
    """Drop the least visible object until all are at least half visible and big enough to see."""
    while True:
        owner = _owners(h, w, objs)
        counts = np.bincount(owner[owner >= 0].ravel(), minlength=len(objs)) if objs else np.zeros(0)
        frac = [counts[k] / max(o.area, 1.0) for k, o in enumerate(objs)]
        bad = [k for k in range(len(objs)) if frac[k] < MIN_VISIBLE_FRACTION or counts[k] < MIN_VISIBLE_PIXELS]
        if not bad:
            return objs, owner
        worst = min(bad, key=lambda k: frac[k])
        objs = objs[:worst] + objs[worst + 1:]


def _clutter(rng: np.random.Generator, img: np.ndarray) -> None:
    """Distractors that are no class: jagged blobs, thick strokes, dots (drawn under the objects)."""
    h, w, _ = img.shape
    layer = Image.new("L", (w, h), 0)
    for _ in range(int(rng.integers(0, 7))):
        layer.paste(0, (0, 0, w, h))
        draw = ImageDraw.Draw(layer)
        kind = rng.integers(0, 3)
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(0.03, 0.2) * min(h, w) + 2
        if kind == 0:
            n = int(rng.integers(5, 12))
            t = np.sort(rng.uniform(0, 2 * np.pi, n))
            rr = r * rng.uniform(0.3, 1.0, n)
            pts = np.stack([cx + rr * np.cos(t), cy + rr * np.sin(t)], 1)
            draw.polygon([tuple(p) for p in pts.round(2).tolist()], fill=255)
        elif kind == 1:
            pts = [(cx, cy)] + [(cx + rng.uniform(-3, 3) * r, cy + rng.uniform(-3, 3) * r) for _ in range(int(rng.integers(1, 4)))]
            draw.line(pts, fill=255, width=int(max(1, rng.uniform(0.05, 0.25) * r)))
        else:
            for _ in range(int(rng.integers(3, 15))):
                x, y, q = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1, 0.03 * min(h, w) + 2)
                draw.ellipse((x - q, y - q, x + q, y + q), fill=255)
        m = np.asarray(layer) > 127
        if m.any():
            img[m] = random_color(rng) * rng.uniform(0.4, 1.0)


def _fill_color(rng: np.random.Generator, under: np.ndarray) -> np.ndarray:
    """An object colour that stands out from what it covers (best of a few random draws)."""
    mean = under.reshape(-1, 3).mean(axis=0)
    cands = rng.random((6, 3), dtype=np.float32)
    return cands[int(np.argmax(np.linalg.norm(cands - mean, axis=1)))]


def render(rng: np.random.Generator, width: int, height: int, slice_name: str) -> tuple[np.ndarray, list[Box]]:
    """Render one image (uint8 HxWx3) and its visible-pixel boxes."""
    h, w = height, width
    img = background(rng, h, w)
    _clutter(rng, img)
    objs, owner = _resolve_occlusion(h, w, _plan(rng, h, w))
    boxes: list[Box] = []
    for k, o in enumerate(objs):
        mh, mw = o.mask.shape
        view = img[o.y0:o.y0 + mh, o.x0:o.x0 + mw]
        fill = surface(rng, mh, mw, base=_fill_color(rng, view[o.mask]))
        visible = owner[o.y0:o.y0 + mh, o.x0:o.x0 + mw] == k
        view[o.mask] = fill[o.mask]  # later objects overwrite: painter's order = the owner map
        ys, xs = np.nonzero(visible)
        boxes.append(Box(o.class_id, o.x0 + int(xs.min()), o.y0 + int(ys.min()), o.x0 + int(xs.max()) + 1, o.y0 + int(ys.max()) + 1))
    radius = float(rng.uniform(0.0, 0.9))
    if radius > 0.3:
        pil = Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).filter(ImageFilter.GaussianBlur(radius))
        img = np.asarray(pil, dtype=np.float32) / 255.0
    return expose(img, slice_name, rng), boxes
