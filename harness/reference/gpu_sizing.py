"""The GPU reference build sized from the card it runs on: how many KIND_GPU instances of yolo_raw and
yolo_e2e fit, from what one instance measurably costs on this card, so that the largest server the suites
start leaves the operations suite's 20 % free (an 80 GB H100 and a 141 GB H200 alike).

One instance's cost is measured once per card, engine and graph sizes (cached as JSON): a child process
opens the FP16 engine, captures the CUDA graphs an instance captures, allocates the device letterbox's
buffers, and holds them while the parent reads the card's used memory (`nvidia-smi`, so the CUDA context
and cuDNN's handles count); its allocator's high-water mark gives the transient peak of capturing. A
model's instances load in parallel processes, so every yolo_e2e instance's peak counts at once.
Measured on an H100 80GB: 1.87 GiB an instance, 2.60 GiB while capturing (benchmarks/results/README.md)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import paths

MIN_FREE = 0.2  # suites/operations: >= 20 % of the card free with everything loaded
MAX_RAW, MAX_E2E = 2, 8  # what the build asks for where memory is no limit (benchmarks/results/README.md)
MIB = 1 << 20


@dataclass(frozen=True)
class InstanceCost:
    steady: int  # bytes an instance holds once loaded: context, weights, graph pool, static buffers
    peak: int  # bytes while it captures (warm-up activations, workspaces), before they are handed back


@dataclass(frozen=True)
class Sizing:
    gpu: str
    total: int
    used_before: int
    cost: InstanceCost
    raw_instances: int
    e2e_instances: int
    largest_server: int  # bytes the largest server of the suites holds (batching: each model beside its unbatched twin)

    def record(self) -> dict:
        gib = 1 << 30
        return {"gpu": self.gpu, "total_gib": round(self.total / gib, 2), "used_before_gib": round(self.used_before / gib, 2),
                "instance_steady_gib": round(self.cost.steady / gib, 3), "instance_peak_gib": round(self.cost.peak / gib, 3),
                "raw_instances": self.raw_instances, "e2e_instances": self.e2e_instances,
                "largest_server_gib": round(self.largest_server / gib, 2),
                "free_with_largest_server": round(1 - (self.used_before + self.largest_server) / self.total, 3),
                "rule": f"largest server + its yolo_e2e instances' capture peaks <= {1 - MIN_FREE:.0%} of the card, less what was in use"}


def largest_server(raw: int, e2e: int, cost: InstanceCost) -> int:
    """Bytes of the largest server the suites start: the batching suite's, where yolo_raw (two versions
    live) and yolo_e2e each sit beside an unbatched twin, plus the two pre/post-processing steps."""
    return (2 * 2 * raw + 2 * e2e + 2) * cost.steady


def size(total: int, used_before: int, cost: InstanceCost, gpu: str = "") -> Sizing:
    """The most instances (up to MAX_RAW / MAX_E2E, yolo_e2e first cut) that keep the largest server, and
    the transient of its yolo_e2e instances capturing at once, within the card less MIN_FREE; ValueError when
    not even one of each fits."""
    budget = (1 - MIN_FREE) * total - used_before
    for raw in range(MAX_RAW, 0, -1):
        for e2e in range(MAX_E2E, 0, -1):
            if largest_server(raw, e2e, cost) + e2e * (cost.peak - cost.steady) <= budget:
                return Sizing(gpu, total, used_before, cost, raw, e2e, largest_server(raw, e2e, cost))
    raise ValueError(f"{gpu or 'this GPU'} ({total / (1 << 30):.1f} GiB, {used_before / (1 << 30):.1f} GiB in use) cannot "
                     f"hold the GPU reference build: one instance costs {cost.steady / (1 << 30):.2f} GiB "
                     f"({cost.peak / (1 << 30):.2f} GiB while capturing); use --device cpu")


def card(index: int = 0) -> tuple[str, int, int]:
    """(name, total bytes, used bytes) of GPU `index` as the driver reports it."""
    out = subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=name,memory.total,memory.used",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30, check=True).stdout
    name, total, used = (part.strip() for part in out.splitlines()[0].split(","))
    return name, int(total) * MIB, int(used) * MIB


def measure(onnx_path: Path, imgsz: int, graph_batches: list[int], max_batch: int) -> InstanceCost:
    """One instance's cost on GPU 0, measured in a child process (cached per card, engine and sizes)."""
    import torch  # noqa: PLC0415 -- only GPU builds get here

    name, _, _ = card()
    key = hashlib.sha256(json.dumps([name, torch.__version__, hashlib.sha256(Path(onnx_path).read_bytes()).hexdigest(),
                                     imgsz, sorted(graph_batches), max_batch, 2]).encode()).hexdigest()[:16]
    cached = paths.cache_dir("gpu-sizing") / f"{key}.json"
    if cached.exists():
        return InstanceCost(**json.loads(cached.read_text()))
    _, _, before = card()
    child = subprocess.Popen([sys.executable, "-m", "harness.reference.gpu_sizing", str(onnx_path), str(imgsz),
                              ",".join(map(str, graph_batches)), str(max_batch)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"the GPU sizing probe exited ({child.wait()}) before measuring; its error is above")
        allocator = json.loads(line)
        _, _, holding = card()
    finally:
        child.kill()
        child.wait()
    steady = max(holding - before, allocator["reserved"])
    cost = InstanceCost(steady=steady, peak=steady - allocator["reserved"] + allocator["max_reserved"])
    cached.write_text(json.dumps(asdict(cost)))
    return cost


def _probe(onnx_path: str, imgsz: int, graph_batches: list[int], max_batch: int) -> None:
    """Child: what the costlier of the two instances holds on the GPU — yolo_raw's graph sizes (the build
    passes all nine) with yolo_e2e's letterbox buffers: one figure for both, an upper bound for each — held
    until the parent has read the card."""
    import torch  # noqa: PLC0415

    from harness.engines.torch_engine import TorchEngine
    from harness.vision.gpu.letterbox import DeviceLetterbox

    engine = TorchEngine(onnx_path, device="cuda:0", precision="fp16")
    letterbox = DeviceLetterbox(imgsz, max_batch, engine.device, dtype=engine.compute_dtype)
    engine.capture(graph_batches, letterbox.target)
    torch.cuda.synchronize()
    print(json.dumps({"reserved": torch.cuda.memory_reserved(), "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    _probe(sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split(",")], int(sys.argv[4]))
