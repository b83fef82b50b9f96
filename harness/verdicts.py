"""Four kinds of skip, told apart in the report: a check that does not concern this model ("not
applicable": an ensemble has no model file to read bindings from), one of a model this host cannot serve
("not tested on this host": it needs a GPU or a backend the server lacks, harness.availability), one
that could not run for another reason ("not tested"), and one that needs an optional tool of the
harness's own that this host lacks ("not tested here": wrk for the load generator's cross-check). The
certification gate ignores the first, lists the second per model (blocking only in strict mode), judges
the third against its profile, and lists the fourth without letting it block: it checks the harness,
not the repository, and says how to install what is missing."""

from __future__ import annotations

from typing import NoReturn

import pytest

NOT_APPLICABLE = "not applicable: "
NOT_TESTED_HERE = "not tested here, because "
NOT_SERVABLE_HERE = "not tested on this host, because "
# A repository built not to batch (harness.load.batching.repository_batches): its batching checks do not
# concern it; the verdict says so, and only a profile that requires batching (require_batching) refuses it.
NOT_BATCHING = NOT_APPLICABLE + "the repository does not use dynamic batching"
# A model whose backend the embedded server lacks, served by the harness's adapter (harness.adapters):
# every check of it, and the verdict, say so; they judge the model's own file, not that backend.
SERVED_BY_ADAPTER = "served through the ONNX Runtime adapter; Triton's onnxruntime backend itself not exercised"


def not_applicable(reason: str) -> NoReturn:
    pytest.skip(NOT_APPLICABLE + reason)


def optional_tool_missing(reason: str) -> NoReturn:
    """`reason` names the tool and how to get it, e.g. "wrk is not installed (apt-get install wrk)"."""
    pytest.skip(NOT_TESTED_HERE + reason)


def not_servable_here(reason: str) -> NoReturn:
    """`reason` names the model, what it needs and the way out (harness.availability.reason)."""
    pytest.skip(NOT_SERVABLE_HERE + reason)
