"""One inference, every way a client can send it: HTTP with JSON tensors, HTTP with binary tensor
data, gRPC, and system shared memory for the input (over gRPC). The same server must give identical
outputs every way; `differences` says where they are not (bit for bit: dtype, shape, values)."""

from __future__ import annotations

import uuid

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from harness.protocol.models import ModelView

WAYS = ("http_json", "http_binary", "grpc", "grpc_system_shm")


class SharedMemoryUnavailable(RuntimeError):
    """The server cannot map the client's shared memory (another host, or a container without shared IPC)."""


def _extras(protocol, view: ModelView, array: np.ndarray, **options) -> list:
    """The declared inputs beside the image (ModelView.extra_arrays), sent the way under test (shared memory
    carries the image alone)."""
    from tritonclient.utils import np_to_triton_dtype

    batch = int(array.shape[0]) if view.batched else 1
    out = []
    for name, value in view.extra_arrays(batch).items():
        out.append(protocol.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype)))
        out[-1].set_data_from_numpy(value, **options)
    return out


def _http(endpoint: str, view: ModelView, array: np.ndarray, binary: bool, parameters: dict) -> dict:
    client = httpclient.InferenceServerClient(endpoint)
    try:
        tensor = httpclient.InferInput(view.input.name, list(array.shape), view.input.datatype)
        # BYTES holding encoded images are not UTF-8: JSON cannot carry them, so they go binary either way.
        tensor.set_data_from_numpy(array, binary_data=binary or view.input.datatype == "BYTES")
        outputs = [httpclient.InferRequestedOutput(o.name, binary_data=binary) for o in view.outputs]
        result = client.infer(view.name, [tensor, *_extras(httpclient, view, array, binary_data=binary)], outputs=outputs,
                              parameters=parameters or None)
        return {o.name: result.as_numpy(o.name) for o in view.outputs}
    finally:
        client.close()


def _grpc(endpoint: str, view: ModelView, array: np.ndarray, parameters: dict, use_shm: bool) -> dict:
    client = grpcclient.InferenceServerClient(endpoint)
    tensor = grpcclient.InferInput(view.input.name, list(array.shape), view.input.datatype)
    region = handle = None
    try:
        if use_shm:
            from tritonclient.utils import serialize_byte_tensor

            payload = serialize_byte_tensor(array) if array.dtype == np.object_ else array
            size = len(payload.item()) if array.dtype == np.object_ else array.nbytes
            region = f"yts_{uuid.uuid4().hex[:12]}"
            handle = shm.create_shared_memory_region(region, f"/{region}", size)
            shm.set_shared_memory_region(handle, [payload])
            try:
                client.register_system_shared_memory(region, f"/{region}", size)
            except InferenceServerException as error:
                raise SharedMemoryUnavailable(f"the server cannot map system shared memory /{region}: {error}") from error
            tensor.set_shared_memory(region, size)
        else:
            tensor.set_data_from_numpy(array)
        result = client.infer(view.name, [tensor, *_extras(grpcclient, view, array)], parameters=parameters or None)
        return {o.name: result.as_numpy(o.name) for o in view.outputs}
    finally:
        if region is not None:
            try:
                client.unregister_system_shared_memory(region)
            except InferenceServerException:
                pass
            shm.destroy_shared_memory_region(handle)
        client.close()


def infer(way: str, endpoints, view: ModelView, array: np.ndarray, parameters: dict | None = None) -> dict:
    parameters = parameters or {}
    if way == "http_json":
        return _http(endpoints.http, view, array, binary=False, parameters=parameters)
    if way == "http_binary":
        return _http(endpoints.http, view, array, binary=True, parameters=parameters)
    if way == "grpc":
        return _grpc(endpoints.grpc, view, array, parameters, use_shm=False)
    if way == "grpc_system_shm":
        return _grpc(endpoints.grpc, view, array, parameters, use_shm=True)
    raise ValueError(f"unknown way {way!r}; known: {WAYS}")


def differences(reference_way: str, reference: dict, way: str, outputs: dict) -> list[str]:
    """Bitwise comparison (NaN equals NaN); each difference says which output, how and where."""
    found = []
    for name, expected in reference.items():
        got = outputs.get(name)
        if got is None:
            found.append(f"{name}: missing over {way}")
            continue
        if got.dtype != expected.dtype or got.shape != expected.shape:
            found.append(f"{name}: {reference_way} gives {expected.dtype}{list(expected.shape)}, {way} gives {got.dtype}{list(got.shape)}")
            continue
        if expected.dtype == np.object_:
            equal = expected.reshape(-1).tolist() == got.reshape(-1).tolist()
            if not equal:
                found.append(f"{name}: BYTES values differ between {reference_way} and {way}")
            continue
        same = np.array_equal(expected, got, equal_nan=expected.dtype.kind == "f")
        if not same:
            diff = np.abs(expected.astype(np.float64) - got.astype(np.float64))
            where = np.unravel_index(np.nanargmax(diff), diff.shape)
            found.append(f"{name}: {reference_way} vs {way} differ in {int(np.sum(diff > 0))} of {diff.size} values, "
                         f"max |diff| {np.nanmax(diff):.6g} at {list(map(int, where))}")
    return found
