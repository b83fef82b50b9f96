"""ONNX Runtime engine: the CPU reference every other engine is compared against; takes the CUDA
provider when the installed onnxruntime has it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from harness.engines.base import EngineUnavailable, check_inputs
from harness.engines.onnx_signature import onnx_signature
from harness.engines.signature import Signature


def precision_of(model_path: str | Path) -> str:
    """What the graph computes in, read from the graph itself: Q/DQ nodes -> int8, fp16 weights -> fp16."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    ops = {node.op_type for node in model.graph.node}
    if "QuantizeLinear" in ops or "DequantizeLinear" in ops:
        return "int8"
    if any(init.data_type == onnx.TensorProto.FLOAT16 for init in model.graph.initializer):
        return "fp16"
    return "fp32"


class OrtEngine:
    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        intra_op_threads: int | None = None,
        cpu_mem_arena: bool = True,
        spinning: bool = True,
        name: str | None = None,
    ):
        """`cpu_mem_arena=False` for a served model whose memory is measured: the arena extends in powers of two
        and never gives back, so the process would hold what the batch sizes it happened to see added up to
        (a CPU reference stub measured 544 MiB after a quiet run, 751 MiB after a busy one).
        `spinning=False` for a model that shares the CPU with others: idle intra-op threads otherwise spin on the
        cores the co-tenant needs."""
        self.path = Path(path)
        self.name = name or self.path.stem
        available = ort.get_available_providers()
        if device.startswith("cuda"):
            if "CUDAExecutionProvider" not in available:
                raise EngineUnavailable(f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (has {available})")
            index = int(device.split(":")[1]) if ":" in device else 0
            providers: list = [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        options = ort.SessionOptions()
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        options.enable_cpu_mem_arena = cpu_mem_arena
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        self.session = ort.InferenceSession(str(self.path), sess_options=options, providers=providers)
        self.device = device
        # ORT on x86 has no fp16 Conv kernel: an fp16 graph is computed in fp32 after casts (PLATFORM.md),
        # so on CPU "fp16" means fp16-rounded weights, not fp16 arithmetic.
        self.precision = precision_of(self.path)
        self._signature = onnx_signature(self.path)

    @property
    def signature(self) -> Signature:
        return self._signature

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        check_inputs(self._signature, inputs)
        names = [spec.name for spec in self._signature.outputs]
        values = self.session.run(names, inputs)
        return dict(zip(names, values))
