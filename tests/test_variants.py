"""Model variants built from the reference model: signatures, FP16 error against FP32, INT8 Q/DQ, the
calibration record, and the content-hash cache. Builds go to a per-session cache (a few seconds at 320).

Source: reference_model/yolov8n_shapes.onnx, else $YTS_DEV_MODEL; calibration images: fixtures/shapes_eval,
else $YTS_DEV_CALIB (a folder of images + annotations.json with per-image "slice")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.engines import read_signature
from harness.engines.artifacts import EVAL_SET, REFERENCE_MODEL, ArtifactCache, VariantSpec
from harness.engines.calibration import load_rgb
from harness.engines.ort import OrtEngine


def _source() -> Path:
    if REFERENCE_MODEL.exists():
        return REFERENCE_MODEL
    if os.environ.get("YTS_DEV_MODEL"):
        return Path(os.environ["YTS_DEV_MODEL"])
    pytest.skip(f"{REFERENCE_MODEL} not committed yet and $YTS_DEV_MODEL not set")


def _calibration_dir() -> str:
    if (EVAL_SET / "annotations.json").exists():
        return str(EVAL_SET)
    if os.environ.get("YTS_DEV_CALIB"):
        return os.environ["YTS_DEV_CALIB"]
    pytest.skip(f"{EVAL_SET} not committed yet and $YTS_DEV_CALIB not set")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> ArtifactCache:
    return ArtifactCache(root=tmp_path_factory.mktemp("artifacts"), source=_source())


def build(cache: ArtifactCache, name: str, **overrides):
    if name.startswith("int8"):
        overrides.setdefault("calibration_dir", _calibration_dir())
        overrides.setdefault("per_slice", 8)
    return cache.build(VariantSpec.parse(name, **overrides))


def real_images(size: int, count: int = 4) -> np.ndarray:
    """Letterboxed calibration-set images (real pixel statistics, not noise) when available."""
    from harness.engines.calibration import CalibrationSet
    from harness.vision.letterbox import letterbox

    selection = CalibrationSet(_calibration_dir(), None, count).select()[:count]
    return np.stack([letterbox(load_rgb(path), size)[0] for path, _ in selection])


@pytest.mark.parametrize(
    "name, batch, size, anchors",
    [("fp32-dyn-320", -1, 320, 2100), ("fp32-b1-320", 1, 320, 2100), ("fp32-dyn-640", -1, 640, 8400), ("fp32-b2-640", 2, 640, 8400)],
)
def test_static_dynamic_and_size_variants_have_their_signatures(cache, name, batch, size, anchors):
    signature = read_signature(build(cache, name).path)
    ((image,), (output,)) = signature.inputs, signature.outputs
    assert (image.name, image.dtype, image.shape) == ("images", "FP32", (batch, 3, size, size))
    assert output.name == "output0" and output.dtype == "FP32"
    assert output.shape[0] == batch and output.shape[2] == anchors, output.shape


def test_dynamic_variant_runs_any_batch_and_equals_the_source(cache):
    x = np.random.default_rng(1).random((3, 3, 320, 320), dtype=np.float32)
    variant = OrtEngine(build(cache, "fp32-dyn-320").path).infer({"images": x})["output0"]
    source = OrtEngine(_source()).infer({"images": x})["output0"] if not _stores_fp16(_source()) else None
    assert variant.shape[0] == 3
    if source is not None:
        np.testing.assert_allclose(variant, source, atol=1e-4)


def _stores_fp16(path: Path) -> bool:
    return any(i.data_type == onnx.TensorProto.FLOAT16 for i in onnx.load(str(path)).graph.initializer)


def error_stats(ours: np.ndarray, reference: np.ndarray) -> dict:
    absolute = np.abs(ours - reference)
    relative = absolute / np.maximum(np.abs(reference), 1e-3)
    return {"abs_max": float(absolute.max()), "abs_mean": float(absolute.mean()), "abs_p99": float(np.percentile(absolute, 99)),
            "rel_max": float(relative.max()), "rel_mean": float(relative.mean()), "rel_p99": float(np.percentile(relative, 99))}


@pytest.mark.parametrize("size", [320])
def test_fp16_raw_output_error_vs_fp32(cache, size, record_property, capsys):
    fp16_path = build(cache, f"fp16-dyn-{size}").path
    model = onnx.load(str(fp16_path))
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in model.graph.initializer), "FP16 variant has no fp16 weights"
    signature = read_signature(fp16_path)
    assert [s.dtype for s in signature.inputs + signature.outputs] == ["FP32", "FP32"], "FP16 variant must keep fp32 I/O"
    x = real_images(size)
    ours = OrtEngine(fp16_path).infer({"images": x})["output0"]
    reference = OrtEngine(build(cache, f"fp32-dyn-{size}").path).infer({"images": x})["output0"]
    boxes, scores = error_stats(ours[:, :4], reference[:, :4]), error_stats(ours[:, 4:], reference[:, 4:])
    for part, stats in (("box_px", boxes), ("score", scores)):
        for key, value in stats.items():
            record_property(f"fp16_{size}_{part}_{key}", value)
    with capsys.disabled():
        print(f"\nFP16 vs FP32 @{size} (ORT CPU: weight rounding only) boxes[px]: {boxes}\n  scores: {scores}")
    assert boxes["abs_max"] < 2.0, f"FP16 box error {boxes['abs_max']:.3f} px (expected < 2 px: weight rounding only)"
    assert scores["abs_max"] < 0.01, f"FP16 class-score error {scores['abs_max']:.4f}"


def test_int8_is_qdq_keeps_the_decode_in_float_and_records_its_calibration(cache):
    from harness.engines.variants import detect_decode_nodes

    artifact = build(cache, "int8-day+night-minmax-quint8-dyn-320")
    model = onnx.load(str(artifact.path))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") > 50 and ops.count("DequantizeLinear") > 50
    decode = set(detect_decode_nodes(model))
    producers = {o: n for n in model.graph.node for o in n.output}
    final = producers[model.graph.output[0].name]
    assert final.name in decode and any("dfl" in name for name in decode), f"decode nodes found: {sorted(decode)[:5]}..."
    assert final.op_type == "Concat", f"the output must come from the float decode Concat, not {final.op_type}"
    assert all(producers[i].op_type != "DequantizeLinear" for i in final.input if i in producers), "final Concat is quantized"
    record = json.loads((artifact.path.parent / "calibration.json").read_text())
    assert set(record["composition"]["slices"]) == {"day", "night"}
    assert all(s["count"] > 0 for s in record["composition"]["slices"].values())
    assert sum(record["composition"]["overall"]["luma_histogram"]) == record["composition"]["images"]
    assert record["method"] == "minmax" and record["activation_type"] == "quint8"


def test_day_only_calibration_records_no_night(cache):
    record = json.loads((build(cache, "int8-day-minmax-quint8-dyn-320").path.parent / "calibration.json").read_text())
    assert list(record["composition"]["slices"]) == ["day"]


@pytest.mark.parametrize("name", ["int8-day+night-minmax-quint8-dyn-320", "int8-day+night-percentile-quint8-b1-320",
                                  "int8-day+night-entropy-qint8-dyn-320"])
def test_int8_runs_and_its_output_is_plausible(cache, name, record_property):
    x = real_images(320, count=1 if "-b1-" in name else 4)
    ours = OrtEngine(build(cache, name).path).infer({"images": x})["output0"]
    reference = OrtEngine(build(cache, "fp32-dyn-320" if "-dyn-" in name else "fp32-b1-320").path).infer({"images": x})["output0"]
    assert np.isfinite(ours).all()
    # Boxes are judged where fp32 sees an object (score > 0.25): a background anchor's box is noise that
    # NMS never sees, and over all anchors its p99 moves by tens of pixels with any change of ranges.
    confident = reference[:, 4:].max(axis=1) > 0.25
    assert confident.sum() >= 4, f"only {confident.sum()} confident anchors in the sample images"
    box_error = np.abs(ours[:, :4] - reference[:, :4]).transpose(0, 2, 1)[confident]
    scores = error_stats(ours[:, 4:], reference[:, 4:])
    record_property(f"{name}_confident_box_abs_p99_px", float(np.percentile(box_error, 99)))
    record_property(f"{name}_score_abs_p99", scores["abs_p99"])
    # Plausible, not accurate (mAP is the accuracy suite's job).
    assert np.percentile(box_error, 99) < 4.0, f"{name}: p99 box error {np.percentile(box_error, 99):.1f} px vs fp32 on detected objects"
    assert ours[:, 4:].min() >= 0 and ours[:, 4:].max() <= 1
    assert scores["abs_p99"] < 0.1, f"{name}: p99 class-score error {scores['abs_p99']:.3f} vs fp32"


def test_calibration_methods_choose_different_ranges(cache):
    """ORT's quantize_static gives Entropy too few bins and it equals MinMax unless we calibrate ourselves."""
    from onnx import numpy_helper

    def scales(name: str) -> dict:
        model = onnx.load(str(build(cache, name).path))
        return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer if i.name.endswith("_scale")}

    minmax, entropy = scales("int8-day+night-minmax-qint8-dyn-320"), scales("int8-day+night-entropy-qint8-dyn-320")
    differ = [name for name in minmax if name in entropy and not np.array_equal(minmax[name], entropy[name])]
    assert len(differ) > len(minmax) // 4, f"entropy calibration changed only {len(differ)} of {len(minmax)} scales vs minmax"


