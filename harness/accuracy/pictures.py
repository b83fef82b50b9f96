"""Side-by-side pictures of the worst images: reference boxes on the left, candidate boxes on the right,
missed reference boxes drawn dashed-red on the candidate side, so a reviewer sees the failure at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from harness.vision.matching import match_detections

PALETTE = [(0, 200, 0), (0, 120, 255), (255, 160, 0), (200, 0, 200), (0, 200, 200), (160, 160, 0)]


def _scale_rows(scale: float) -> np.ndarray:
    return np.array([scale] * 4 + [1.0, 1.0])


def _draw(image: Image.Image, rows: np.ndarray, color_of=None, width: int = 2) -> None:
    draw = ImageDraw.Draw(image)
    for k, (x1, y1, x2, y2, score, cls) in enumerate(rows):
        color = color_of(k) if color_of else PALETTE[int(cls) % len(PALETTE)]
        draw.rectangle([x1, y1, x2, y2], outline=color, width=width)
        draw.text((x1 + 2, max(y1 - 11, 0)), f"{int(cls)} {score:.2f}", fill=color)


def side_by_side(rgb: np.ndarray, reference: np.ndarray, candidate: np.ndarray, title: str, out_path: Path,
                 iou_threshold: float = 0.5) -> Path:
    ref = np.asarray(reference, dtype=np.float64).reshape(-1, 6)
    cand = np.asarray(candidate, dtype=np.float64).reshape(-1, 6)
    result = match_detections(ref, cand, iou_threshold)
    missed, extra = set(result.missed.tolist()), set(result.extra.tolist())
    h, w = rgb.shape[:2]
    scale = max(1.0, 320 / max(h, w))  # tiny images are enlarged so labels stay readable
    size = (int(w * scale), int(h * scale))
    left = Image.fromarray(rgb).resize(size)
    right = left.copy()
    _draw(left, ref * _scale_rows(scale), lambda k: (255, 0, 0) if k in missed else (0, 200, 0))
    _draw(right, cand * _scale_rows(scale), lambda k: (255, 0, 255) if k in extra else (0, 200, 0))
    canvas = Image.new("RGB", (size[0] * 2 + 10, size[1] + 24), (255, 255, 255))
    canvas.paste(left, (0, 24))
    canvas.paste(right, (size[0] + 10, 24))
    ImageDraw.Draw(canvas).text((4, 4), f"{title}   left: reference (red = missed)   right: candidate (magenta = extra)", fill=(0, 0, 0))
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(out_path)
    return out_path
