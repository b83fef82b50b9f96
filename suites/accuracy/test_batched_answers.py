"""Does batching change a request's answer? Each served model's answer for every image, sent alone, is that
image's reference; the same images concurrently (Triton batches them), in multi-image requests where the
model has a batch dimension, and beside bad requests must give each image its own answer within the box
gates of the model's precision, and a bad request must fail alone (harness.accuracy.batched). Twin rounds
batch images whose objects overlap (an image with itself, its next frame, its mirror image), where a
post-processing that mixes the images of a batch loses boxes (end-to-end models: a raw detector's NMS is
the harness's, image by image). The batches are read from the statistics API:
none formed is "not tested", never a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.accuracy import batched
from harness.checks.model import completed_config
from harness.repository.layouts import BASE64, ENCODED
from harness.verdicts import not_applicable

pytestmark = pytest.mark.accuracy


def test_batched_answers_are_each_requests_own(candidate_spec, accuracy_runs, request):
    if candidate_spec.kind != "served":
        not_applicable(f"{candidate_spec.name}: not a served model")
    cand = accuracy_runs.build(candidate_spec)
    repository = Path(request.getfixturevalue("repository"))
    config = completed_config(repository / candidate_spec.target)
    config.name = config.name or candidate_spec.target
    images = accuracy_runs.eval_set.images[:: max(1, len(accuracy_runs.eval_set.images) // batched.IMAGES)][: batched.IMAGES]
    encoded = [image.lossless() for image in images]
    url = request.getfixturevalue("triton_server").endpoints.http
    if cand.kind == "raw":
        from harness.accuracy.served import model_layout

        layout = model_layout(config, request.getfixturevalue("manifest"), candidate_spec.target)
        imgsz = (layout.input.imgsz if layout.input is not None else None) or (accuracy_runs.imgsz, accuracy_runs.imgsz)
        settings = accuracy_runs.profile.eval

        def build(blobs):
            return batched.raw_items(config, cand.input_name, blobs, imgsz, settings)
        sender = batched.Sender(url, config.name, cand.input_name, [config.output[0].name], batched.concurrency(config))
        encoded_input, conf, twin_bases = False, settings["conf"], 0  # the harness runs its NMS, image by image
    else:
        detector = cand.detector

        def build(blobs):
            return batched.end_to_end_items(detector, blobs)
        sender = batched.Sender(url, detector.model.name, detector.model.input_name,
                                detector.layout.output.read, batched.concurrency(config))
        encoded_input, conf, twin_bases = detector.layout.input.kind in (ENCODED, BASE64), cand.conf, batched.TWIN_BASES
    thresholds = accuracy_runs.profile.section("boxes", accuracy_runs.judge_as(candidate_spec, cand))
    try:
        outcome = batched.check(sender, config, repository, encoded, [image.file_name for image in images], build, thresholds,
                                conf, encoded_input, twin_bases)
    finally:
        sender.close()
    if outcome.problems:
        pytest.fail(f"{candidate_spec.name}: answers under batching ({len(images)} images; {', '.join(outcome.rounds)}; "
                    f"batches {outcome.batches}):\n  - " + "\n  - ".join(outcome.problems), pytrace=False)
    if not outcome.batched:
        pytest.skip(f"not tested: Triton formed no batch: {candidate_spec.target} executed every request alone "
                    f"({', '.join(outcome.rounds)}; batch_stats {outcome.batches or 'empty'})")
