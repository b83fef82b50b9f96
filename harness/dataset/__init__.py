"""Synthetic shapes detection dataset: deterministic (same seed, same bytes), with day and night slices.

No pretrained weights or public data sets can be fetched here, so the reference model is trained on
this generator's output and scored on its committed evaluation set (fixtures/shapes_eval)."""

from harness.dataset.generate import SIZES, generate_split, load_coco
from harness.dataset.lighting import SLICES
from harness.dataset.shapes import CLASSES

__all__ = ["CLASSES", "SIZES", "SLICES", "generate_split", "load_coco"]
