"""What an image costs the GPU, step by step, and so the most a fully busy card could serve: yolo_e2e's
DevicePipeline run locally (no Triton, no stub) on batches of the load JPEG, each step synchronised and
timed, and what each costs the GPU itself through CUPTI (torch.profiler's device events: kernels apart from
copies, waits left out; nvJPEG's hardware decoder is an engine of its own and not in it): header check,
nvJPEG decode, letterbox, engine, NMS, restore + copy out, and the whole `detect`. `--kernels` adds the
engine's own time by kernel and by aten op (cuDNN's convolutions vs inductor's fused Triton kernels).

The suites measure the served model from outside (throughput, latency, Triton's stage metrics); none can
say which kernels an image's time goes to, or what the GPU's kernel time caps throughput at
(`kernel_bound_images_per_s`). Needs CUDA.

    python -m benchmarks.probes.kernel_budget --out OUT.json [--batches 8,32,64] [--compile default] [--kernels]"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import numpy as np

from benchmarks.probes.card import int_list, probe_arguments, write_record
from benchmarks.probes.reference import IMGSZ, engine as reference_engine, load_jpeg


def device_split(events, calls: int) -> dict:
    """Device-side profiler events -> ms per call: all kernels, inductor's (triton_*) among them, and
    copies/memsets apart. Only events the GPU ran count (a launch's host-side record carries device time
    too, and would count each kernel twice)."""
    import torch

    kernel_us = inductor_us = copy_us = 0.0
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = event.time_range.elapsed_us()
        if event.name.startswith(("Memcpy", "Memset")):
            copy_us += us
        else:
            kernel_us += us
            inductor_us += us if event.name.startswith("triton_") else 0.0
    return {"kernel_ms": round(kernel_us / calls / 1e3, 3), "inductor_kernel_ms": round(inductor_us / calls / 1e3, 3),
            "copy_ms": round(copy_us / calls / 1e3, 3)}


def device_ms(fn, repeats: int = 5) -> dict:
    """GPU time per call of fn, apart from the time it waits."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    return device_split(prof.events(), repeats)


def wall_ms(fn, repeats: int) -> tuple[float, object]:
    """Median synchronised wall milliseconds of fn, and its last result."""
    import torch

    torch.cuda.synchronize()
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    return float(np.median(times)), result


def pipeline_steps(batches: list[int], seconds: float, compile_mode: str | None, imgsz: int = IMGSZ) -> dict:
    """Per batch size: each step's wall and device milliseconds, the kernel time per image and the
    throughput it bounds."""
    import torch

    from harness.reference.configs import Target
    from harness.vision.gpu.decode import decode_batch
    from harness.vision.gpu.image import _nvjpeg_ok, decode_images
    from harness.vision.gpu.pipeline import DevicePipeline
    from harness.vision.image import DEFAULT_MAX_PIXELS
    from harness.vision.pipeline import Job

    target = Target(imgsz=imgsz)
    eng = reference_engine(imgsz, compile_mode)
    started = time.monotonic()
    pipeline = DevicePipeline(eng, imgsz, max(batches), target.max_det, graph_batches=batches)
    blob, payload = load_jpeg()
    out: dict = {"pipeline": pipeline.describe(), "setup_s": round(time.monotonic() - started, 1),
                 "compile_mode": compile_mode, "payload": payload, "batches": {}}
    for batch in batches:
        blobs = [blob] * batch
        jobs = [Job(np.array([blob], dtype=np.object_), target.conf, target.iou, target.max_det) for _ in range(batch)]
        conf = torch.full((batch,), target.conf, device=eng.device)
        iou = torch.full((batch,), target.iou, dtype=torch.float64, device=eng.device)
        max_det = torch.full((batch,), target.max_det, dtype=torch.int64, device=eng.device)
        repeats = max(5, min(50, int(seconds * 1e3 / batch)))
        wall, device = {}, {}

        def step(name: str, fn):
            wall[name], result = wall_ms(fn, repeats)
            device[name] = device_ms(fn)
            return result

        stream = torch.cuda.stream(pipeline.stream) if pipeline.stream else contextlib.nullcontext()
        with torch.inference_mode(), stream:
            for _ in range(3):
                pipeline.detect(jobs)
            step("header_check", lambda: [_nvjpeg_ok(b, DEFAULT_MAX_PIXELS) for b in blobs])
            images = step("decode", lambda: decode_images(blobs, eng.device))  # the header check included
            tensor, metas = step("letterbox", lambda: pipeline.letterbox.batch(images))
            raw = step("engine", lambda: eng.forward(tensor))
            det, num = step("nms", lambda: decode_batch(raw, conf, iou, max_det, target.max_det))
            step("restore_copy_out", lambda: (pipeline.letterbox.restore(det.clone(), num, metas).cpu(), num.cpu()))
            step("detect", lambda: pipeline.detect(jobs))
        per_image_us = device["detect"]["kernel_ms"] * 1e3 / batch
        out["batches"][str(batch)] = {
            "wall_ms": {k: round(v, 3) for k, v in wall.items()}, "device_ms": device, "repeats": repeats,
            "kernel_us_per_image": round(per_image_us, 2),
            "kernel_bound_images_per_s": round(1e6 / per_image_us) if per_image_us else None,
            "detect_images_per_s": round(batch / wall["detect"] * 1e3, 1),
            "engine_share_of_detect": round(wall["engine"] / wall["detect"], 3)}
        print(f"  batch {batch}: {out['batches'][str(batch)]}", flush=True)
    return out


