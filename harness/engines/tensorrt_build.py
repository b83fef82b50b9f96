"""TensorRT plan builder with the real `tensorrt` Python API: ONNX parser into an explicit-batch network,
one optimization profile, FP16 flag or INT8 from the graph's own Q/DQ (no calibrator: IInt8Calibrator is
deprecated since 10.1 and gone in 11), a workspace limit and a timing cache file.

Writes model.plan and model.json beside it (TensorRT version, GPU, compute capability, profile,
precision): a plan only loads on the TensorRT version and GPU architecture it was built for, and the
sidecar is how a failed load explains itself. The builder is not installable here (shared/PLATFORM.md);
this module imports without it and raises EngineUnavailable when asked to build."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from harness.engines.base import EngineUnavailable
from harness.engines.tensorrt_runtime import sidecar_path

DEFAULT_BATCH_RANGE = (1, 8, 32)  # min / opt / max of the batch dim for dynamic-batch plans
DEFAULT_WORKSPACE = 4 << 30


def import_builder():
    try:
        import tensorrt as trt  # noqa: PLC0415
    except ImportError as error:
        raise EngineUnavailable(
            "the TensorRT builder (`tensorrt` package) is not installed; PyPI's `tensorrt` is an sdist that "
            "downloads from NVIDIA's index, which is not reachable here (shared/PLATFORM.md)"
        ) from error
    if not hasattr(trt, "Builder"):
        raise EngineUnavailable(f"`tensorrt` {getattr(trt, '__version__', '?')} has no Builder (a runtime-only install)")
    return trt


def gpu_identity(device: int = 0) -> dict:
    """GPU name and compute capability, from nvidia-smi (no Python dependency), else torch."""
    if shutil.which("nvidia-smi"):
        result = subprocess.run(
            ["nvidia-smi", f"--id={device}", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        )
        if result.returncode == 0 and result.stdout.strip():
            name, capability, driver = (part.strip() for part in result.stdout.strip().split(","))
            return {"gpu_name": name, "compute_capability": capability, "driver_version": driver}
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(device)
            return {"gpu_name": torch.cuda.get_device_name(device), "compute_capability": f"{major}.{minor}", "driver_version": None}
    except ImportError:
        pass
    return {"gpu_name": None, "compute_capability": None, "driver_version": None}


def build_environment() -> dict:
    """What a plan is bound to: part of its cache key."""
    trt = import_builder()
    return {"tensorrt": trt.__version__, **gpu_identity()}


def _network_flags(trt, strongly_typed: bool) -> int:
    flags = 0
    # TensorRT 10 made every network explicit-batch and deprecated the flag; 8.x needs it.
    if hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH") and int(trt.__version__.split(".")[0]) < 10:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    if strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return flags


def build_plan(
    onnx_path: str | Path,
    plan_path: str | Path,
    *,
    precision: str = "fp16",
    batch: tuple[int, int, int] = DEFAULT_BATCH_RANGE,
    workspace_bytes: int = DEFAULT_WORKSPACE,
    timing_cache: str | Path | None = None,
    version_compatible: bool = False,
) -> dict:
    """Build and serialize a plan; returns the sidecar dict (also written as model.json).

    precision: "fp32"; "fp16" (FP16 flag on an fp32 graph; with TensorRT 11, which dropped weak typing,
    the graph is parsed strongly typed and the fp16 must be in the ONNX); "int8" (a Q/DQ graph: the INT8
    flag lets TensorRT run the quantized layers in int8, FP16 lets the rest fall to fp16)."""
    trt = import_builder()
    onnx_path, plan_path = Path(onnx_path), Path(plan_path)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    weakly_typed = hasattr(trt.BuilderFlag, "FP16")
    network = builder.create_network(_network_flags(trt, strongly_typed=not weakly_typed))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"{onnx_path}: TensorRT's ONNX parser failed: {errors}")

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if weakly_typed and precision in ("fp16", "int8"):
        config.set_flag(trt.BuilderFlag.FP16)
    if weakly_typed and precision == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
    if version_compatible:
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)

    profile = builder.create_optimization_profile()
    profiles = []
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        shape = tuple(tensor.shape)
        shapes = [tuple(b if d == -1 and axis == 0 else d for axis, d in enumerate(shape)) for b in batch]
        if any(d == -1 for s in shapes for d in s):
            raise ValueError(f"input {tensor.name} {shape}: only the batch dim may be dynamic; build from a fixed-size variant")
        profile.set_shape(tensor.name, *shapes)
        profiles.append({"input": tensor.name, "min": shapes[0], "opt": shapes[1], "max": shapes[2]})
    config.add_optimization_profile(profile)

    cache_bytes = Path(timing_cache).read_bytes() if timing_cache and Path(timing_cache).exists() else b""
    cache = config.create_timing_cache(cache_bytes)
    config.set_timing_cache(cache, ignore_mismatch=False)

    started = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"{onnx_path}: TensorRT build failed (see the log above)")
    plan_path.parent.mkdir(parents=True, exist_ok=True)
    plan_path.write_bytes(bytes(serialized))
    if timing_cache:
        Path(timing_cache).write_bytes(bytes(config.get_timing_cache().serialize()))

    sidecar = {
        "tensorrt_version": trt.__version__,
        **gpu_identity(),
        "precision": precision,
        "typing": "weak" if weakly_typed else "strong",
        "profiles": profiles,
        "workspace_bytes": workspace_bytes,
        "version_compatible": version_compatible,
        "source_onnx": onnx_path.name,
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    sidecar_path(plan_path).write_text(json.dumps(sidecar, indent=2))
    return sidecar
