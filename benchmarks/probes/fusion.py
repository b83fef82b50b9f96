"""How much of the engine's GPU time a convolution fused with its bias and SiLU would save: what TensorRT
does to a YOLO graph, measured here with cuDNN's own runtime fusion (the cudnn-frontend graph API,
conv_fprop -> bias -> swish in one kernel) against what the served engine runs (cuDNN's convolution, then
the bias and SiLU as a separate pass over the activation).

Every convolution of the reference graph at one batch size, its own input shape, weights and bias; each way
captured as a CUDA graph of REPEATS launches and timed by replay, so the numbers are GPU time, not Python's.
Needs CUDA and the nvidia-cudnn-frontend wheel (carried as .gpu/cudnn_fe.tar.xz, benchmarks/pack_gpu.sh).
Put inside the compiled engine (tree 63202cd, reverted) the fused kernels did not pay: inductor's pass after
cuDNN's convolution costs about what the fused epilogue does, and it writes the concatenations too
(benchmarks/results/README.md, 2026-12-04 third session). No suite compares kernels that the served engine
does not run.

    python -m benchmarks.probes.fusion --out OUT.json [--batch 64]"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.probes.card import probe_arguments, write_record
from benchmarks.probes.reference import IMGSZ, engine as reference_engine, walk

REPEATS = 20


def _silu_inputs(engine) -> set[str]:
    """Values a SiLU reads, by the engine's own reading of exports' Sigmoid + Mul (torch_engine._fuse_silu)."""
    from harness.engines.torch_engine import _fuse_silu

    nodes = _fuse_silu(engine._nodes, engine.signature.outputs[0].name)
    return {in_names[0] for op_type, _, in_names, _ in nodes if op_type == "Silu"}


def _graph_ms(torch, fn) -> float:
    """GPU milliseconds per call: REPEATS calls captured as one CUDA graph, replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPEATS):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / (3 * REPEATS)


class FusedConv:
    """conv_fprop -> bias -> swish (SiLU) as one cuDNN graph for one input shape, NHWC half in and out."""

    def __init__(self, cudnn, torch, handle, x, w, b, attrs, silu: bool):
        top, left = attrs.get("pads", [0, 0, 0, 0])[:2]
        self.cudnn, self.torch, self.handle = cudnn, torch, handle
        half = cudnn.data_type.HALF
        graph = cudnn.pygraph(io_data_type=half, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)
        self.bias = b.reshape(1, -1, 1, 1).contiguous(memory_format=torch.channels_last)
        self.X = graph.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=half)
        self.W = graph.tensor(name="W", dim=list(w.shape), stride=list(w.stride()), data_type=half)
        self.B = graph.tensor(name="B", dim=list(self.bias.shape), stride=list(self.bias.stride()), data_type=half)
        y = graph.conv_fprop(image=self.X, weight=self.W, padding=[top, left], stride=list(attrs.get("strides", [1, 1])),
                             dilation=list(attrs.get("dilations", [1, 1])))
        y = graph.bias(name="bias", input=y, bias=self.B)
        if silu:
            y = graph.swish(input=y, swish_beta=1.0)
        y.set_output(True).set_data_type(half)
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        self.Y, self.graph, self.w = y, graph, w
        self.workspace = torch.empty(max(1, graph.get_workspace_size()), device=x.device, dtype=torch.uint8)

    def __call__(self, x, out):
        self.cudnn.set_stream(handle=self.handle, stream=self.torch.cuda.current_stream().cuda_stream)
        self.graph.execute({self.X: x, self.W: self.w, self.B: self.bias, self.Y: out}, self.workspace, handle=self.handle)
        return out


def compare(engine, convs: list[dict], batch: int) -> dict:
    """Per convolution of the reference graph (`convs`, as reference.walk collects them at `batch`):
    cuDNN convolution alone, convolution + bias + SiLU as the served engine's ops run them
    (eager), and cuDNN's fused graph; sums over the graph, and the largest difference of the fused output
    from the eager one."""
    import torch
    import torch.nn.functional as F

    import cudnn

    out: dict = {"cudnn_backend": cudnn.backend_version() if hasattr(cudnn, "backend_version") else None,
                 "cudnn_frontend": getattr(cudnn, "__version__", None), "torch_cudnn": torch.backends.cudnn.version(),
                 "batch": batch, "repeats_per_graph": REPEATS, "convs": []}
    handle = cudnn.create_handle()
    started = time.monotonic()
    sums = {"conv_only_ms": 0.0, "conv_bias_silu_eager_ms": 0.0, "cudnn_fused_ms": 0.0}
    worst = 0.0
    silu_inputs = _silu_inputs(engine)
    try:
        with torch.inference_mode():
            for index, conv in enumerate(convs):
                attrs, w, b, silu = conv["attrs"], conv["w"], conv["b"], conv["out"] in silu_inputs
                if attrs.get("group", 1) != 1 or b is None:
                    out["convs"].append({"index": index, "skipped": "grouped or without bias"})
                    continue
                x = torch.randn(conv["x_shape"], device=engine.device, dtype=torch.float16).contiguous(
                    memory_format=torch.channels_last)
                stride, pad = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])[:2]
                act = F.silu if silu else (lambda t: t)
                row = {"index": index, "x": list(conv["x_shape"]), "w": list(w.shape), "stride": stride, "silu": silu}
                row["conv_only_ms"] = _graph_ms(torch, lambda: F.conv2d(x, w, None, stride=stride, padding=pad))
                row["conv_bias_silu_eager_ms"] = _graph_ms(torch, lambda: act(F.conv2d(x, w, b, stride=stride, padding=pad)))
                expected = act(F.conv2d(x, w, b, stride=stride, padding=pad))
                try:
                    fused = FusedConv(cudnn, torch, handle, x, w, b, attrs, silu)
                    y = torch.empty_like(expected)
                    fused(x, y)
                    torch.cuda.synchronize()
                    diff = (y.float() - expected.float()).abs().max().item()
                    worst = max(worst, diff)
                    row["cudnn_fused_ms"] = _graph_ms(torch, lambda: fused(x, y))
                    row["max_abs_diff"] = round(diff, 4)
                except Exception as error:  # noqa: BLE001 -- recorded per conv: which shapes cuDNN will not fuse
                    row["cudnn_error"] = f"{type(error).__name__}: {error}"[:400]
                for key in sums:
                    if key in row:
                        row[key] = round(row[key], 4)
                        sums[key] += row[key]
                out["convs"].append(row)
    finally:
        cudnn.destroy_handle(handle)
    out["sums_ms"] = {k: round(v, 3) for k, v in sums.items()}
    out["fused_failures"] = sum(1 for r in out["convs"] if "cudnn_error" in r)
    out["max_abs_diff"] = round(worst, 4)
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--batch", type=int, default=64, help="batch size every convolution runs at")
    parser.add_argument("--imgsz", type=int, default=IMGSZ)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    eng, convs = reference_engine(args.imgsz), []
    with torch.inference_mode():
        walk(eng, torch.zeros(args.batch, 3, args.imgsz, args.imgsz, device=eng.device, dtype=eng.compute_dtype), convs)
    write_record(args.out, "fusion", args, compare(eng, convs, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
