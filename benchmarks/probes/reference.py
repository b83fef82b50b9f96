"""What the probes run, so each measures the same thing the served yolo_e2e runs: the reference FP32 ONNX
(the artifact cache's, the one the reference build serves), the TorchEngine over it as the GPU build runs
it (FP16 on cuda:0, eager or torch.compile'd), the load JPEG (the 640x480 evaluation image the recorded
runs used), and the graph walked node by node (each convolution with its shapes, for FLOPs and fusion)."""

from __future__ import annotations

import math

IMGSZ = 640


def reference_onnx(imgsz: int = IMGSZ):
    """The reference detector's FP32 ONNX, built (or found) in the artifact cache."""
    from harness.engines.artifacts import ArtifactCache, VariantSpec
    from harness.reference.build import source_model

    return ArtifactCache(source=source_model()).build(VariantSpec("fp32", imgsz=imgsz)).path


def engine(imgsz: int = IMGSZ, compile_mode: str | None = None, precision: str = "fp16"):
    """The GPU build's engine: TorchEngine on cuda:0 (EngineUnavailable where torch sees no CUDA)."""
    from harness.engines.torch_engine import TorchEngine

    return TorchEngine(reference_onnx(imgsz), device="cuda:0", precision=precision, compile_mode=compile_mode or None)


def load_jpeg() -> tuple[bytes, dict]:
    """The first 640x480 evaluation JPEG (23.9 KB) and what it is."""
    from PIL import Image

    from harness.accuracy.evalset import EvalSet
    from harness.engines.artifacts import EVAL_SET

    images = EvalSet(EVAL_SET).images
    chosen = next((i for i in images if Image.open(i.path).size == (640, 480)), images[0])
    blob = chosen.encoded()
    return blob, {"file": chosen.file_name, "size": list(Image.open(chosen.path).size), "jpeg_bytes": len(blob)}


def walk(torch_engine, x, convs: list | None = None):
    """TorchEngine's own node loop (same ops, same constants) on a device tensor, no plan and no graph:
    the engine "interpreted". `convs` collects each Conv as it runs: attributes, input shape, weight,
    bias, output name and shape."""
    from harness.engines.torch_engine import _store

    values = dict(torch_engine._consts)
    values[torch_engine.signature.inputs[0].name] = x
    for op_type, attrs, in_names, out_names in torch_engine._nodes:
        args = [values[n] if n else None for n in in_names]
        result = torch_engine._ops[op_type](attrs, *args)
        _store(values, out_names, result)
        if convs is not None and op_type == "Conv":
            convs.append({"attrs": attrs, "x_shape": tuple(args[0].shape), "w": args[1],
                          "b": args[2] if len(args) > 2 else None, "out": out_names[0], "y_shape": tuple(result.shape)})
    return values[torch_engine.signature.outputs[0].name]


def conv_gflops(convs: list[dict], batch: int = 1) -> float:
    """Convolution GFLOPs per image of a walk at `batch`: 2 * Cout * (Cin / groups) * kh * kw * Ho * Wo."""
    return 2 * sum(math.prod(c["w"].shape) * c["y_shape"][2] * c["y_shape"][3] for c in convs) / batch / 1e9
