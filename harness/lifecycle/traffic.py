"""Continuous traffic that records, per response, which version answered, ok or error, and when.

Separate from harness.load on purpose: a load generator measures throughput and latency and may
aggregate; a lifecycle verdict needs the opposite — every response kept, none dropped, with the
version Triton says served it (`model_version` of the infer result), so a single failed or
wrong-version request during a switch is visible. K threads, each with its own gRPC client, send
one request after another until stopped (after a failed one, RETRY_AFTER_S later)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

FLOWING = 2  # answers per client that show the traffic flows, before a scenario acts
# a client whose request failed sends its next one after this pause, as a client retrying with back-off does:
# every failure is kept, but a model unavailable for seconds is not answered by a retry storm of full-size
# requests (16 clients re-sending 4.9 MB tensors took ~30 % of the stress test's 2 cores: 38.6 s -> 27.3 s)
RETRY_AFTER_S = 0.25


@dataclass(frozen=True)
class Response:
    client: int
    sent: float  # time.monotonic() when the request left
    done: float  # when its answer (or error) came back
    version: str  # the version that served it; "" on error
    requested: str  # the version asked for; "" = the server's choice (highest ready)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass
class Record:
    """Everything one traffic run saw, plus labelled instants (e.g. "load posted") to judge against."""

    responses: list[Response] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> list[Response]:
        return [r for r in self.responses if not r.ok]

    def per_version(self) -> Counter:
        return Counter(r.version for r in self.responses if r.ok)

    def counts(self) -> dict[str, int]:
        counts = {"sent": len(self.responses), "failed": len(self.failed)}
        counts.update({f"v{v}": n for v, n in sorted(self.per_version().items(), key=lambda kv: int(kv[0]))})
        return counts

    def between(self, start: float, end: float = float("inf")) -> list[Response]:
        return [r for r in self.responses if r.sent >= start and r.done <= end]


def request_inputs(config, layout=None, batch: int = 1, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Inputs that fit a ModelConfig: its dims (-1 → 1), batched when max_batch_size > 0, random
    values of its data type. The image input its layout (harness.repository.layouts) reads gets an image
    of the evaluation set in the form it takes — encoded bytes, their base64, decoded HWC pixels — and
    any TYPE_STRING input encoded bytes, never numbers; inputs its owner declared ([inputs.NAME],
    harness.repository.extra_inputs) the values of that image."""
    import base64

    from harness.repository.config import dtype_name
    from harness.repository.layouts import BASE64, PIXELS
    from tritonclient.utils import triton_to_np_dtype

    rng = np.random.default_rng(seed)
    image = layout.input if layout is not None and layout.input is not None else None
    extras = _extra_values(config, layout)
    inputs = []
    for tensor in config.input:
        dtype = dtype_name(tensor.data_type)
        kind = image.kind if image is not None and image.name == tensor.name else None
        lead = [batch] if config.max_batch_size > 0 else []
        if tensor.name in extras:  # declared in [inputs.NAME]: the values of the image sent
            inputs.append((tensor.name, np.broadcast_to(extras[tensor.name], lead + list(extras[tensor.name].shape)).copy()))
            continue
        if kind == PIXELS and len(tensor.dims) == 3:  # HWC: the image at the declared size, else its own
            pixels = _decoded_image(tuple(tensor.dims[:2]))
            inputs.append((tensor.name, np.broadcast_to(pixels, lead + list(pixels.shape)).copy()))
            continue
        shape = lead + [1 if d < 0 else d for d in tensor.dims]
        if kind == BASE64:
            inputs.append((tensor.name, np.full(shape, base64.b64encode(_encoded_image()), dtype=np.object_)))
        elif dtype in ("STRING", "BYTES"):
            inputs.append((tensor.name, np.full(shape, _encoded_image(), dtype=np.object_)))
        else:
            values = rng.random(shape) if dtype.startswith("FP") else rng.integers(0, 2, shape)
            inputs.append((tensor.name, values.astype(triton_to_np_dtype(dtype))))
    return inputs


