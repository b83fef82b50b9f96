"""Letterbox on the device: harness.vision.letterbox's geometry (scale, rounded size, split padding,
computed by the very same `Letterbox` methods, so the metas are identical) with torch's bilinear
resampler (half-pixel centres, no antialiasing: what cv2.INTER_LINEAR does) rounded back to 8-bit
levels as cv2 does, pad 114, / 255. Images of one source size are resized in one call.

The canvas is allocated once for the largest batch and reused; `batch` returns a view of it that is
valid until the next call."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from harness.vision.letterbox import LETTERBOX, Letterbox, LetterboxMeta, _target_shape


class DeviceLetterbox:
    def __init__(self, imgsz: int | Sequence[int], max_batch: int, device: str, dtype=torch.float16,
                 letterbox: Letterbox = LETTERBOX):
        self.target = _target_shape(imgsz)
        self.geometry = letterbox
        self.pad = letterbox.pad_value / 255.0
        self.canvas = torch.empty((max_batch, 3, *self.target), dtype=dtype, device=device)

    def meta(self, source_shape: tuple[int, int]) -> LetterboxMeta:
        g = self.geometry
        ratio = g.scale(source_shape, self.target)
        resized = g.resized_shape(source_shape, self.target, ratio)
        return LetterboxMeta(source_shape, self.target, float(ratio), resized, g.padding(resized, self.target))

    def batch(self, images: Sequence[torch.Tensor]) -> tuple[torch.Tensor, list[LetterboxMeta]]:
        """[3, h, w] uint8 RGB device tensors -> ([N, 3, H, W] canvas view, metas)."""
        n = len(images)
        if not 0 < n <= self.canvas.shape[0]:
            raise ValueError(f"letterbox batch of {n} images: this canvas holds 1 to {self.canvas.shape[0]}")
        metas = [self.meta((int(image.shape[1]), int(image.shape[2]))) for image in images]
        canvas = self.canvas[:n]
        canvas.fill_(self.pad)
        groups: dict[tuple[int, int], list[int]] = {}
        for index, image in enumerate(images):
            groups.setdefault(tuple(image.shape[1:]), []).append(index)
        for indices in groups.values():
            (nh, nw), (top, _, left, _) = metas[indices[0]].resized_shape, metas[indices[0]].padding
            content = torch.stack([images[i] for i in indices])
            if content.shape[2:] != (nh, nw):
                content = F.interpolate(content.float(), size=(nh, nw), mode="bilinear", align_corners=False, antialias=False)
                content = content.round_().clamp_(0, 255)
            # half ops compute in float and round once: the same levels as a float32 / 255 cast to half
            if indices == list(range(indices[0], indices[-1] + 1)):  # one run of the batch: a view, no scatter
                canvas[indices[0]: indices[-1] + 1, :, top: top + nh, left: left + nw].copy_(content).div_(255.0)
            else:
                rows = torch.as_tensor(indices, device=canvas.device)
                canvas[rows, :, top: top + nh, left: left + nw] = content.to(canvas.dtype).div_(255.0)
        return canvas, metas

    def restore(self, detections: torch.Tensor, num: torch.Tensor, metas: Sequence[LetterboxMeta]) -> torch.Tensor:
        """Rows [N, R, 6] in input pixels -> source pixels in place (the first num[i] rows of image i;
        the -1 padding stays), as `Letterbox.restore_boxes` with clip."""
        rows = [(*m.offset, *m.gain, m.source_shape[1], m.source_shape[0]) for m in metas]
        ox, oy, gx, gy, w, h = torch.tensor(rows, dtype=torch.float32, device=detections.device).T[..., None]
        live = torch.arange(detections.shape[1], device=detections.device)[None, :] < num[:, None]
        x = ((detections[..., [0, 2]] - ox[..., None]) / gx[..., None]).clamp(min=0).minimum(w[..., None])
        y = ((detections[..., [1, 3]] - oy[..., None]) / gy[..., None]).clamp(min=0).minimum(h[..., None])
        restored = torch.stack([x[..., 0], y[..., 0], x[..., 1], y[..., 1]], dim=-1)
        detections[..., :4] = torch.where(live[..., None], restored, detections[..., :4])
        return detections
