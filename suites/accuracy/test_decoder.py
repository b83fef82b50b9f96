"""A served end-to-end model's JPEG decoder, judged apart from its precision (harness.accuracy.decoder):
the other gates see the reference's pixels as PNG; this one sends the set's JPEG files as clients do."""

from __future__ import annotations

import pytest

from harness.accuracy.decoder import judge_decoding
from harness.verdicts import not_applicable

pytestmark = [pytest.mark.accuracy]


def test_jpeg_decoding(candidate, accuracy_runs, record_property):
    spec, cand, lossless = candidate
    if not accuracy_runs.judged_on_reference_pixels(cand):
        not_applicable(f"{spec.name}: not a served end-to-end model (the harness decodes its images)")
    described, failures = judge_decoding(lossless, accuracy_runs.as_encoded(spec), accuracy_runs.eval_set,
                                         accuracy_runs.profile)
    record_property("jpeg_decoding", described)
    if failures:
        pytest.fail(f"{spec.name} JPEG decoding: " + "; ".join(failures) + f"\n{described}", pytrace=False)
