"""Memory headroom with the whole repository loaded and each model run once at its largest batch. On a GPU host, Triton's GPU metrics: free GPU
memory must stay above a fraction of the total. On a CPU host, the same rule on host memory: the RSS
of the server and every process it started (the Python backend stubs, one per model instance) against
a budget; each stub's RSS is charged to the model whose model.py it runs (its command line names it).
Per-model cost on either host: what the device's used memory drops by when the model is unloaded."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from harness.metrics.prometheus import Snapshot
from harness.servers import wait

UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_size(text: str) -> int:
    """'6GiB', '512MB', '1000000' -> bytes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in UNITS:
        raise ValueError(f"memory size {text!r}: a number with an optional unit (B, kB, MB, GB, KiB, MiB, GiB)")
    return int(float(match.group(1)) * UNITS[match.group(2).lower()])


def human(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@dataclass
class HostUsage:
    server_rss: int  # tritonserver itself
    per_model: dict[str, int] = field(default_factory=dict)  # model -> RSS of its stubs
    instances: dict[str, int] = field(default_factory=dict)  # model -> stub processes

    @property
    def total(self) -> int:
        return self.server_rss + sum(self.per_model.values())

    def lines(self) -> list[str]:
        ranked = sorted(self.per_model.items(), key=lambda kv: -kv[1])
        return [f"tritonserver {human(self.server_rss)}"] + [
            f"{model}: {human(rss)} in {self.instances[model]} stub process(es)" for model, rss in ranked]


def _model_of(cmdline: list[str], repository: Path) -> str:
    """A stub's first argument is its model.py path: <repository>/<model>/<version>/model.py."""
    for arg in cmdline[1:]:
        path = Path(arg)
        if path.name == "model.py" or path.suffix == ".py":
            try:
                return path.relative_to(repository).parts[0]
            except ValueError:
                return path.parent.parent.name
    return "other processes"


def run_each_at_max_batch(grpc_url: str, payloads, models: list[str]) -> list[str]:
    """One request per model at its largest batch (`payloads`: harness.load.RepositoryPayloads), so that what
    is measured is the working set: ONNX Runtime's arenas, TensorRT's and the stubs' buffers grow on first use
    (the CPU reference's yolo_raw stub holds ~130 MiB loaded, ~300 MiB once it ran a batch of 8 without the
    CPU arena). Returns a line per model that could not be run."""
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    from harness.load.clients import infer_request
    from harness.repository.sizing import RequestTooLarge

    configs = payloads.configs
    problems = []
    with grpc.insecure_channel(grpc_url, options=[("grpc.max_send_message_length", -1),
                                                  ("grpc.max_receive_message_length", -1)]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for model in (m for m in models if m in configs):  # a model without a config file: nothing to size
            batch = max(configs[model].max_batch_size, 1)
            try:
                stub.ModelInfer(infer_request(payloads(model, batch)), timeout=120)
            except RequestTooLarge as error:
                problems.append(f"{model}: not run at batch {batch} ({error})")
            except grpc.RpcError as error:
                problems.append(f"{model}: a batch of {batch} failed ({error.code().name}: {error.details()})")
    return problems


def stub_processes(server_pid: int, repository: Path):
    """(process, model) for every process the server started, alive when asked."""
    for child in psutil.Process(server_pid).children(recursive=True):
        try:
            yield child, _model_of(child.cmdline(), repository.resolve())
        except psutil.NoSuchProcess:
            continue


def host_usage(server_pid: int, repository: Path) -> HostUsage:
    usage = HostUsage(psutil.Process(server_pid).memory_info().rss)
    for child, model in stub_processes(server_pid, repository):
        try:
            rss = child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
        usage.per_model[model] = usage.per_model.get(model, 0) + rss
        usage.instances[model] = usage.instances.get(model, 0) + 1
    return usage


def host_budget(option: str | None, min_free: float) -> tuple[int, str]:
    """The budget and where it came from, for the verdict."""
    if option:
        return parse_size(option), f"--memory-budget {option}"
    total = psutil.virtual_memory().total
    return int(total * (1 - min_free)), f"host memory {human(total)} less {min_free:.0%} kept free"


def gpu_problems(snapshot: Snapshot, min_free: float) -> tuple[list[str], list[str]]:
    """(per-GPU lines, the GPUs short of headroom) from nv_gpu_memory_total_bytes / _used_bytes."""
    lines, short = [], []
    for (name, labels), total in sorted(snapshot.samples.items(), key=lambda kv: str(kv[0])):
        if name != "nv_gpu_memory_total_bytes" or not total:
            continue
        gpu = dict(labels).get("gpu_uuid", "gpu")
        used = snapshot.value("nv_gpu_memory_used_bytes", gpu_uuid=gpu)
        line = f"{gpu}: {human(used)} used of {human(total)}, {1 - used / total:.0%} free"
        lines.append(line)
        if 1 - used / total < min_free:
            short.append(line)
    return lines, short


def settled(used: Callable[[], float], settle_s: float, timeout_s: float = 30.0) -> float:
    """`used()` once it has stayed within 4 MiB (or 0.5 %) for `settle_s`: stubs exit, CUDA contexts and arenas
    are freed, and Triton's GPU metrics refresh every 2 s, all after the unload call has answered."""
    last, since, deadline = used(), time.monotonic(), time.monotonic() + timeout_s
    while time.monotonic() - since < settle_s and time.monotonic() < deadline:
        time.sleep(min(0.5, settle_s / 4))
        now = used()
        if abs(now - last) > max(4 * 2**20, 0.005 * last):
            last, since = now, time.monotonic()
    return last


def unload_costs(server, used: Callable[[], float], settle_s: float, timeout_s: float = 300.0) -> dict[str, int]:
    """Each READY model's memory (ensembles hold none of their own) as the drop in `used` when it is unloaded on
    `server` (a TritonServer in explicit model-control mode), the models unloaded one after another so that each
    reading settles once; then every model that was READY is loaded again (at once) and checked READY. The
    delta counts whatever the backend holds (TensorRT's engine and contexts, ONNX Runtime's arena, a stub's CUDA
    context and caching allocator), which no process attribution sees; what a backend shares between its models
    (an in-process backend's CUDA context) goes with the last of them. A model that does not unload or come back
    READY raises harness.servers.wait's error, naming it, with the server's load errors."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.endpoints.http, network_timeout=timeout_s,
                                              connection_timeout=timeout_s)
    costs = {}
    try:
        ready = sorted({entry["name"] for entry in client.get_model_repository_index() if entry.get("state") == "READY"})
        ensembles = {m for m in ready if client.get_model_config(m).get("platform") == "ensemble"}
        try:
            level = settled(used, settle_s)
            for model in (m for m in ready if m not in ensembles):
                client.unload_model(model)
                wait.ModelUnloaded(model, timeout=timeout_s).wait_for(server)
                now = settled(used, settle_s)
                costs[model], level = int(level - now), now
        finally:
            _load_again(server, [m for m in ready if m not in ensembles], timeout_s)
            _load_again(server, sorted(ensembles), timeout_s)  # Triton reloads most with their steps
    finally:
        client.close()
    return costs


def _load_again(server, models: list[str], timeout_s: float) -> None:
    """The models not READY now loaded side by side (wait.load)."""
    wait.load(server, wait.not_ready(server, models), timeout_s)
