"""The same inputs give bit-identical outputs over HTTP (JSON and binary tensor data), gRPC and
system shared memory: a client must not get other detections for choosing another protocol."""

from __future__ import annotations

import pytest

from harness.protocol import parity
from harness.protocol.models import good_array

REFERENCE = "grpc"


@pytest.mark.parametrize("way", [w for w in parity.WAYS if w != REFERENCE])
def test_outputs_identical_across_protocols(way, triton_server, models_by_role):
    if way == "grpc_system_shm" and triton_server.kind == "container":
        pytest.skip("container mode: the container has its own /dev/shm (no shared IPC namespace), "
                    "so the server cannot map the client's system shared memory")
    views = models_by_role["tensor"] + models_by_role["image"]
    if not views:
        pytest.skip("no tensor or image model served")
    problems = []
    for view in views:
        array = good_array(view, batch=min(2, view.max_batch_size) if view.batched else 1, seed=7)
        reference = parity.infer(REFERENCE, triton_server.endpoints, view, array)
        again = parity.infer(REFERENCE, triton_server.endpoints, view, array)
        problems += [f"{view.name}: not deterministic: {d}" for d in parity.differences(REFERENCE, reference, REFERENCE + " again", again)]
        try:
            outputs = parity.infer(way, triton_server.endpoints, view, array)
        except parity.SharedMemoryUnavailable as error:
            pytest.skip(str(error))
        problems += [f"{view.name}: {d}" for d in parity.differences(REFERENCE, reference, way, outputs)]
    assert not problems, "\n".join(problems)
