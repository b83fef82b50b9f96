"""Answers under batching: a served model's answer for each image must not depend on which requests Triton
batched it with. Each image's answer sent alone, one request after another, is its own reference (the same
model and engine, so only batching differs); the same images are then sent concurrently (Triton's dynamic
batcher merges the requests), as multi-image requests where the model has a batch dimension, and mixed
with bad requests (an undecodable image or a wrong-size tensor), and every good image's rows are judged
against its own sequential answer with the box gates of the model's precision. Distinct images rarely have
objects in the same place, so twin rounds batch images whose objects overlap in image coordinates — an image
with itself again, the next frame of its scene and its mirror image, in one multi-image request and as
concurrent requests — where post-processing that mixes the images of a batch (one NMS over all of them)
loses boxes. A box whose score lies within the precision's score tolerance of the model's confidence
threshold may come or go with the batch and is not counted as missed or extra. Whether batches formed is
read from the statistics API (the model's batch_stats, or its ensemble steps'), not assumed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.accuracy import boxes
from harness.accuracy.boxes import valid_rows
from harness.vision.boxes import iou_matrix
from harness.vision.matching import match_detections
from harness.load import server_stats
from harness.load.batching import is_ensemble, load_concurrency

IMAGES = 16  # enough for per-request identity; each image is sent 3-4 times
BAD_EVERY = 4  # in the mixed round, every 4th request is a bad one
CORRUPT = b"\xff\xd8\xff\xe0 not a JPEG: truncated upload"
TWIN_BASES = 1  # images (those with the most boxes alone) sent with their twins: 11 more inferences each
SUPPRESSED = "boxes of one image suppressed by another image's in the same batch"


@dataclass
class Item:
    """One image as one request's input (batch dimension included where the model has one) and how its
    outputs (that request's rows of them) decode to detections [k, 6]."""

    array: np.ndarray
    datatype: str
    decode: Callable[[dict], np.ndarray]
    extras: dict = field(default_factory=dict)  # the declared inputs beside the image ([inputs.NAME]), its values


@dataclass
class Outcome:
    problems: list[str] = field(default_factory=list)
    batches: dict = field(default_factory=dict)  # model -> batch-size histogram realised during the rounds
    rounds: list[str] = field(default_factory=list)

    @property
    def batched(self) -> bool:
        return any(size > 1 for histogram in self.batches.values() for size in histogram)


def end_to_end_items(detector, encoded: list[bytes]) -> list[Item]:
    """Items for an end-to-end model, built by its own client (harness.vision.served.EndToEndClient)."""
    from harness.vision.image import decode_image_bytes
    from harness.vision.served import Answer

    items = []
    for blob in encoded:
        array, datatype, meta, source = detector.request(blob)
        if source is None and detector.layout.output.box_units == "normalized":
            source = decode_image_bytes(blob).shape[:2]
        items.append(Item(array, datatype, lambda outputs, meta=meta, source=source: detector.decode(Answer(outputs, meta, source)),
                          detector.extras(blob, source)))
    return items


def raw_items(config, input_name: str, encoded: list[bytes], imgsz: tuple[int, int], thresholds: dict) -> list[Item]:
    """Items for a raw detector: the reference letterbox in, the reference decode (NMS at `thresholds`) out."""
    from harness.repository.layouts import read_layout
    from harness.vision.detections import raw_detection_rows
    from harness.vision.image import decode_image_bytes
    from harness.vision.letterbox import LETTERBOX
    from harness.vision.pipeline import DetectionPipeline

    pipeline = DetectionPipeline(imgsz=imgsz, conf=thresholds["conf"], iou=thresholds["iou"], max_det=thresholds["max_det"])
    output, layout = config.output[0].name, read_layout(config).output
    items = []
    for blob in encoded:
        tensor, meta = LETTERBOX(decode_image_bytes(blob), imgsz)
        array = np.ascontiguousarray(tensor[None] if config.max_batch_size > 0 else tensor, dtype=np.float32)

        def decode(outputs, meta=meta):
            raw = raw_detection_rows(outputs[output], layout)
            detections, num = pipeline.postprocess(raw if raw.ndim == 3 else raw[None], [meta])
            return detections[0][: int(num[0])].astype(np.float64)
        items.append(Item(array, "FP32", decode))
    return items


def bad_item(good: Item, encoded_input: bool) -> Item:
    """A request the model must reject: an undecodable image for encoded inputs, else a tensor one row
    taller than the model takes (rejected by Triton or the model, never a reason to fail a neighbour)."""
    if encoded_input:
        array = np.array([CORRUPT], dtype=np.object_).reshape(good.array.shape) if good.array.dtype == np.object_ else \
            np.frombuffer(CORRUPT, dtype=np.uint8).reshape((1, -1) if good.array.ndim == 2 else (-1,))
    else:
        array = np.concatenate([good.array, good.array[..., :1, :]], axis=-2)
    return Item(array, good.datatype, good.decode, good.extras)


class Sender:
    """Requests to one model over tritonclient's HTTP client, one at a time or all in flight at once
    (the client's own connection pool: `concurrency` requests outstanding)."""

    def __init__(self, url: str, model: str, input_name: str, outputs: list[str], concurrency: int):
        import tritonclient.http as httpclient

        self.protocol = httpclient
        self.client = httpclient.InferenceServerClient(url, concurrency=concurrency, network_timeout=120.0)
        self.model, self.input_name, self.outputs = model, input_name, outputs

    def _inputs(self, items: list[Item]) -> list:
        """One request's tensors: the items' images stacked on the batch dimension, and so their extras."""
        from tritonclient.utils import np_to_triton_dtype

        tensors = [(self.input_name, np.concatenate([i.array for i in items]), items[0].datatype)]
        tensors += [(name, np.concatenate([i.extras[name] for i in items]), np_to_triton_dtype(value.dtype))
                    for name, value in items[0].extras.items()]
        out = []
        for name, array, datatype in tensors:
            out.append(self.protocol.InferInput(name, list(array.shape), datatype))
            out[-1].set_data_from_numpy(array)
        return out

    def _requested(self) -> list:
        return [self.protocol.InferRequestedOutput(n) for n in self.outputs]

    def one(self, item: Item) -> np.ndarray:
        response = self.client.infer(self.model, self._inputs([item]), outputs=self._requested())
        return item.decode({n: response.as_numpy(n) for n in self.outputs})

    def concurrent(self, requests: list[list[Item]]) -> list[list[np.ndarray] | Exception]:
        """Every request (a list of items stacked on the batch dimension) in flight at once; per request
        its items' rows, or the exception it was answered with."""
        from tritonclient.utils import InferenceServerException

        handles = [self.client.async_infer(self.model, self._inputs(items),
                                           outputs=self._requested()) for items in requests]
        answers = []
        for items, handle in zip(requests, handles):
            try:
                response = handle.get_result()
            except InferenceServerException as error:
                answers.append(error)
                continue
            outputs = {n: response.as_numpy(n) for n in self.outputs}
            answers.append([item.decode({n: value[k:k + 1] for n, value in outputs.items()}) if len(items) > 1 else item.decode(outputs)
                            for k, item in enumerate(items)])
        return answers

    def statistics(self) -> dict:
        return self.client.get_inference_statistics("")

    def close(self) -> None:
        self.client.close()


def twin_frames(pixels: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Images whose objects overlap `pixels`' in image coordinates, as a client sends them: the same frame
    again, the next frame of the scene (moved by 1 % of each side, at least a pixel) and its mirror image."""
    h, w = pixels.shape[:2]
    dy, dx = max(1, h // 100), max(1, w // 100)
    moved = np.pad(pixels, ((dy, 0), (dx, 0), (0, 0)), mode="edge")[:h, :w]
    return [("again", pixels), ("next frame", np.ascontiguousarray(moved)), ("mirrored", np.ascontiguousarray(pixels[:, ::-1]))]


def score_tolerance(thresholds: dict) -> float:
    """How far the precision lets the bulk of box scores move (the p99 gate where the profile has one)."""
    return min(thresholds["max_score_delta"], thresholds.get("max_score_delta_p99", np.inf))


def judged(sequential: np.ndarray, batched: np.ndarray, thresholds: dict, conf: float) -> tuple[np.ndarray, np.ndarray]:
    """Both answers without the boxes that only one of them has and that score within the precision's score
    tolerance of the model's confidence threshold `conf`: either side of the threshold is right for them."""
    ref, cand = valid_rows(sequential), valid_rows(batched)
    result = match_detections(ref, cand, thresholds["match_iou"])
    limit = conf + score_tolerance(thresholds)
    return (np.delete(ref, result.missed[ref[result.missed, 4] <= limit], axis=0),
            np.delete(cand, result.extra[cand[result.extra, 4] <= limit], axis=0))


def differs(sequential: np.ndarray, batched: np.ndarray, thresholds: dict, conf: float) -> list[str]:
    """The box gates of the model's precision, batched answer against the image's own sequential one, with
    borderline boxes (judged) neither missed nor extra."""
    sequential, batched = judged(sequential, batched, thresholds, conf)
    if not len(sequential) and len(batched):
        return [f"{len(batched)} boxes where its sequential answer has none (above {conf:g} + "
                f"{score_tolerance(thresholds):g}, the score tolerance)"]
    return boxes.differs(sequential, batched, thresholds)


def suppressed_by(index: int, answers: dict, sequential: list[np.ndarray], thresholds: dict, conf: float,
                  beside: tuple = ()) -> tuple[list[int], int, int] | None:
    """When image `index` only lost boxes and each lost box lies under a box of the same class, scoring at
    least as high, kept in the answer of another image of the round or of the (index, rows) `beside` it in
    flight (NMS across images keeps the best box of the batch and drops the rest): those images, the boxes
    lost and the boxes it has alone."""
    ref, cand = judged(sequential[index], answers[index], thresholds, conf)
    result = match_detections(ref, cand, thresholds["match_iou"])
    if not len(result.missed) or len(result.extra):
        return None
    lost = ref[result.missed]
    covered, by = np.zeros(len(lost), dtype=bool), []
    for other, rows in [*((k, r) for k, r in answers.items() if k != index), *beside]:
        kept = np.zeros((0, 6)) if isinstance(rows, Exception) else valid_rows(rows)
        if not len(kept):
            continue
        under = ((iou_matrix(lost[:, :4], kept[:, :4]) >= thresholds["match_iou"]) & (lost[:, 5, None] == kept[None, :, 5])
                 & (kept[None, :, 4] >= lost[:, 4, None] - score_tolerance(thresholds))).any(axis=1)
        if (under & ~covered).any():
            by.append(other)
        covered |= under
    return (by, len(lost), len(ref)) if covered.all() else None


def _whose(rows: np.ndarray, sequential: list[np.ndarray], own: int, thresholds: dict, conf: float) -> int | None:
    """Another image whose sequential answer these rows are, if any (a response delivered to the wrong request)."""
    for other, answer in enumerate(sequential):
        if other != own and len(valid_rows(answer)) and not differs(answer, rows, thresholds, conf):
            return other
    return None


def judge_round(name: str, label: str, answers: dict[int, np.ndarray | Exception], sequential: list[np.ndarray],
                files: list[str], thresholds: dict, conf: float, beside: tuple = ()) -> list[str]:
    """Problems of one round, one line per kind (up to 3 examples each): good images that errored, that lost
    boxes to another image of the round or `beside` it (suppressed_by), that got another request's answer, or
    whose rows moved beyond the gates from their own sequential answer."""
    errored, suppressed, swapped, moved = [], [], [], []
    for index, rows in answers.items():
        if isinstance(rows, Exception):
            errored.append(f"{files[index]} ({str(rows)[:160]})")
            continue
        failures = differs(sequential[index], rows, thresholds, conf)
        if not failures:
            continue
        lost = suppressed_by(index, answers, sequential, thresholds, conf, beside)
        other = _whose(rows, sequential, index, thresholds, conf) if lost is None else None
        if lost is not None:
            by, gone, had = lost
            suppressed.append(f"{files[index]} lost {gone} of its {had} boxes, each under a same-class box kept in the answer of "
                              f"{' or '.join(files[b] for b in by[:2])}")
        elif other is not None:
            swapped.append(f"{files[index]} got {files[other]}'s")
        else:
            moved.append(f"{files[index]}: {'; '.join(failures)}")
    total, problems = len(answers), []
    for found, what in ((errored, "failed"),
                        (suppressed, f"lost boxes that they have when sent alone — {SUPPRESSED} (post-processing, e.g. "
                                     f"NMS, runs over the whole batch instead of image by image)"),
                        (swapped, "got another request's answer — responses are not returned to their own requests"),
                        (moved, "answered differently than alone")):
        if found:
            problems.append(f"{name} {label}: {len(found)} of {total} images {what}: {', '.join(found[:3])}"
                            + (", ..." if len(found) > 3 else ""))
    return problems


def steps(config, repository) -> list[str]:
    """The models whose statistics can show a batch: the model, or an ensemble's steps (recursively)."""
    from pathlib import Path

    from harness.checks.model import completed_config

    if not is_ensemble(config):
        return [config.name]
    found = []
    for step in config.ensemble_scheduling.step:
        step_dir = Path(repository) / step.model_name
        found += steps(completed_config(step_dir), repository) if (step_dir / "config.pbtxt").is_file() else [step.model_name]
    return found


def twins(encoded: list[bytes], files: list[str], sequential: list[np.ndarray], build: Callable[[list[bytes]], list[Item]],
          bases: int) -> tuple[list[Item], list[str], list[list[int]]]:
    """The `bases` images with the most boxes alone, each with its twin_frames: the twins' items and names,
    and one group per base (its index, then its twins', numbered after the len(encoded) images)."""
    from harness.dataset.single import encode
    from harness.vision.image import decode_image_bytes

    counts = [len(valid_rows(rows)) for rows in sequential]
    blobs, names, groups = [], [], []
    for base in [i for i in sorted(range(len(encoded)), key=lambda i: -counts[i])[:bases] if counts[i]]:
        frames = twin_frames(decode_image_bytes(encoded[base]))
        groups.append([base] + [len(encoded) + len(blobs) + k for k in range(len(frames))])
        blobs += [encode(pixels, "png") for _, pixels in frames]
        names += [f"{files[base]} ({label})" for label, _ in frames]
    return (build(blobs) if blobs else []), names, groups


def _by_image(requests: list[list[int]], answers: list) -> dict[int, np.ndarray | Exception]:
    """Each image's rows (or its request's exception) from the answers to requests of image indices."""
    out = {}
    for request, answer in zip(requests, answers):
        out.update({i: answer if isinstance(answer, Exception) else answer[k] for k, i in enumerate(request)})
    return out


def check(sender: Sender, config, repository, encoded: list[bytes], files: list[str], build: Callable[[list[bytes]], list[Item]],
          thresholds: dict, conf: float, encoded_input: bool, twin_bases: int) -> Outcome:
    """Sequential answers, then concurrent single-image requests, multi-image requests (max_batch_size > 1),
    the twin rounds (for `twin_bases` images: 0 where the client runs the NMS, as for a raw detector) and a
    mixed round with bad requests, judged image by image against each image's own answer alone (`build`
    makes requests' items from encoded images; `conf` is the model's confidence threshold); the batches
    realised, from the statistics API."""
    name = config.name
    outcome = Outcome()
    items = build(encoded)
    sequential = [sender.one(item) for item in items]
    twin_list, twin_names, groups = twins(encoded, files, sequential, build, twin_bases)
    sequential += [sender.one(item) for item in twin_list]
    every, names = items + twin_list, files + twin_names

    def judge(label: str, answers: dict, beside: tuple = ()) -> None:
        outcome.problems.extend(judge_round(name, label, answers, sequential, names, thresholds, conf, beside))

    start = sender.statistics()
    singles = sender.concurrent([[item] for item in items])
    outcome.rounds.append(f"{len(items)} concurrent requests")
    judge("under concurrency", _by_image([[i] for i in range(len(items))], singles))
    size = min(config.max_batch_size, 4)
    if config.max_batch_size > 1:
        chunks = [list(range(k, min(k + size, len(items)))) for k in range(0, len(items), size)]
        outcome.rounds.append(f"{len(chunks)} requests of {size} images")
        judge(f"in {size}-image requests", _by_image(chunks, sender.concurrent([[items[i] for i in c] for c in chunks])))
    if groups:
        # the multi-image requests go first: while an instance runs them, the single-image ones queue and batch together
        together = [group[k:k + size] for group in groups for k in range(0, len(group), size)] if config.max_batch_size > 1 else []
        alone = [[i] for group in groups for i in group]
        replies = sender.concurrent([[every[i] for i in request] for request in together + alone])
        in_one, apart = _by_image(together, replies[:len(together)]), _by_image(alone, replies[len(together):])
        if together:
            outcome.rounds.append(f"{len(together)} request(s) of an image with its twins")
            judge("with its twins in one request", in_one, tuple(apart.items()))
        outcome.rounds.append(f"{len(alone)} concurrent requests of an image and its twins" + (" behind them" if together else ""))
        judge("with its twins as concurrent requests", apart, tuple(in_one.items()))
    mixed = [[bad_item(item, encoded_input)] if k % BAD_EVERY == BAD_EVERY - 1 else [item] for k, item in enumerate(items)]
    answers = sender.concurrent(mixed)
    bad = [k for k in range(len(items)) if k % BAD_EVERY == BAD_EVERY - 1]
    outcome.rounds.append(f"{len(items)} concurrent requests, {len(bad)} of them bad")
    accepted = [k for k in bad if not isinstance(answers[k], Exception)]
    if accepted:
        outcome.problems.append(f"{name} mixed batch: {len(accepted)} of {len(bad)} bad requests were answered, not rejected")
    good = _by_image([[k] for k in range(len(items)) if k not in bad], [a for k, a in enumerate(answers) if k not in bad])
    failed = [k for k, answer in good.items() if isinstance(answer, Exception)]
    if failed:
        outcome.problems.append(f"{name} mixed batch: {len(failed)} of {len(good)} good requests failed beside a bad one — one bad "
                                f"input fails its neighbours: {str(good[failed[0]])[:200]}")
    judge("beside bad requests", {k: a for k, a in good.items() if k not in failed})
    end = sender.statistics()
    for model in steps(config, repository):
        histogram = server_stats.delta(start, end, model)["batch_stats"]
        if histogram:
            outcome.batches[model] = histogram
    return outcome


def concurrency(config) -> int:
    """Enough requests in flight for the scheduler to fill its preferred batch (harness.load.batching), at most 8."""
    return min(8, load_concurrency(config))
