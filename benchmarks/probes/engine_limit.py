"""The most the engine alone serves: TorchEngine on pre-batched device tensors (no transport, no Python
backend, no decode or NMS), images/s per batch size walked node by node ("interpreted"), through its shape
plan, as the CUDA graphs yolo_e2e replays, and with `--compile MODE` as torch.compile'd plans in CUDA graphs
(the compile time per batch size and the largest difference from eager); then the numpy-in/numpy-out path
yolo_raw's instances take; the convolutions' GFLOPs per image and the TFLOP/s each way reaches.

The batching suite measures what the served deployment reaches; this is the ceiling it is read against
(and the eager/plan/graph/compile comparison no served run can make). Needs CUDA.

    python -m benchmarks.probes.engine_limit --out OUT.json [--batches 1,8,32,64] [--compile default]"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np

from benchmarks.probes.card import int_list, probe_arguments, write_record
from benchmarks.probes.reference import IMGSZ, conv_gflops, engine as reference_engine, walk


def timed(fn, batch: int, seconds: float, gflops: float) -> dict:
    """fn run for `seconds` (at least 5 times) after 3 warm-ups, synchronised every 10 calls."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    calls, started = 0, time.perf_counter()
    while calls < 5 or (time.perf_counter() - started < seconds and calls < 2000):
        fn()
        calls += 1
        if calls % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    return {"calls": calls, "ms_per_batch": round(wall / calls * 1e3, 3), "images_per_s": round(batch * calls / wall, 1),
            "achieved_tflops": round(batch * calls / wall * gflops / 1e3, 2)}


def compiled(eager, mode: str, batches: list[int], imgsz: int) -> tuple[object | None, dict]:
    """The engine with torch.compile'd shape plans captured as CUDA graphs, and what that cost: compile
    seconds per batch size, the largest difference from the eager engine's output, the error if one size failed."""
    import torch

    eng = reference_engine(imgsz, mode)
    info: dict = {"mode": mode, "compile_s": {}, "max_abs_diff_vs_eager": {}}
    for batch in sorted(batches, reverse=True):
        started = time.monotonic()
        try:
            eng.capture([batch], (imgsz, imgsz))
        except Exception as error:  # noqa: BLE001 -- recorded: the eager ways are still measured
            info["error"] = f"batch {batch}: {type(error).__name__}: {error}"[:3000]
            info["traceback"] = traceback.format_exc(limit=20)[-5000:]
            return None, info
        info["compile_s"][str(batch)] = round(time.monotonic() - started, 1)
        x = torch.rand(batch, 3, imgsz, imgsz, device=eng.device, dtype=eng.compute_dtype)
        with torch.inference_mode():
            info["max_abs_diff_vs_eager"][str(batch)] = round((eng.forward(x) - eager.forward(x)).abs().max().item(), 4)
    return eng, info


def measure(batches: list[int], seconds: float, compile_mode: str | None, imgsz: int = IMGSZ) -> dict:
    import torch

    eng = reference_engine(imgsz)
    convs: list = []
    with torch.inference_mode():
        walk(eng, torch.rand(1, 3, imgsz, imgsz, device=eng.device, dtype=eng.compute_dtype), convs)
    gflops = conv_gflops(convs)
    out: dict = {"engine": f"TorchEngine {eng.precision} on {eng.device}", "conv_gflops_per_image": round(gflops, 3),
                 "convs": len(convs), "cuda_graph_batches": eng.capture(batches, (imgsz, imgsz)), "device_tensors": {}}
    ways = {"interpreted": lambda x: walk(eng, x), "shape_plan": lambda x: eng.plan(tuple(x.shape)).run(eng._layout(x)),
            "cuda_graph": eng.forward}
    if compile_mode:
        engine_compiled, out["compiled"] = compiled(eng, compile_mode, batches, imgsz)
        if engine_compiled is not None:
            ways["compiled_cuda_graph"] = engine_compiled.forward
    for way, fn in ways.items():
        table = out["device_tensors"][way] = {}
        for batch in batches:
            x = torch.rand(batch, 3, imgsz, imgsz, device=eng.device, dtype=eng.compute_dtype)
            with torch.inference_mode():
                table[str(batch)] = timed(lambda: fn(x), batch, seconds, gflops)
            table[str(batch)]["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            print(f"  {way} batch {batch}: {table[str(batch)]}", flush=True)
    name = eng.signature.inputs[0].name
    out["numpy_path"] = {}
    for batch in [b for b in batches if b <= 32][-2:]:
        array = np.random.default_rng(0).random((batch, 3, imgsz, imgsz), dtype=np.float32)
        out["numpy_path"][str(batch)] = timed(lambda: eng.infer({name: array}), batch, seconds, gflops)
    out["best_images_per_s"] = max(row["images_per_s"] for table in out["device_tensors"].values() for row in table.values())
    return out



def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--batches", type=int_list, default=[1, 8, 32, 64])
    parser.add_argument("--seconds", type=float, default=2.0, help="per way and batch size")
    parser.add_argument("--compile", default="", help="also measure torch.compile'd plans in this mode ('' = not measured)")
    parser.add_argument("--imgsz", type=int, default=IMGSZ)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    write_record(args.out, "engine_limit", args, measure(args.batches, args.seconds, args.compile or None, args.imgsz))
    return 0


if __name__ == "__main__":
    sys.exit(main())