def _rows(averages, limit: int) -> list[dict]:
    """torch.profiler averages with device time, slowest first (the attribute's name moved across torch versions)."""
    def self_us(row) -> float:
        return float(getattr(row, "self_device_time_total", None) or getattr(row, "self_cuda_time_total", 0) or 0)

    rows = [{"name": row.key[:140], "shapes": str(getattr(row, "input_shapes", "") or "")[:160], "count": row.count,
             "device_ms": round(self_us(row) / 1e3, 3)} for row in averages if self_us(row) > 0]
    return sorted(rows, key=lambda r: -r["device_ms"])[:limit]


def engine_kernels(batch: int, compile_mode: str | None, imgsz: int = IMGSZ, forwards: int = 2) -> dict:
    """The engine's shape plan at `batch` under torch.profiler: device time by kernel and by aten op with
    its input shapes (the kernels a CUDA graph of it replays), per forward."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    eng = reference_engine(imgsz, compile_mode)
    plan = eng.plan((batch, 3, imgsz, imgsz))
    x = eng._layout(torch.rand(batch, 3, imgsz, imgsz, device=eng.device, dtype=eng.compute_dtype))
    with torch.inference_mode():
        for _ in range(3):
            plan.runner(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for _ in range(forwards):
                plan.runner(x)
            torch.cuda.synchronize()
    by_shape = [r for r in _rows(prof.key_averages(group_by_input_shape=True), 400) if r["name"].startswith("aten::")]
    return {"batch": batch, "compile_mode": compile_mode, "steps": len(plan.steps), "forwards": forwards,
            "device_ms_per_forward": device_split(prof.events(), forwards),
            "kernels": _rows(prof.key_averages(), 40), "aten_by_shape": by_shape[:40]}



def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--batches", type=int_list, default=[8, 32, 64], help="batch sizes (each captured as a CUDA graph)")
    parser.add_argument("--seconds", type=float, default=1.0, help="per step and batch size")
    parser.add_argument("--compile", default="", help="torch.compile mode of the engine ('' = eager, as yolo_e2e serves)")
    parser.add_argument("--kernels", action="store_true", help="also the engine's kernels at the largest batch")
    parser.add_argument("--imgsz", type=int, default=IMGSZ)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    result = {"pipeline": pipeline_steps(args.batches, args.seconds, args.compile or None, args.imgsz)}
    if args.kernels:
        result["engine_kernels"] = engine_kernels(max(args.batches), args.compile or None, args.imgsz)
    write_record(args.out, "kernel_budget", args, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
