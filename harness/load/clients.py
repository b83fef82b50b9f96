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

    def build(self, concurrency: int = 1) -> LoadClient:
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

    def __init__(self, url: str, payload: Payload, timeout_s: float):
        import grpc

        self._channel = grpc.aio.insecure_channel(url, options=[("grpc.max_send_message_length", -1),
                                                                ("grpc.max_receive_message_length", -1)])
        self._infer = self._channel.unary_unary(self.METHOD)  # no serializers: bytes out, bytes back
        self._body = infer_request(payload).SerializeToString()
        self._timeout = timeout_s
        self._rpc_error = grpc.aio.AioRpcError

    async def issue(self) -> None:
        try:
            await self._infer(self._body, timeout=self._timeout)
        except self._rpc_error as error:
            raise RuntimeError(f"[{error.code().name}] {error.details()}") from None

    async def close(self) -> None:
        await self._channel.close()


def infer_request(payload: Payload):
    """The payload as a ModelInferRequest: binary tensors in raw_input_contents, as tritonclient sends them."""
    import numpy as np
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=payload.model)
    for tensor in payload.tensors:
        request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if tensor.datatype == "BYTES":
            request.raw_input_contents.append(serialize_byte_tensor(tensor.array).item())
        else:
            request.raw_input_contents.append(np.ascontiguousarray(tensor.array).tobytes())
    for name in payload.outputs:
        request.outputs.add(name=name)
    return request


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
