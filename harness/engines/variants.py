"""Variants of the reference model, ONNX -> ONNX, no torch: FP32 reference, static or dynamic batch at a
fixed input size, FP16 weights, INT8 explicit Q/DQ. Each function takes and returns plain files or
ModelProtos; caching and naming live in harness.engines.artifacts."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import onnx
from onnxruntime.quantization import CalibrationDataReader

from harness.engines.calibration import CalibrationSet, ImageCalibrationReader, composition

CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# "quint8": asymmetric uint8 activations, ORT's fast path on AVX2 CPUs (QInt8 activations ran 1.8x slower
# than fp32 there). "qint8": symmetric int8 activations and weights, zero point 0: the only Q/DQ form
# TensorRT builds, so TensorRT plans are built from this one.
ACTIVATION_TYPES = ("quint8", "qint8")


def load_reference(path: str | Path) -> onnx.ModelProto:
    """The committed model as a plain fp32 graph. Its weights are stored fp16 to stay small; the packing
    module (issue 3, part 7) upcasts them losslessly."""
    model = onnx.load(str(path))
    has_fp16 = any(init.data_type == onnx.TensorProto.FLOAT16 for init in model.graph.initializer)
    if not has_fp16:
        return model
    try:
        from harness.engines.packing import unpack_fp32_weights  # noqa: PLC0415
    except ImportError as error:
        raise RuntimeError(f"{path} stores fp16 weights but harness.engines.packing is missing") from error
    return unpack_fp32_weights(model)


def with_input_shape(model: onnx.ModelProto, *, imgsz: int, batch: int | None) -> onnx.ModelProto:
    """Fix H and W (and the batch dim unless `batch` is None), then fold the shape arithmetic a dynamic
    export carries (onnxslim), so outputs get concrete anchors (2100 at 320, 8400 at 640) and a static
    model is what `export(dynamic=False)` would have produced."""
    import onnxslim  # noqa: PLC0415

    model = onnx.ModelProto.FromString(model.SerializeToString())
    (image,) = [v for v in model.graph.input if v.name not in {i.name for i in model.graph.initializer}]
    dims = image.type.tensor_type.shape.dim
    if len(dims) != 4:
        raise ValueError(f"input {image.name!r}: expected NCHW, got rank {len(dims)}")
    batch_param = dims[0].dim_param or "batch"
    for dim, value in zip(dims, (batch, None, imgsz, imgsz)):
        if dim is dims[1]:
            continue
        dim.ClearField("dim_param")
        dim.ClearField("dim_value")
        if value is None:
            dim.dim_param = batch_param
        else:
            dim.dim_value = value
    # Output dims and intermediate shapes are re-inferred from the new input.
    for output in model.graph.output:
        for dim in output.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and not (batch is None and dim.dim_param == batch_param):
                dim.ClearField("dim_param")
            elif dim.HasField("dim_value") and dim is output.type.tensor_type.shape.dim[0]:
                # batch dim of an already-static output
                dim.ClearField("dim_value")
                if batch is None:
                    dim.dim_param = batch_param
    del model.graph.value_info[:]
    slimmed = onnxslim.slim(model)
    onnx.checker.check_model(slimmed)
    return slimmed


def to_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """FP16 weights and activations, FP32 I/O. onnxruntime's converter, not onnxconverter_common's: the
    latter's graphs are refused by ORT (Resize/Cast type errors, shared/PLATFORM.md)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16  # noqa: PLC0415

    return convert_float_to_float16(model, keep_io_types=True)


def detect_decode_nodes(model: onnx.ModelProto) -> list[str]:
    """Nodes of the Detect head that decode boxes (DFL softmax/conv, anchor arithmetic, stride multiply,
    the final Concat). Quantized, the final Concat shares one scale between box pixels (0-640) and class
    scores (0-1) and mAP drops to 0 (shared/PLATFORM.md). The head's conv towers (cv2, cv3) stay quantized.

    The head is the ultralytics module ("/model.N/") whose node produces the graph output."""
    producers = {out: node for node in model.graph.node for out in node.output}
    head = None
    for output in model.graph.output:
        match = re.match(r"^/model\.(\d+)/", producers[output.name].name) if output.name in producers else None
        if match:
            head = match.group(0)
    if head is None:
        raise ValueError("cannot find the Detect head: the output's producer has no '/model.N/' name (not an ultralytics export?)")
    towers = (head + "cv2", head + "cv3")
    return [node.name for node in model.graph.node if node.name.startswith(head) and not node.name.startswith(towers)]


