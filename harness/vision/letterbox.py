"""Letterbox: the resize-and-pad every YOLO model is trained behind, and its inverse for boxes.

One implementation for the reference Triton models (their Python-backend model.py imports this file,
so it depends on numpy and OpenCV only, nothing else from the harness) and for the local reference
pipeline. It follows ultralytics' `LetterBox` and `scale_boxes` step by step, because a deployment's
accuracy only matches the training numbers when preprocessing matches training:

- scale r = min(th / h, tw / w) (never above 1 with scaleup=False);
- resized ("new_unpad") size = round(w * r), round(h * r) with Python's round, never below 1 px;
- the padding dw, dh is halved and split with round(d - 0.1) / round(d + 0.1), so an odd remainder
  puts the extra pixel on the bottom / right;
- boxes are restored with the per-axis gains new_w / w, new_h / h (ultralytics 8.4 `scale_boxes`),
  the exact scale of the rounded content, not r: with r a box at the far edge of an 8K frame lands up
  to 0.5 / r source pixels (6 px at 7680 -> 640) off;
- cv2.INTER_LINEAR, pad value 114;
- output float32, CHW, RGB, divided by 255.

`auto=True` is ultralytics' minimal-rectangle mode: the padding is reduced modulo `stride`, so the
output is the smallest stride-aligned canvas holding the resized image (rectangular inference).

The steps (`scale`, `resized_shape`, `padding`, `resize`, `to_tensor`, `restore_boxes`) are separate
methods so the conformance suite can state a property per step, and broken variants in
fixtures/letterbox/ override exactly one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

PAD_VALUE = 114


@dataclass(frozen=True)
class LetterboxMeta:
    """What the inverse mapping needs: the forward transform of one image, in pixels."""

    source_shape: tuple[int, int]  # (h, w) of the source image
    output_shape: tuple[int, int]  # (h, w) of the model input canvas
    ratio: float  # r: source pixels -> input pixels, the same for both axes
    resized_shape: tuple[int, int]  # (h, w) of the resized content ("new_unpad")
    padding: tuple[int, int, int, int]  # (top, bottom, left, right) in input pixels

    @property
    def gain(self) -> tuple[float, float]:
        """(x, y) scale of the content actually drawn: resized side / source side, per axis."""
        (h, w), (nh, nw) = self.source_shape, self.resized_shape
        return nw / w, nh / h

    @property
    def offset(self) -> tuple[int, int]:
        """(x, y) of the content's top-left corner in the input: what restore subtracts."""
        top, _, left, _ = self.padding
        return left, top


