"""The object classes: each one a filled mask drawn from a centre, size, aspect and rotation.

Masks (not outlines) so that occlusion and the visible box are computed from pixels, the way a
human annotator would draw the box around what can be seen."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

CLASSES: tuple[str, ...] = ("circle", "triangle", "square", "star", "cross", "ring")


def _rotate(points: np.ndarray, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return points @ np.array([[c, s], [-s, c]])


def _ellipse(n: int = 96) -> np.ndarray:
    t = np.linspace(0.0, 2.0 * math.pi, n, endpoint=False)
    return np.stack([np.cos(t), np.sin(t)], axis=1)


def _outline(name: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """Unit outline (radius ~1) of a class, and an optional hole; shape parameters vary per instance."""
    if name == "circle":
        return _ellipse(), None
    if name == "ring":
        return _ellipse(), _ellipse() * rng.uniform(0.45, 0.7)
    if name == "triangle":
        t = np.array([90.0, 210.0, 330.0]) + rng.uniform(-12.0, 12.0, size=3)
        t = np.radians(t)
        return np.stack([np.cos(t), -np.sin(t)], axis=1), None
    if name == "square":
        return np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]), None
    if name == "star":
        inner = rng.uniform(0.38, 0.5)
        t = np.radians(-90.0 + 36.0 * np.arange(10))
        r = np.where(np.arange(10) % 2 == 0, 1.0, inner)
        return np.stack([r * np.cos(t), r * np.sin(t)], axis=1), None
    if name == "cross":
        a = rng.uniform(0.28, 0.4)  # half arm width
        return np.array(
            [[-a, -1], [a, -1], [a, -a], [1, -a], [1, a], [a, a], [a, 1], [-a, 1], [-a, a], [-1, a], [-1, -a], [-a, -a]],
            dtype=np.float64,
        ), None
    raise ValueError(f"unknown class {name!r}; known: {CLASSES}")


def shape_polygons(name: str, cx: float, cy: float, size: float, aspect: float, angle: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """Image-space polygon (and hole) for one instance: half-size `size`, x/y stretch `aspect`."""
    outer, hole = _outline(name, rng)
    stretch = np.array([size * math.sqrt(aspect), size / math.sqrt(aspect)])
    centre = np.array([cx, cy])
    place = lambda p: _rotate(p * stretch, angle) + centre  # noqa: E731
    return place(outer), (place(hole) if hole is not None else None)


def polygon_mask(shape: tuple[int, int], outer: np.ndarray, hole: np.ndarray | None = None) -> np.ndarray:
    """Boolean HxW mask of a filled polygon minus its hole."""
    h, w = shape
    img = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(img)
    draw.polygon([tuple(p) for p in outer.round(2).tolist()], fill=255)
    if hole is not None:
        draw.polygon([tuple(p) for p in hole.round(2).tolist()], fill=0)
    return np.asarray(img) > 127
