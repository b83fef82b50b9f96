"""Capture conditions: the day and night slices differ only here, so a night drop is a lighting effect.

Night = low exposure, lifted black level (low contrast), a colour cast, shot + read noise and the
occasional light source; day = normal exposure with mild sensor noise."""

from __future__ import annotations

import numpy as np

from harness.dataset.textures import smooth_noise

SLICES: tuple[str, ...] = ("day", "night")


def expose(rgb: np.ndarray, slice_name: str, rng: np.random.Generator) -> np.ndarray:
    """Apply one slice's capture to a linear-ish RGB image in [0, 1]; returns uint8 HxWx3."""
    h, w, _ = rgb.shape
    if slice_name == "day":
        gain = rng.uniform(0.85, 1.15)
        img = rgb * gain
        img = img + rng.normal(0.0, rng.uniform(0.0, 0.008), size=img.shape).astype(np.float32)
    elif slice_name == "night":
        gain = rng.uniform(0.12, 0.3)
        cast = np.array([rng.uniform(0.7, 0.95), rng.uniform(0.8, 1.0), 1.0], np.float32)
        img = rgb * gain * cast
        # street lamps: bright soft blobs that add glare
        for _ in range(int(rng.integers(0, 3))):
            cy, cx = rng.uniform(0, h), rng.uniform(0, w)
            r = rng.uniform(0.05, 0.25) * max(h, w)
            yy, xx = np.ogrid[0:h, 0:w]
            glow = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r)).astype(np.float32)
            img = img + glow[:, :, None] * rng.uniform(0.1, 0.35) * np.array([1.0, 0.85, 0.6], np.float32)
        # shot noise grows with signal, read noise does not
        shot = rng.normal(0.0, 1.0, size=img.shape).astype(np.float32) * np.sqrt(np.clip(img, 0, 1) * 0.0015)
        read = rng.normal(0.0, rng.uniform(0.005, 0.012), size=img.shape).astype(np.float32)
        # what a phone's denoiser leaves behind: blotchy low-frequency chroma noise
        blotch = smooth_noise(rng, h, w, int(rng.integers(16, 48)), channels=3) - 0.5
        img = img + shot + read + blotch * rng.uniform(0.02, 0.06)
        black = rng.uniform(0.03, 0.08)  # lifted blacks: low contrast
        img = black + img * (1.0 - black)
    else:
        raise ValueError(f"unknown slice {slice_name!r}; known: {SLICES}")
    img = np.clip(img, 0.0, 1.0)
    return (img * 255.0 + 0.5).astype(np.uint8)
