"""One known object at known coordinates: what a black-box geometry check sends a detector.

The object is drawn exactly the way the dataset draws its objects (`shape_polygons` outline, filled
`polygon_mask`, a `surface` fill chosen to stand out from what it covers), on either a plain backdrop
or the dataset's own textured `background`, then captured like the day slice. The returned box is the
tight box of the object's drawn pixels, as the dataset labels it, so a detector trained on the dataset
is asked for exactly what it was taught to return."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image

from harness.dataset.lighting import expose
from harness.dataset.scene import _fill_color
from harness.dataset.shapes import CLASSES, polygon_mask, shape_polygons
from harness.dataset.textures import background, surface

BACKGROUNDS = ("plain", "dataset")
ENCODINGS = ("png", "jpeg")
JPEG_QUALITY = 90


@dataclass(frozen=True)
class ObjectScene:
    """What to draw. (cx, cy) and `size` (the full diameter before aspect stretch) in source pixels."""

    height: int
    width: int
    class_id: int
    cx: float
    cy: float
    size: float
    aspect: float = 1.0
    angle: float = 0.0
    background: str = "plain"
    seed: int = 0

    def __post_init__(self):
        if not 0 <= self.class_id < len(CLASSES):
            raise ValueError(f"class_id {self.class_id}: the dataset has {len(CLASSES)} classes {CLASSES}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"background {self.background!r}: choose from {BACKGROUNDS}")

    @property
    def class_name(self) -> str:
        return CLASSES[self.class_id]


def render_object(scene: ObjectScene) -> tuple[np.ndarray, np.ndarray]:
    """(HWC uint8 RGB image, box [x1, y1, x2, y2] float64 of the object's drawn pixels). ValueError when
    the object would not be drawn at all (outside the frame or under 2 px)."""
    rng = np.random.default_rng([scene.seed, scene.class_id])
    h, w = scene.height, scene.width
    if scene.background == "plain":
        img = np.broadcast_to(rng.random(3, dtype=np.float32), (h, w, 3)).copy()
    else:
        img = background(rng, h, w)
    outer, hole = shape_polygons(scene.class_name, scene.cx, scene.cy, scene.size / 2, scene.aspect, scene.angle, rng)
    mask = polygon_mask((h, w), outer, hole)
    if mask.sum() < 4:
        raise ValueError(f"{scene}: the object covers {int(mask.sum())} pixels of the frame")
    img[mask] = surface(rng, h, w, base=_fill_color(rng, img[mask]))[mask]
    ys, xs = np.nonzero(mask)
    box = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], dtype=np.float64)
    return expose(img, "day", rng), box


def encode(image: np.ndarray, encoding: str) -> bytes:
    """PNG (lossless) or JPEG (quality 90, 4:2:0 like the dataset's files)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding {encoding!r}: choose from {ENCODINGS}")
    buffer = io.BytesIO()
    if encoding == "png":
        Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    else:
        Image.fromarray(image).save(buffer, format="JPEG", quality=JPEG_QUALITY, subsampling=2)
    return buffer.getvalue()
