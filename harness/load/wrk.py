"""An independent C load generator for the fidelity check: Debian's `wrk` posting exactly the bytes
tritonclient's HTTP client sends (generate_request_body), closed loop at one request per
connection. Our generator's saturated throughput divided by wrk's is the fidelity ratio."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.load.payload import Payload

SCRIPT = Path(__file__).with_name("triton_infer.lua")


class WrkUnavailable(RuntimeError):
    pass


@dataclass
class WrkResult:
    requests: int
    duration_s: float
    throughput: float  # successful requests per second
    errors: int
    latency_ms: dict[str, float]
    command: list[str]

    def to_dict(self) -> dict:
        return asdict(self)


def wrk_binary() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise WrkUnavailable("wrk is not installed (Debian: apt-get install wrk)")
    return path


def request_body(payload: Payload) -> tuple[bytes, int]:
    """(body, JSON header length) as tritonclient.http would post them, binary tensors and outputs."""
    import tritonclient.http as httpclient

    inputs = []
    for tensor in payload.tensors:
        infer_input = httpclient.InferInput(tensor.name, tensor.shape, tensor.datatype)
        infer_input.set_data_from_numpy(tensor.array, binary_data=True)
        inputs.append(infer_input)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in payload.outputs] or None
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs)
    return bytes(body), int(json_size if json_size is not None else len(body))


def run_wrk(http_url: str, payload: Payload, connections: int, duration_s: float, threads: int = 1,
            timeout_s: float = 30.0) -> WrkResult:
    """POST /v2/models/MODEL/infer for duration_s with `connections` always busy."""
    body, header_length = request_body(payload)
    with tempfile.NamedTemporaryFile(suffix=".bin") as body_file:
        body_file.write(body)
        body_file.flush()
        url = f"http://{http_url.removeprefix('http://')}/v2/models/{payload.model}/infer"
        command = [wrk_binary(), "-t", str(max(1, min(threads, connections))), "-c", str(connections),
                   "-d", f"{max(1, round(duration_s))}s", "--timeout", f"{timeout_s:g}s", "-s", str(SCRIPT),
                   url, "--", body_file.name, str(header_length)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=duration_s + timeout_s + 30)
    line = next((l for l in done.stdout.splitlines() if l.startswith("YTS_WRK ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed (rc {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    data = json.loads(line.removeprefix("YTS_WRK "))
    errors = sum(data[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors", "timeouts"))
    seconds = data["duration_us"] / 1e6
    ok = max(0, data["requests"] - data["status_errors"])
    return WrkResult(
        requests=data["requests"], duration_s=seconds, throughput=ok / seconds if seconds else 0.0, errors=errors,
        latency_ms={"avg": data["mean_us"] / 1e3, "p50": data["p50_us"] / 1e3, "p95": data["p95_us"] / 1e3,
                    "p99": data["p99_us"] / 1e3},
        command=command[:-2] + ["BODY_FILE", str(header_length)],
    )


def fidelity_ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")