def _extra_values(config, layout) -> dict[str, np.ndarray]:
    """The inputs beside the image its owner declared ([inputs.NAME]), for the image every request sends."""
    if layout is None or not layout.extras:
        return {}
    from harness.vision.served import DEFAULT_IMGSZ, model_imgsz

    from harness.repository.layouts import PIXELS

    dims = layout.input.port.dims if layout.input is not None and layout.input.kind == PIXELS else ()
    source = tuple(dims[:2]) if len(dims) == 3 and min(dims[:2]) > 0 else _decoded_image().shape[:2]  # as sent
    return layout.extra_values(source, model_imgsz(config, {}) or DEFAULT_IMGSZ)


def _encoded_image() -> bytes:
    from harness.engines.artifacts import EVAL_SET

    return next(iter(sorted((EVAL_SET / "images").rglob("*.jpg")))).read_bytes()


def _decoded_image(size=(-1, -1)) -> np.ndarray:
    """The same image decoded, [H, W, 3] RGB UINT8, resized to `size` (H, W) where it is fixed."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(_encoded_image())).convert("RGB")
    if min(size) > 0:
        image = image.resize((int(size[1]), int(size[0])))
    return np.asarray(image)


class Traffic:
    """`with Traffic(url, model, inputs) as traffic: ...; traffic.mark("load posted")` — on exit,
    `traffic.record` holds every response. `version` pins requests to one version."""

    def __init__(self, grpc_url: str, model: str, inputs, clients: int = 16, version: str = "",
                 timeout_s: float = 30.0):
        self.grpc_url = grpc_url
        self.model = model
        self.inputs = inputs
        self.clients = clients
        self.version = version
        self.timeout_s = timeout_s
        self.record = Record()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def mark(self, label: str) -> float:
        now = time.monotonic()
        self.record.marks[label] = now
        return now

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        """Block until at least `count` responses came back (the traffic is really flowing)."""
        deadline = time.monotonic() + timeout
        while len(self.record.responses) < count and time.monotonic() < deadline:
            time.sleep(0.01)

    def wait_flowing(self, timeout: float = 60.0) -> None:
        """Block until every client could have had FLOWING answers: the traffic is in its steady loop."""
        self.wait_for(FLOWING * self.clients, timeout)

    def wait_until(self, condition, timeout: float) -> None:
        """Block until condition(record) holds for what has come back so far, or the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = condition(self.record)
            if done:
                return
            time.sleep(0.05)

    def _client(self, index: int) -> None:
        import tritonclient.grpc as grpcclient

        client = grpcclient.InferenceServerClient(self.grpc_url)
        tensors = []
        for name, array in self.inputs:
            tensor = grpcclient.InferInput(name, list(array.shape), _dtype(array))
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        try:
            while not self._stop.is_set():
                sent = time.monotonic()
                try:
                    result = client.infer(self.model, tensors, model_version=self.version,
                                          client_timeout=self.timeout_s)
                    response = Response(index, sent, time.monotonic(), result.get_response().model_version,
                                        self.version)
                except Exception as error:  # every failure is data, kept with Triton's message
                    response = Response(index, sent, time.monotonic(), "", self.version,
                                        str(error).strip() or type(error).__name__)
                # kept at once, not buffered per client: wait_for/wait_until count what has come back
                with self._lock:
                    self.record.responses.append(response)
                if response.error:
                    self._stop.wait(RETRY_AFTER_S)
        finally:
            client.close()

    def start(self) -> Traffic:
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True, name=f"traffic-{i}")
                         for i in range(self.clients)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> Record:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.timeout_s + 5)
        self.record.responses.sort(key=lambda r: r.sent)
        return self.record

    def __enter__(self) -> Traffic:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _dtype(array: np.ndarray) -> str:
    from tritonclient.utils import np_to_triton_dtype

    return "BYTES" if array.dtype == np.object_ else np_to_triton_dtype(array.dtype)