def _target_shape(target: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(target, (int, np.integer)):
        th = tw = int(target)
    else:
        th, tw = (int(v) for v in target)
    if th < 1 or tw < 1:
        raise ValueError(f"letterbox target must be positive, got {target!r}")
    return th, tw


class Letterbox:
    """ultralytics-compatible letterbox. Call it on one HWC uint8 RGB image or use `batch`."""

    pad_value: int = PAD_VALUE
    interpolation: int = cv2.INTER_LINEAR

    # -- the steps -------------------------------------------------------------------------------
    def scale(self, source_shape: tuple[int, int], target_shape: tuple[int, int], scaleup: bool = True) -> float:
        h, w = source_shape
        th, tw = target_shape
        r = min(th / h, tw / w)
        return r if scaleup else min(r, 1.0)

    def resized_shape(self, source_shape: tuple[int, int], target_shape: tuple[int, int], ratio: float) -> tuple[int, int]:
        h, w = source_shape
        return max(1, int(round(h * ratio))), max(1, int(round(w * ratio)))

    def padding(
        self, resized_shape: tuple[int, int], target_shape: tuple[int, int], auto: bool = False, stride: int = 32
    ) -> tuple[int, int, int, int]:
        nh, nw = resized_shape
        th, tw = target_shape
        dh, dw = th - nh, tw - nw
        if auto:
            dh, dw = dh % stride, dw % stride
        dh, dw = dh / 2, dw / 2
        return int(round(dh - 0.1)), int(round(dh + 0.1)), int(round(dw - 0.1)), int(round(dw + 0.1))

    def resize(self, image: np.ndarray, resized_shape: tuple[int, int]) -> np.ndarray:
        nh, nw = resized_shape
        if image.shape[:2] == (nh, nw):
            return image
        return cv2.resize(image, (nw, nh), interpolation=self.interpolation)

    def to_tensor(self, canvas: np.ndarray) -> np.ndarray:
        """HWC uint8 RGB -> CHW float32 in [0, 1] (x / 255, as ultralytics' `img.float() / 255`)."""
        return np.divide(canvas.transpose(2, 0, 1), np.float32(255.0), dtype=np.float32)

    # -- forward ---------------------------------------------------------------------------------
    def __call__(
        self,
        image: np.ndarray,
        target: int | Sequence[int],
        *,
        auto: bool = False,
        stride: int = 32,
        scaleup: bool = True,
    ) -> tuple[np.ndarray, LetterboxMeta]:
        """One HWC uint8 RGB image -> ([3, H, W] float32 input, meta)."""
        image = _check_image(image)
        meta = self.geometry((int(image.shape[0]), int(image.shape[1])), target, auto=auto, stride=stride, scaleup=scaleup)
        top, bottom, left, right = meta.padding
        content = self.resize(image, meta.resized_shape)
        canvas = cv2.copyMakeBorder(
            content, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(self.pad_value,) * 3
        )
        return self.to_tensor(canvas), meta

    def geometry(
        self, source_shape: tuple[int, int], target: int | Sequence[int], *, auto: bool = False, stride: int = 32,
        scaleup: bool = True,
    ) -> LetterboxMeta:
        """The letterbox of an image of `source_shape` (h, w), without its pixels: what the inverse
        mapping and a per-image affine input (harness.repository.extra_inputs) need."""
        target_shape = _target_shape(target)
        ratio = self.scale(source_shape, target_shape, scaleup)
        resized_shape = self.resized_shape(source_shape, target_shape, ratio)
        top, bottom, left, right = self.padding(resized_shape, target_shape, auto, stride)
        return LetterboxMeta(
            source_shape=(int(source_shape[0]), int(source_shape[1])),
            output_shape=(resized_shape[0] + top + bottom, resized_shape[1] + left + right),
            ratio=float(ratio),
            resized_shape=resized_shape,
            padding=(top, bottom, left, right),
        )

    def batch(
        self, images: Sequence[np.ndarray], target: int | Sequence[int], **options
    ) -> tuple[np.ndarray, list[LetterboxMeta]]:
        """A list of HWC uint8 RGB images -> ([N, 3, H, W] float32, metas), each as if alone."""
        if len(images) == 0:
            raise ValueError("letterbox batch needs at least one image")
        tensors, metas = zip(*(self(image, target, **options) for image in images))
        shapes = {t.shape for t in tensors}
        if len(shapes) > 1:
            raise ValueError(f"letterbox batch: images letterboxed to different shapes {sorted(shapes)} "
                             "(auto=True gives a per-image canvas; batch only same-aspect images with it)")
        return np.stack(tensors), list(metas)

    # -- boxes -----------------------------------------------------------------------------------
    def project_boxes(self, boxes_xyxy: np.ndarray, meta: LetterboxMeta) -> np.ndarray:
        """Source pixels -> input pixels: where a box in the source lands in the model input."""
        boxes = _as_boxes(boxes_xyxy)
        (x, y), (gx, gy) = meta.offset, meta.gain
        boxes[:, [0, 2]] = boxes[:, [0, 2]] * gx + x
        boxes[:, [1, 3]] = boxes[:, [1, 3]] * gy + y
        return boxes

    def restore_boxes(self, boxes_xyxy: np.ndarray, meta: LetterboxMeta, clip: bool = True) -> np.ndarray:
        """Input pixels -> source pixels (ultralytics `scale_boxes`): subtract the offsets, divide by
        the per-axis gain, clip to the source image."""
        boxes = _as_boxes(boxes_xyxy)
        (x, y), (gx, gy) = meta.offset, meta.gain
        boxes[:, [0, 2]] = (boxes[:, [0, 2]] - x) / gx
        boxes[:, [1, 3]] = (boxes[:, [1, 3]] - y) / gy
        return self.clip_boxes(boxes, meta) if clip else boxes

    @staticmethod
    def clip_boxes(boxes: np.ndarray, meta: LetterboxMeta) -> np.ndarray:
        """Source-pixel boxes [n, 4] clipped, in place, to the source image (ultralytics `clip_boxes`)."""
        h, w = meta.source_shape
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h)
        return boxes


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"letterbox expects an HWC uint8 RGB image, got shape {image.shape} dtype {image.dtype}")
    if image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"letterbox got an empty image of shape {image.shape}")
    return np.ascontiguousarray(image)


def _as_boxes(boxes_xyxy: np.ndarray) -> np.ndarray:
    """A float copy shaped [k, 4]; float64 stays float64, anything else becomes float32."""
    boxes = np.asarray(boxes_xyxy)
    dtype = np.float64 if boxes.dtype == np.float64 else np.float32
    return np.array(boxes, dtype=dtype).reshape(-1, 4)


LETTERBOX = Letterbox()


def letterbox(image: np.ndarray, target: int | Sequence[int], **options) -> tuple[np.ndarray, LetterboxMeta]:
    """Module-level shortcut to the reference `Letterbox()`."""
    return LETTERBOX(image, target, **options)


def letterbox_batch(images: Sequence[np.ndarray], target: int | Sequence[int], **options):
    return LETTERBOX.batch(images, target, **options)


def restore_boxes(boxes_xyxy: np.ndarray, meta: LetterboxMeta, clip: bool = True) -> np.ndarray:
    return LETTERBOX.restore_boxes(boxes_xyxy, meta, clip)


def project_boxes(boxes_xyxy: np.ndarray, meta: LetterboxMeta) -> np.ndarray:
    return LETTERBOX.project_boxes(boxes_xyxy, meta)