def test_a_second_build_rebuilds_nothing(cache):
    first = build(cache, "fp32-b1-320", per_slice=64)
    stamp = first.path.stat().st_mtime_ns, (first.path.parent / "build.json").read_text()
    second = build(cache, "fp32-b1-320")
    assert second.path == first.path and second.key == first.key and not second.built
    assert (second.path.stat().st_mtime_ns, (second.path.parent / "build.json").read_text()) == stamp
    other = build(cache, "fp32-b2-320")
    assert other.key != first.key and other.path.parent != first.path.parent


def test_calibration_choice_is_part_of_the_key(cache):
    day = build(cache, "int8-day-minmax-quint8-dyn-320")
    both = build(cache, "int8-day+night-minmax-quint8-dyn-320")
    assert day.key != both.key


@pytest.mark.parametrize("name", ["fp32-dyn-640", "fp16-b1-320", "int8-day+night-minmax-quint8-dyn-640",
                                  "int8-all-entropy-qint8-b4-320", "trt-int8-day+night-minmax-qint8-dyn-640", "trt-fp16-b1-640"])
def test_variant_names_round_trip(name):
    assert VariantSpec.parse(name).name == name


def test_trt_int8_needs_symmetric_activations():
    with pytest.raises(ValueError, match="qint8"):
        VariantSpec.parse("trt-int8-day-minmax-quint8-dyn-640")