def to_int8(
    model: onnx.ModelProto,
    out_path: str | Path,
    calibration: CalibrationSet,
    *,
    imgsz: int,
    method: str = "minmax",
    activation: str = "quint8",
    percentile: float = 99.999,
    progress=None,
) -> dict:
    """Explicit Q/DQ INT8 by ONNX Runtime static quantization, per-channel weights, the Detect decode
    left in float. Returns the calibration record (composition + settings) to keep beside the model."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static  # noqa: PLC0415
    from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: PLC0415

    if method not in CALIBRATION_METHODS:
        raise ValueError(f"calibration method {method!r}: choose from {CALIBRATION_METHODS}")
    if activation not in ACTIVATION_TYPES:
        raise ValueError(f"activation type {activation!r}: choose from {ACTIVATION_TYPES}")
    (image,) = [v for v in model.graph.input if v.name not in {i.name for i in model.graph.initializer}]
    batch_dim = image.type.tensor_type.shape.dim[0]
    batch = batch_dim.dim_value if batch_dim.HasField("dim_value") else 1
    excluded = detect_decode_nodes(model)
    selection = calibration.select()
    record = {
        "calibration_set": calibration.params(),
        "composition": composition(selection),
        "method": method,
        "percentile": percentile if method == "percentile" else None,
        "activation_type": activation,
        "weight_type": "qint8 per-channel",
        "format": "QDQ",
        "excluded_nodes": excluded,
    }
    with tempfile.TemporaryDirectory() as tmp:
        float_path = Path(tmp) / "float.onnx"
        pre_path = Path(tmp) / "pre.onnx"
        onnx.save(model, str(float_path))
        # auto_merge: symbolic shape inference merges the dynamic dims' symbols instead of failing on them.
        quant_pre_process(str(float_path), str(pre_path), auto_merge=True)
        reader = ImageCalibrationReader(selection, input_name=image.name, imgsz=imgsz, batch=batch)
        if progress is not None:
            reader = _Counting(reader, progress)
        extra = {"CalibPercentile": percentile} if method == "percentile" else {}
        if activation == "qint8":
            extra.update(ActivationSymmetric=True, WeightSymmetric=True)
        ranges = None
        if method == "entropy":
            ranges = Path(tmp) / "entropy_ranges.json"
            _entropy_ranges(pre_path, reader, ranges, Path(tmp))
            record["entropy_bins"] = ENTROPY_BINS
        quantize_static(
            str(pre_path),
            str(out_path),
            reader,
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8 if activation == "quint8" else QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method={"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
                              "percentile": CalibrationMethod.Percentile}[method],
            nodes_to_exclude=excluded,
            extra_options=extra,
            calibration_cache_path=ranges,
        )
    return record


# quantize_static hands the entropy calibrator 128 histogram bins for 128 quantized bins: the KL search
# then has one candidate, the full range, and "entropy" silently equals MinMax (shared/PLATFORM.md).
# ENTROPY_BINS gives it (ENTROPY_BINS - 128) / 2 thresholds to choose from.
ENTROPY_BINS = 512


def _entropy_ranges(model_path: Path, reader: CalibrationDataReader, out: Path, workdir: Path) -> None:
    """Entropy (KL) ranges computed with enough bins, written as the calibration cache quantize_static
    reads instead of calibrating again."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator, save_tensors_data  # noqa: PLC0415
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry  # noqa: PLC0415

    calibrator = create_calibrator(
        model_path, sorted(set(QLinearOpsRegistry) | set(QDQRegistry)),
        augmented_model_path=str(workdir / "augmented.onnx"), calibrate_method=CalibrationMethod.Entropy,
        extra_options={"num_bins": ENTROPY_BINS, "num_quantized_bins": 128})
    calibrator.collect_data(reader)
    save_tensors_data(calibrator.compute_data(), out)
    reader.rewind()


class _Counting(CalibrationDataReader):
    """Calls progress(n) for every calibration batch read, so a long calibration shows it is moving."""

    def __init__(self, reader, progress):
        self.reader, self.progress = reader, progress

    def get_next(self):
        batch = self.reader.get_next()
        if batch is not None:
            self.progress(1)
        return batch

    def rewind(self):
        self.reader.rewind()
