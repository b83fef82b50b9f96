"""Answers under batching: a served model's answer for each image must not depend on which requests Triton
batched it with. Each image's answer sent alone, one request after another, is its own reference (the same
model and engine, so only batching differs); the same images are then sent concurrently (Triton's dynamic
batcher merges the requests), as multi-image requests where the model has a batch dimension, and mixed
with bad requests (an undecodable image or a wrong-size tensor), and every good image's rows are judged
against its own sequential answer with the box gates of the model's precision. Whether batches formed is
read from the statistics API (the model's batch_stats, or its ensemble steps'), not assumed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.accuracy.boxes import differs
from harness.load import server_stats
from harness.load.batching import is_ensemble, load_concurrency

IMAGES = 16  # enough for per-request identity; each image is sent 3-4 times
BAD_EVERY = 4  # in the mixed round, every 4th request is a bad one
CORRUPT = b"\xff\xd8\xff\xe0 not a JPEG: truncated upload"


@dataclass
class Item:
    """One image as one request's input (batch dimension included where the model has one) and how its
    outputs (that request's rows of them) decode to detections [k, 6]."""

    array: np.ndarray
    datatype: str
    decode: Callable[[dict], np.ndarray]


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
        items.append(Item(array, datatype, lambda outputs, meta=meta, source=source: detector.decode(Answer(outputs, meta, source))))
    return items


def raw_items(config, input_name: str, encoded: list[bytes], imgsz: tuple[int, int], thresholds: dict) -> list[Item]:
    """Items for a raw detector: the reference letterbox in, the reference decode (NMS at `thresholds`) out."""
    from harness.vision.image import decode_image_bytes
    from harness.vision.letterbox import LETTERBOX
    from harness.vision.pipeline import DetectionPipeline

    pipeline = DetectionPipeline(imgsz=imgsz, conf=thresholds["conf"], iou=thresholds["iou"], max_det=thresholds["max_det"])
    output = config.output[0].name
    items = []
    for blob in encoded:
        tensor, meta = LETTERBOX(decode_image_bytes(blob), imgsz)
        array = np.ascontiguousarray(tensor[None] if config.max_batch_size > 0 else tensor, dtype=np.float32)

        def decode(outputs, meta=meta):
            raw = outputs[output]
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
    return Item(array, good.datatype, good.decode)


class Sender:
    """Requests to one model over tritonclient's HTTP client, one at a time or all in flight at once
    (the client's own connection pool: `concurrency` requests outstanding)."""

    def __init__(self, url: str, model: str, input_name: str, outputs: list[str], concurrency: int):
        import tritonclient.http as httpclient

        self.protocol = httpclient
        self.client = httpclient.InferenceServerClient(url, concurrency=concurrency, network_timeout=120.0)
        self.model, self.input_name, self.outputs = model, input_name, outputs

    def _inputs(self, array: np.ndarray, datatype: str) -> list:
        infer_input = self.protocol.InferInput(self.input_name, list(array.shape), datatype)
        infer_input.set_data_from_numpy(array)
        return [infer_input]

    def _requested(self) -> list:
        return [self.protocol.InferRequestedOutput(n) for n in self.outputs]

    def one(self, item: Item) -> np.ndarray:
        response = self.client.infer(self.model, self._inputs(item.array, item.datatype), outputs=self._requested())
        return item.decode({n: response.as_numpy(n) for n in self.outputs})

    def concurrent(self, requests: list[list[Item]]) -> list[list[np.ndarray] | Exception]:
        """Every request (a list of items stacked on the batch dimension) in flight at once; per request
        its items' rows, or the exception it was answered with."""
        from tritonclient.utils import InferenceServerException

        handles = [self.client.async_infer(self.model, self._inputs(np.concatenate([i.array for i in items]), items[0].datatype),
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


def _whose(rows: np.ndarray, sequential: list[np.ndarray], own: int, thresholds: dict) -> int | None:
    """Another image whose sequential answer these rows are, if any (a response delivered to the wrong request)."""
    for other, answer in enumerate(sequential):
        if other != own and len(answer) and not differs(answer, rows, thresholds):
            return other
    return None


def judge_round(name: str, label: str, answers: dict[int, np.ndarray | Exception], sequential: list[np.ndarray],
                files: list[str], thresholds: dict) -> list[str]:
    """Problems of one round, one line per kind (up to 3 examples each): good images that errored, that got
    another request's answer, or whose rows moved beyond the gates from their own sequential answer."""
    errored, swapped, moved = [], [], []
    for index, rows in answers.items():
        if isinstance(rows, Exception):
            errored.append(f"{files[index]} ({str(rows)[:160]})")
            continue
        failures = differs(sequential[index], rows, thresholds)
        if failures:
            other = _whose(rows, sequential, index, thresholds)
            if other is not None:
                swapped.append(f"{files[index]} got {files[other]}'s")
            else:
                moved.append(f"{files[index]}: {'; '.join(failures)}")
    total, problems = len(answers), []
    for found, what in ((errored, "failed"), (swapped, "got another request's answer — responses are not returned to their "
                                              "own requests"), (moved, "answered differently than alone")):
        if found:
            problems.append(f"{name} {label}: {len(found)} of {total} images {what}: {', '.join(found[:3])}"
                            + (", ..." if len(found) > 3 else ""))
    return problems


def steps(config, repository) -> list[str]:
    """The models whose statistics can show a batch: the model, or an ensemble's steps (recursively)."""
    from pathlib import Path

    from harness.repository.config import read_config

    if not is_ensemble(config):
        return [config.name]
    found = []
    for step in config.ensemble_scheduling.step:
        step_dir = Path(repository) / step.model_name
        found += steps(read_config(step_dir), repository) if (step_dir / "config.pbtxt").is_file() else [step.model_name]
    return found


def check(sender: Sender, config, repository, items: list[Item], files: list[str], thresholds: dict,
          encoded_input: bool) -> Outcome:
    """Sequential answers, then concurrent single-image requests, multi-image requests (max_batch_size > 1)
    and a mixed round with bad requests, judged image by image; the batches realised, from the statistics API."""
    name = config.name
    outcome = Outcome()
    sequential = [sender.one(item) for item in items]
    start = sender.statistics()
    singles = sender.concurrent([[item] for item in items])
    outcome.rounds.append(f"{len(items)} concurrent requests")
    outcome.problems += judge_round(name, "under concurrency", dict(enumerate(singles)), sequential, files, thresholds)
    if config.max_batch_size > 1:
        size = min(config.max_batch_size, 4)
        groups = [list(range(k, min(k + size, len(items)))) for k in range(0, len(items), size)]
        multi = sender.concurrent([[items[i] for i in group] for group in groups])
        answers = {}
        for group, answer in zip(groups, multi):
            answers.update({i: answer if isinstance(answer, Exception) else answer[k] for k, i in enumerate(group)})
        outcome.rounds.append(f"{len(groups)} requests of {size} images")
        outcome.problems += judge_round(name, f"in {size}-image requests", answers, sequential, files, thresholds)
    mixed = [[bad_item(item, encoded_input)] if k % BAD_EVERY == BAD_EVERY - 1 else [item] for k, item in enumerate(items)]
    answers = sender.concurrent(mixed)
    bad = [k for k in range(len(items)) if k % BAD_EVERY == BAD_EVERY - 1]
    outcome.rounds.append(f"{len(items)} concurrent requests, {len(bad)} of them bad")
    accepted = [k for k in bad if not isinstance(answers[k], Exception)]
    if accepted:
        outcome.problems.append(f"{name} mixed batch: {len(accepted)} of {len(bad)} bad requests were answered, not rejected")
    good = {k: answers[k][0] if not isinstance(answers[k], Exception) else answers[k] for k in range(len(items)) if k not in bad}
    failed = [k for k, answer in good.items() if isinstance(answer, Exception)]
    if failed:
        outcome.problems.append(f"{name} mixed batch: {len(failed)} of {len(good)} good requests failed beside a bad one — one bad "
                                f"input fails its neighbours: {str(good[failed[0]])[:200]}")
    outcome.problems += judge_round(name, "beside bad requests", {k: a for k, a in good.items() if k not in failed},
                                    sequential, files, thresholds)
    end = sender.statistics()
    for model in steps(config, repository):
        histogram = server_stats.delta(start, end, model)["batch_stats"]
        if histogram:
            outcome.batches[model] = histogram
    return outcome


def concurrency(config) -> int:
    """Enough requests in flight for the scheduler to fill its preferred batch (harness.load.batching), at most 8."""
    return min(8, load_concurrency(config))
