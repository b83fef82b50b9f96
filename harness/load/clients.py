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
    """tritonclient.grpc.aio; the InferInput objects are built once and reused for every request."""

    def __init__(self, url: str, payload: Payload, timeout_s: float):
        import tritonclient.grpc as grpcclient
        import tritonclient.grpc.aio as grpcaio

        self._client = grpcaio.InferenceServerClient(url)
        self._model = payload.model
        self._inputs = []
        for tensor in payload.tensors:
            infer_input = grpcclient.InferInput(tensor.name, tensor.shape, tensor.datatype)
            infer_input.set_data_from_numpy(tensor.array)
            self._inputs.append(infer_input)
        self._outputs = [grpcclient.InferRequestedOutput(name) for name in payload.outputs] or None
        self._timeout = timeout_s

    async def issue(self) -> None:
        await self._client.infer(self._model, self._inputs, outputs=self._outputs, client_timeout=self._timeout)

    async def close(self) -> None:
        await self._client.close()


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
