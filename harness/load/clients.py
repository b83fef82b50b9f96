"""The system under test, seen by the load engine through two calls (MLPerf's SUT interface):
`issue()` sends one request and returns when it completed (raising on an error), `close()` ends it.
A ClientSpec is picklable so each worker process builds its own client on its own event loop."""

from __future__ import annotations

import abc
import asyncio
from dataclasses import dataclass

from harness.load.payload import Payload


class LoadClient(abc.ABC):
    @abc.abstractmethod
    async def issue(self) -> None:
        """One inference; returns at completion, raises when the server answered with an error."""

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class ClientSpec:
    protocol: str  # "grpc" | "http" | "null"
    url: str
    payload: Payload | None = None
    timeout_s: float = 60.0

    shared_memory: bool = False  # grpc: tensors through Triton's system shared memory (client and server on one host)

    def build(self, concurrency: int = 1) -> LoadClient:
        if self.protocol == "grpc" and self.shared_memory:
            return SharedMemoryGrpcClient(self.url, self.payload, self.timeout_s)
        if self.protocol == "grpc":
            return GrpcClient(self.url, self.payload, self.timeout_s)
        if self.protocol == "http":
            return HttpClient(self.url, self.payload, self.timeout_s, concurrency)
        if self.protocol == "null":
            return NullClient()
        raise ValueError(f"unknown protocol {self.protocol!r} (grpc, http, null)")


class GrpcClient(LoadClient):
    """gRPC ModelInfer with the request serialised once: tritonclient's ModelInferRequest (service_pb2) built
    from the payload, then sent as the same bytes every time on a grpc.aio channel. Per request the client
    runs the RPC and nothing else (no protobuf built, no reply decoded: Triton answers an error with a
    non-OK status, which raises), so at 10k requests/s the generator is not the wall."""

    METHOD = "/inference.GRPCInferenceService/ModelInfer"

    def __init__(self, url: str, payload: Payload, timeout_s: float, region: str | None = None):
        import grpc

        self._channel = grpc.aio.insecure_channel(url, options=[("grpc.max_send_message_length", -1),
                                                                ("grpc.max_receive_message_length", -1)])
        self._infer = self._channel.unary_unary(self.METHOD)  # no serializers: bytes out, bytes back
        self._body = infer_request(payload, region).SerializeToString()
        self._timeout = timeout_s
        self._rpc_error = grpc.aio.AioRpcError

    async def issue(self) -> None:
        try:
            await self._infer(self._body, timeout=self._timeout)
        except self._rpc_error as error:
            raise RuntimeError(f"[{error.code().name}] {error.details()}") from None

    async def close(self) -> None:
        await self._channel.close()


def infer_request(payload: Payload, region: str | None = None):
    """The payload as a ModelInferRequest: binary tensors in raw_input_contents, as tritonclient sends them,
    or, with `region` (a registered system shared-memory region holding the non-BYTES tensors back to back,
    SharedMemoryGrpcClient), those tensors by offset into it."""
    import numpy as np
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=payload.model)
    offset = 0
    for tensor in payload.tensors:
        entry = request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if tensor.datatype == "BYTES":
            request.raw_input_contents.append(serialize_byte_tensor(tensor.array).item())
        elif region is not None:
            entry.parameters["shared_memory_region"].string_param = region
            entry.parameters["shared_memory_byte_size"].int64_param = tensor.array.nbytes
            entry.parameters["shared_memory_offset"].int64_param = offset
            offset += tensor.array.nbytes
        else:
            request.raw_input_contents.append(np.ascontiguousarray(tensor.array).tobytes())
    for name in payload.outputs:
        request.outputs.add(name=name)
    return request


UNREGISTER_ATTEMPTS = 100  # x 0.1 s: requests the load left outstanding hold a region until they finish


class SharedMemoryGrpcClient(GrpcClient):
    """perf_analyzer's `--shared-memory system`: the input tensors are written once into a POSIX shared-memory
    region registered with the server, and each request names it instead of carrying the bytes — a raw
    [N, 3, 640, 640] FP32 tensor is 4.9 MB a request that the wire would copy twice. Needs the server on
    this host (the process launcher); each load process registers a region of its own."""

    def __init__(self, url: str, payload: Payload, timeout_s: float):
        import os
        import uuid

        import numpy as np
        import tritonclient.grpc as grpcclient
        import tritonclient.utils.shared_memory as shm

        arrays = [np.ascontiguousarray(t.array) for t in payload.tensors if t.datatype != "BYTES"]
        size = sum(a.nbytes for a in arrays)
        self._name = f"yts-load-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._shm = shm
        self._region = shm.create_shared_memory_region(self._name, f"/{self._name}", size)
        self._control = grpcclient.InferenceServerClient(url)
        try:
            shm.set_shared_memory_region(self._region, arrays)
            self._control.register_system_shared_memory(self._name, f"/{self._name}", size)
        except BaseException:  # nothing is left behind by a client that never ran
            self._control.close()
            shm.destroy_shared_memory_region(self._region)
            raise
        super().__init__(url, payload, timeout_s, region=self._name)

    async def close(self) -> None:
        """Unregister once the server is done with the region: requests the load left outstanding still
        hold it ("currently in use") for as long as they run."""
        from tritonclient.utils import InferenceServerException

        await super().close()
        try:
            for attempt in range(UNREGISTER_ATTEMPTS):
                try:
                    self._control.unregister_system_shared_memory(self._name)
                    break
                except InferenceServerException:
                    if attempt == UNREGISTER_ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(0.1)
        finally:
            self._control.close()
            self._shm.destroy_shared_memory_region(self._region)



class HttpClient(LoadClient):
    """tritonclient.http.aio (aiohttp) with the binary tensor extension, one connection per
    outstanding request: the same bytes harness.load.wrk posts."""

    def __init__(self, url: str, payload: Payload, timeout_s: float, concurrency: int):
        import tritonclient.http as httpclient
        import tritonclient.http.aio as httpaio

        self._client = httpaio.InferenceServerClient(url, conn_limit=max(1, concurrency), conn_timeout=timeout_s)
        self._model = payload.model
        self._inputs = []
        for tensor in payload.tensors:
            infer_input = httpclient.InferInput(tensor.name, tensor.shape, tensor.datatype)
            infer_input.set_data_from_numpy(tensor.array, binary_data=True)
            self._inputs.append(infer_input)
        self._outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in payload.outputs] or None

    async def issue(self) -> None:
        await self._client.infer(self._model, self._inputs, outputs=self._outputs)

    async def close(self) -> None:
        await self._client.close()


class NullClient(LoadClient):
    """MLPerf's do-nothing system: completes at once, so a run measures the engine's own ceiling."""

    async def issue(self) -> None:
        await asyncio.sleep(0)
