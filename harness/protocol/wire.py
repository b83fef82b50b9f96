"""Requests at the wire: one request description, sent as Triton's HTTP/REST (JSON header + binary
tensor data) or gRPC (raw_input_contents) message *without* client-side validation, so a check can
send exactly the malformed request it means to (a byte size that does not match the shape, an
unknown input) and see what the server itself answers."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import grpc
import numpy as np
import requests
from tritonclient.grpc import InferResult as GrpcResult
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.http import InferResult as HttpResult


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: bytes  # exactly what goes on the wire (BYTES: 4-byte length-prefixed elements)

    @classmethod
    def of(cls, name: str, array: np.ndarray, datatype: str | None = None) -> Tensor:
        from tritonclient.utils import np_to_triton_dtype

        array = np.asarray(array)
        if array.dtype == np.object_:
            data = b"".join(struct.pack("<I", len(item)) + bytes(item) for item in array.reshape(-1))
            return cls(name, datatype or "BYTES", tuple(array.shape), data)
        return cls(name, datatype or np_to_triton_dtype(array.dtype), tuple(array.shape), array.tobytes())


def bytes_tensor(name: str, items: list[bytes]) -> Tensor:
    """A [len(items), 1] BYTES tensor, the end-to-end model's image input."""
    return Tensor.of(name, np.array(items, dtype=np.object_).reshape(-1, 1))


@dataclass(frozen=True)
class Request:
    model: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[str, ...] = ()
    parameters: dict = field(default_factory=dict)
    version: str = ""
    http_body: bytes | None = None  # HTTP only: send this body as it is (malformed JSON, count mismatch)


@dataclass
class Answer:
    """What came back: ok, the protocol's status (HTTP status code or gRPC status name), the error
    message, and the outputs of a success."""

    protocol: str
    ok: bool
    status: str
    message: str = ""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    datatypes: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        if self.ok:
            shapes = {name: list(value.shape) for name, value in self.outputs.items()}
            return f"{self.protocol} {self.status} ok, outputs {shapes}"
        return f"{self.protocol} {self.status}: {self.message}"


def send_http(endpoint: str, request: Request, timeout: float = 60.0) -> Answer:
    path = f"/v2/models/{request.model}" + (f"/versions/{request.version}" if request.version else "") + "/infer"
    headers = {}
    if request.http_body is not None:
        body = request.http_body
        headers["Content-Type"] = "application/json"
    else:
        header = {"inputs": [
            {"name": t.name, "datatype": t.datatype, "shape": list(t.shape), "parameters": {"binary_data_size": len(t.data)}}
            for t in request.inputs
        ]}
        if request.outputs:
            header["outputs"] = [{"name": name, "parameters": {"binary_data": True}} for name in request.outputs]
        if request.parameters:
            header["parameters"] = request.parameters
        encoded = json.dumps(header).encode()
        body = encoded + b"".join(t.data for t in request.inputs)
        headers["Inference-Header-Content-Length"] = str(len(encoded))
        headers["Content-Type"] = "application/octet-stream"
    response = requests.post(f"http://{endpoint}{path}", data=body, headers=headers, timeout=timeout)
    status = str(response.status_code)
    if response.status_code != 200:
        try:
            message = response.json().get("error", response.text)
        except ValueError:
            message = response.text
        return Answer("http", False, status, message)
    length = response.headers.get("Inference-Header-Content-Length")
    result = HttpResult.from_response_body(response.content, header_length=int(length) if length else None)
    outputs = result.get_response()["outputs"]
    return Answer("http", True, status, outputs={o["name"]: result.as_numpy(o["name"]) for o in outputs},
                  datatypes={o["name"]: o["datatype"] for o in outputs})


def _grpc_parameter(value) -> service_pb2.InferParameter:
    if isinstance(value, bool):
        return service_pb2.InferParameter(bool_param=value)
    if isinstance(value, int):
        return service_pb2.InferParameter(int64_param=value)
    if isinstance(value, float):
        return service_pb2.InferParameter(double_param=value)
    return service_pb2.InferParameter(string_param=str(value))


def send_grpc(endpoint: str, request: Request, timeout: float = 60.0) -> Answer:
    if request.http_body is not None:
        raise ValueError("http_body requests have no gRPC form")
    message = service_pb2.ModelInferRequest(model_name=request.model, model_version=request.version)
    for t in request.inputs:
        message.inputs.add(name=t.name, datatype=t.datatype, shape=list(t.shape))
        message.raw_input_contents.append(t.data)
    for name in request.outputs:
        message.outputs.add(name=name)
    for key, value in request.parameters.items():
        message.parameters[key].CopyFrom(_grpc_parameter(value))
    with grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", -1),
                                                  ("grpc.max_receive_message_length", -1)]) as channel:
        try:
            response = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(message, timeout=timeout)
        except grpc.RpcError as error:
            return Answer("grpc", False, error.code().name, error.details() or "")
    result = GrpcResult(response)
    return Answer("grpc", True, "OK", outputs={o.name: result.as_numpy(o.name) for o in response.outputs},
                  datatypes={o.name: o.datatype for o in response.outputs})


SENDERS = {"http": send_http, "grpc": send_grpc}


def send(protocol: str, endpoints, request: Request, timeout: float = 60.0) -> Answer:
    """protocol 'http' or 'grpc'; endpoints: a harness.servers.Endpoints."""
    return SENDERS[protocol](getattr(endpoints, protocol), request, timeout)
