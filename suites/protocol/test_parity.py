"""The same inputs give bit-identical outputs over HTTP (JSON and binary tensor data), gRPC and
system shared memory: a client must not get other detections for choosing another protocol."""

from __future__ import annotations

import pytest

from harness.protocol import parity
from harness.protocol.models import RequestTooLarge, check_json_response, good_array
from harness.verdicts import not_applicable

REFERENCE = "grpc"


@pytest.mark.parametrize("way", [w for w in parity.WAYS if w != REFERENCE])
def test_outputs_identical_across_protocols(way, triton_server, models_by_role, record_property):
    if way == "grpc_system_shm" and triton_server.kind == "container":
        pytest.skip("container mode: the container has its own /dev/shm (no shared IPC namespace), "
                    "so the server cannot map the client's system shared memory")
    views = models_by_role["tensor"] + models_by_role["image"]
    if not views:
        pytest.skip("no tensor or image model served")
    problems, too_large, judged = [], [], 0
    for view in views:
        batch = min(2, view.max_batch_size) if view.batched else 1
        try:
            array = good_array(view, batch=batch, seed=7, json=way == "http_json" and view.input.datatype != "BYTES")
            if way == "http_json":  # the outputs come back as JSON text too
                check_json_response(view, batch)
        except RequestTooLarge as error:  # not sent: the request bound says how big it would be
            too_large.append(error.line)
            continue
        judged += 1
        reference = parity.infer(REFERENCE, triton_server.endpoints, view, array)
        again = parity.infer(REFERENCE, triton_server.endpoints, view, array)
        problems += [f"{view.name}: not deterministic: {d}" for d in parity.differences(REFERENCE, reference, REFERENCE + " again", again)]
        try:
            outputs = parity.infer(way, triton_server.endpoints, view, array)
        except parity.SharedMemoryUnavailable as error:
            pytest.skip(str(error))
        problems += [f"{view.name}: {d}" for d in parity.differences(REFERENCE, reference, way, outputs)]
    if too_large:
        record_property("not_applicable", too_large)
    if not judged:
        not_applicable(f"{way}: " + "; ".join(too_large))
    assert not problems, "\n".join(problems) + (("\nnot sent: " + "; ".join(too_large)) if too_large else "")
