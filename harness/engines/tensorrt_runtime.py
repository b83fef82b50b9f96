"""TensorRT plans: load with the real `tensorrt` runtime (the full package, or the lean runtime for
version-compatible plans), read the I/O signature by tensor name, run with execute_async_v3.

tensorrt is imported lazily: the rest of the harness, and this module, import without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.engines.base import EngineUnavailable, check_inputs
from harness.engines.signature import Profile, Signature, TensorSpec


def import_tensorrt():
    """The full `tensorrt` package, else `tensorrt_lean` (runs plans built with VERSION_COMPATIBLE)."""
    try:
        import tensorrt as trt  # noqa: PLC0415

        return trt
    except ImportError:
        pass
    try:
        import tensorrt_lean as trt  # noqa: PLC0415

        return trt
    except ImportError as error:
        raise EngineUnavailable(
            "TensorRT Python API not installed (neither `tensorrt` nor `tensorrt_lean`); "
            "the builder is not on PyPI here (shared/PLATFORM.md)"
        ) from error


def triton_dtype(trt, dtype) -> str:
    names = {
        "FLOAT": "FP32", "HALF": "FP16", "BF16": "BF16", "INT8": "INT8", "INT32": "INT32",
        "INT64": "INT64", "BOOL": "BOOL", "UINT8": "UINT8", "FP8": "FP8",
    }
    key = dtype.name if hasattr(dtype, "name") else str(dtype).split(".")[-1]
    if key not in names:
        raise ValueError(f"TensorRT dtype {dtype} has no Triton name")
    return names[key]


def sidecar_path(plan: str | Path) -> Path:
    return Path(plan).with_suffix(".json")


def _deserialize(trt, plan_path: Path):
    logger = trt.Logger(trt.Logger.WARNING)
    runtime = trt.Runtime(logger)
    if hasattr(runtime, "engine_host_code_allowed"):
        # Version-compatible plans embed the lean runtime; allowing it is what makes them load.
        runtime.engine_host_code_allowed = True
    engine = runtime.deserialize_cuda_engine(plan_path.read_bytes())
    if engine is None:
        recorded = ""
        sidecar = sidecar_path(plan_path)
        if sidecar.exists():
            meta = json.loads(sidecar.read_text())
            recorded = f" (built with TensorRT {meta.get('tensorrt_version')} on {meta.get('gpu_name')} sm_{meta.get('compute_capability')})"
        raise RuntimeError(
            f"{plan_path}: TensorRT {trt.__version__} could not deserialize the plan{recorded}; plans are bound to "
            "the TensorRT version and GPU architecture they were built with"
        )
    return runtime, engine


def engine_signature(trt, engine, source: str = "") -> Signature:
    inputs, outputs, profiles = [], [], []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        spec = TensorSpec(name, triton_dtype(trt, engine.get_tensor_dtype(name)), tuple(int(d) for d in engine.get_tensor_shape(name)))
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            inputs.append(spec)
            for profile_index in range(engine.num_optimization_profiles):
                low, opt, high = engine.get_tensor_profile_shape(name, profile_index)
                profiles.append(Profile(name, tuple(low), tuple(opt), tuple(high)))
        else:
            outputs.append(spec)
    return Signature(tuple(inputs), tuple(outputs), tuple(profiles), source)


def plan_signature(path: str | Path) -> Signature:
    trt = import_tensorrt()
    _runtime, engine = _deserialize(trt, Path(path))
    return engine_signature(trt, engine, str(path))


class TensorRTEngine:
    """Buffers are torch CUDA tensors (GPU hosts have torch; TensorRT's Python API has no allocator of
    its own). One execution context, profile 0, one stream: a conformance engine, not a server."""

    def __init__(self, path: str | Path, *, device: str = "cuda:0", name: str | None = None):
        self.trt = trt = import_tensorrt()
        try:
            import torch  # noqa: PLC0415
        except ImportError as error:
            raise EngineUnavailable("TensorRTEngine needs torch for CUDA buffers") from error
        if not torch.cuda.is_available():
            raise EngineUnavailable("no CUDA device visible")
        self.torch = torch
        self.path = Path(path)
        self.name = name or self.path.parent.name or self.path.stem
        self.device = device
        self._runtime, self.engine = _deserialize(trt, self.path)
        self._signature = engine_signature(trt, self.engine, str(self.path))
        self.context = self.engine.create_execution_context()
        self.stream = torch.cuda.Stream(device=device)
        sidecar = sidecar_path(self.path)
        self.precision = json.loads(sidecar.read_text()).get("precision", "unknown") if sidecar.exists() else "unknown"

    @property
    def signature(self) -> Signature:
        return self._signature

    def _torch_dtype(self, triton: str):
        torch = self.torch
        return {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16, "INT8": torch.int8,
                "INT32": torch.int32, "INT64": torch.int64, "BOOL": torch.bool, "UINT8": torch.uint8}[triton]

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        check_inputs(self._signature, inputs)
        torch = self.torch
        keep = []
        with torch.cuda.device(self.device):
            for spec in self._signature.inputs:
                tensor = torch.from_numpy(np.ascontiguousarray(inputs[spec.name])).to(self.device, self._torch_dtype(spec.dtype))
                keep.append(tensor)
                if not self.context.set_input_shape(spec.name, tuple(tensor.shape)):
                    raise ValueError(f"input {spec.name!r}: shape {tuple(tensor.shape)} is outside the optimization profile {self._signature.profiles}")
                self.context.set_tensor_address(spec.name, tensor.data_ptr())
            outputs = {}
            for spec in self._signature.outputs:
                shape = tuple(self.context.get_tensor_shape(spec.name))
                tensor = torch.empty(shape, dtype=self._torch_dtype(spec.dtype), device=self.device)
                outputs[spec.name] = tensor
                self.context.set_tensor_address(spec.name, tensor.data_ptr())
            if not self.context.execute_async_v3(self.stream.cuda_stream):
                raise RuntimeError(f"{self.path}: execute_async_v3 failed")
            self.stream.synchronize()
        return {name: (t.float() if t.is_floating_point() else t).cpu().numpy() for name, t in outputs.items()}
