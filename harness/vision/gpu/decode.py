"""YOLOv8 raw output -> fixed-size detection rows on the device: harness.vision.decode for a batch in
one pass.

Same rules as the numpy decoder: best class per anchor (first on ties), score > conf, candidates in
score order with ties broken by anchor index (a stable sort), at most `max_nms` of them, class-aware
greedy NMS through the class offset with IoU in float64, the first `max_det` kept. Thresholds are
per image, because Triton batches requests that may each override conf, iou and max_det.

Greedy NMS without a Python loop over boxes: with candidates ranked, box j is kept iff no kept box
ranked before it overlaps it by more than iou. That is a recursion along the rank, so iterating
keep <- valid & ~any_i(keep_i & over_ij) from keep = valid fixes at least one more rank per step and
stops at the unique fixed point, the greedy answer; overlap chains are short, so it takes a few steps.
"""

from __future__ import annotations

import torch

from harness.vision.decode import MAX_NMS, PAD
from harness.vision.nms import MAX_WH

# Largest IoU block (images x candidates^2, float64) built at once: ~1 GiB; bigger batches go in chunks.
IOU_ELEMENTS = 1 << 27
# Greedy NMS steps between convergence tests; chains of suppression are rarely longer.
CONVERGENCE_CHECK = 4


def xywh_to_xyxy(boxes):
    half = boxes[..., 2:4] / 2
    return torch.cat([boxes[..., 0:2] - half, boxes[..., 0:2] + half], dim=-1)


def iou_matrix(boxes):
    """[b, k, 4] float64 -> [b, k, k] IoU within each image, as harness.vision.boxes.iou_matrix."""
    top_left = torch.maximum(boxes[:, :, None, :2], boxes[:, None, :, :2])
    bottom_right = torch.minimum(boxes[:, :, None, 2:], boxes[:, None, :, 2:])
    inter = (bottom_right - top_left).clamp(min=0).prod(dim=3)
    area = (boxes[..., 2] - boxes[..., 0]).clamp(min=0) * (boxes[..., 3] - boxes[..., 1]).clamp(min=0)
    return inter / (area[:, :, None] + area[:, None, :] - inter).clamp(min=1e-9)


def greedy_keep(boxes, valid, iou):
    """[b, k, 4] float64 boxes ranked best first, [b, k] valid, [b] IoU thresholds -> [b, k] kept."""
    k = boxes.shape[1]
    over = iou_matrix(boxes) > iou[:, None, None]
    over &= torch.ones(k, k, dtype=torch.bool, device=boxes.device).triu(diagonal=1)  # only earlier ranks suppress
    over &= valid[:, :, None]
    keep = valid
    for step in range(k + 1):
        new = valid & ~(over & keep[:, :, None]).any(dim=1)
        # a fixed point stays fixed: test for it (a wait on the GPU) only every few steps
        if (step % CONVERGENCE_CHECK == CONVERGENCE_CHECK - 1 or step == k) and torch.equal(new, keep):
            break
        keep = new
    return keep


def decode_batch(raw, conf, iou, max_det, rows: int, agnostic: bool = False, max_nms: int = MAX_NMS):
    """raw [N, 4 + nc, anchors] float tensor; conf [N] float32, iou [N] float64 (a float32 0.7 is below
    0.7 and would suppress a pair at exactly 0.7 that numpy keeps), max_det [N] int (each <= rows) ->
    (detections [N, rows, 6] float32 in input pixels, padded with -1; num_detections [N] int32)."""
    raw = raw.float()
    n, device = raw.shape[0], raw.device
    detections = torch.full((n, rows + 1, 6), PAD, dtype=torch.float32, device=device)  # slot `rows`: discarded
    scores, classes = raw[:, 4:].max(dim=1)
    candidate = scores > conf[:, None]
    k = min(int(candidate.sum(dim=1).max().item()) if n else 0, max_nms)
    if k == 0:
        return detections[:, :rows], torch.zeros(n, dtype=torch.int32, device=device)
    order = torch.sort(torch.where(candidate, scores, -torch.inf), dim=1, descending=True, stable=True).indices[:, :k]
    valid = torch.gather(candidate, 1, order)
    ranked_scores = torch.gather(scores, 1, order)
    ranked_classes = torch.gather(classes, 1, order)
    boxes = xywh_to_xyxy(torch.gather(raw[:, :4], 2, order[:, None, :].expand(n, 4, k)).transpose(1, 2))
    shifted = boxes.double()
    if not agnostic:
        extent = torch.where(valid[..., None], shifted.abs(), 0).amax(dim=(1, 2))
        max_wh = (extent * 2 + 1).clamp(min=MAX_WH)
        shifted = shifted + ranked_classes[..., None].double() * max_wh[:, None, None]
    keep = torch.empty_like(valid)
    step = max(1, IOU_ELEMENTS // (k * k))
    for start in range(0, n, step):
        chunk = slice(start, start + step)
        keep[chunk] = greedy_keep(shifted[chunk], valid[chunk], iou[chunk].double())
    rank = keep.cumsum(dim=1) - 1
    final = keep & (rank < max_det[:, None])
    slot = torch.where(final, rank, rows)
    values = torch.cat([boxes, ranked_scores[..., None], ranked_classes[..., None].float()], dim=2)
    detections.scatter_(1, slot[..., None].expand(n, k, 6), values)
    return detections[:, :rows], final.sum(dim=1).to(torch.int32)
