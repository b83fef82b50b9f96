"""`yts build`: build (or take from the cache) the model variants and print where they are;
`yts latency`: bounded ONNX Runtime per-image latency of built variants."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def _cache(args, progress=None):
    from harness.engines.artifacts import ArtifactCache  # noqa: PLC0415

    return ArtifactCache(source=Path(args.source) if args.source else None, progress=progress)


def _specs(args):
    from harness.engines.artifacts import DEFAULT_VARIANTS, VariantSpec  # noqa: PLC0415

    overrides = {"calibration_dir": args.calibration} if args.calibration else {}
    return [VariantSpec.parse(name, **overrides) for name in (args.variants or DEFAULT_VARIANTS)]


def build(args) -> int:
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    with Progress(SpinnerColumn(), *Progress.get_default_columns(), TimeElapsedColumn(), console=console) as progress:
        cache = _cache(args, progress)
        artifacts = [cache.build(spec) for spec in _specs(args)]
    table = Table(title=f"artifacts ({cache.root})")
    for column in ("variant", "path", "size", "hash", "status"):
        table.add_column(column)
    for artifact in artifacts:
        status = f"built in {artifact.seconds:.1f} s" if artifact.built else "cached"
        table.add_row(artifact.spec.name, str(artifact.path), f"{artifact.size / 2**20:.2f} MiB", artifact.key[:16], status)
    console.print(table)
    return 0


def measure_latency(engine, imgsz: int, runs: int, warmup: int = 2) -> dict:
    """Batch-1 wall time per image over `runs` calls on one fixed random input, after warm-up."""
    x = np.random.default_rng(0).random((1, 3, imgsz, imgsz), dtype=np.float32)
    feed = {engine.signature.inputs[0].name: x}
    for _ in range(warmup):
        engine.infer(feed)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        engine.infer(feed)
        times.append((time.perf_counter() - start) * 1000)
    return {"median_ms": float(np.median(times)), "p90_ms": float(np.percentile(times, 90)), "runs": runs}


def latency(args) -> int:
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from harness.engines.ort import OrtEngine  # noqa: PLC0415

    cache = _cache(args)
    table = Table(title=f"ONNX Runtime CPU latency, batch 1, {args.runs} runs, {args.threads or 'default'} threads")
    for column in ("variant", "median ms", "p90 ms"):
        table.add_column(column)
    for spec in _specs(args):
        artifact = cache.build(spec)
        result = measure_latency(OrtEngine(artifact.path, intra_op_threads=args.threads), spec.imgsz, args.runs)
        table.add_row(spec.name, f"{result['median_ms']:.1f}", f"{result['p90_ms']:.1f}")
    Console().print(table)
    return 0


def register(subparsers) -> None:
    for name, func, help_text in (("build", build, "build or fetch cached model variants"),
                                  ("latency", latency, "ONNX Runtime CPU latency of variants")):
        parser = subparsers.add_parser(name, help=help_text, description=__doc__)
        parser.add_argument("--variants", nargs="+", metavar="NAME",
                            help="variant names, e.g. fp32-dyn-640 fp16-b1-320 int8-day-minmax-quint8-dyn-320 trt-fp16-dyn-640")
        parser.add_argument("--source", help="source ONNX (default reference_model/yolov8n_shapes.onnx)")
        parser.add_argument("--calibration", help="INT8 calibration images dir (default fixtures/shapes_eval)")
        if name == "latency":
            parser.add_argument("--runs", type=int, default=20)
            parser.add_argument("--threads", type=int, default=None)
        parser.set_defaults(func=func)
