"""Surfaces: backgrounds and object fills as float RGB arrays in [0, 1].

Varied so that a detector has to learn shape, not colour or a flat backdrop."""

from __future__ import annotations

import numpy as np
from PIL import Image


def smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int, channels: int = 1) -> np.ndarray:
    """Low-frequency value noise: a coarse random grid upsampled bicubically."""
    gh = max(2, cells)
    gw = max(2, int(round(cells * w / max(h, 1))))
    coarse = rng.random((gh, gw, channels), dtype=np.float32)
    out = np.empty((h, w, channels), dtype=np.float32)
    for c in range(channels):
        img = Image.fromarray(coarse[:, :, c], mode="F").resize((w, h), Image.BICUBIC)
        out[:, :, c] = np.asarray(img)
    return np.clip(out, 0.0, 1.0)


def random_color(rng: np.random.Generator) -> np.ndarray:
    return rng.random(3, dtype=np.float32)


def _coords(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    return yy, xx


def surface(rng: np.random.Generator, h: int, w: int, base: np.ndarray | None = None) -> np.ndarray:
    """One textured surface: flat, gradient, stripes, checker, cloudy noise or speckle."""
    a = random_color(rng) if base is None else base
    b = random_color(rng)
    kind = rng.integers(0, 6)
    if kind == 0:  # flat
        t = np.zeros((h, w, 1), np.float32)
    elif kind == 1:  # linear gradient
        yy, xx = _coords(h, w)
        ang = rng.uniform(0, np.pi)
        t = (np.cos(ang) * xx + np.sin(ang) * yy)
        t = ((t - t.min()) / max(float(np.ptp(t)), 1e-6))[:, :, None]
    elif kind == 2:  # stripes
        yy, xx = _coords(h, w)
        ang = rng.uniform(0, np.pi)
        period = rng.uniform(4, max(6.0, min(h, w) / 4))
        t = (0.5 + 0.5 * np.sin(2 * np.pi * (np.cos(ang) * xx + np.sin(ang) * yy) / period))[:, :, None]
        t = t * rng.uniform(0.3, 1.0)
    elif kind == 3:  # checker
        yy, xx = _coords(h, w)
        cell = rng.uniform(3, max(4.0, min(h, w) / 5))
        t = (((xx // cell) + (yy // cell)) % 2)[:, :, None] * rng.uniform(0.3, 1.0)
    elif kind == 4:  # clouds
        t = smooth_noise(rng, h, w, int(rng.integers(2, 9)))
    else:  # speckle
        t = smooth_noise(rng, h, w, max(2, min(h, w) // int(rng.integers(3, 9)))) * rng.uniform(0.3, 0.8)
    return (a * (1 - t) + b * t).astype(np.float32)


def background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A scene backdrop: a surface, sometimes split into two regions (horizon, wall/floor)."""
    bg = surface(rng, h, w)
    if rng.random() < 0.4:
        other = surface(rng, h, w)
        split = int(rng.uniform(0.3, 0.7) * h)
        bg[split:] = other[split:]
    shade = smooth_noise(rng, h, w, int(rng.integers(2, 5)))
    return np.clip(bg * (0.75 + 0.5 * shade), 0.0, 1.0)
