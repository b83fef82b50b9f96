"""Where yolo_e2e's GPU answers part from the FP32 reference: the decoder, the device letterbox or the
FP16 engine. On the evaluation images, each variant's detections are matched against the reference
pipeline's (PIL decode, CPU letterbox, ONNX Runtime FP32) with the accuracy suite's box report:

    decode+letterbox+fp16   what yolo_e2e runs (nvJPEG, device letterbox, the FP16 engine)
    decode+letterbox+fp32   the same device pre-processing, FP32 engine: pre-processing alone
    engine fp16             PIL decode and CPU letterbox, FP16 engine on the GPU: the engine alone

plus the pixel difference between nvJPEG and PIL decodes. The accuracy suite judges the served model
against the reference and fails it; this splits the difference between the steps, which it cannot do from
outside the server. Needs CUDA and torchvision.

    python -m benchmarks.probes.decode_drift --out OUT.json [--images 100]"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from benchmarks.probes.card import probe_arguments, write_record
from benchmarks.probes.reference import IMGSZ, reference_onnx
from harness.accuracy.boxes import BoxReport
from harness.engines.artifacts import EVAL_SET
from harness.vision.pipeline import DetectionPipeline, Job, LocalPipeline

CONF, IOU, MAX_DET = 0.25, 0.7, 300


class EnginePipeline(DetectionPipeline):
    """The reference pre/post-processing around a harness engine."""

    def __init__(self, engine):
        super().__init__(imgsz=IMGSZ, conf=CONF, iou=IOU, max_det=MAX_DET)
        self.engine, self.input_name = engine, engine._signature.inputs[0].name

    def __call__(self, blobs):
        batch, metas = self.preprocess(blobs)
        raw = next(iter(self.engine.infer({self.input_name: batch}).values()))
        return self.postprocess(raw, metas)


def rows(detections, num, index) -> np.ndarray:
    return np.asarray(detections[index][: int(np.asarray(num[index]).reshape(-1)[0])], dtype=np.float64)


def parse_args(argv=None) -> argparse.Namespace:
    parser = probe_arguments(__doc__)
    parser.add_argument("--images", type=int, default=100, help="evaluation images compared")
    return parser.parse_args(argv)


def measure(images: int) -> dict:
    import torch

    from harness.engines.torch_engine import TorchEngine
    from harness.vision.gpu.image import decode_images
    from harness.vision.gpu.pipeline import DevicePipeline
    from harness.vision.image import decode_image_bytes

    onnx = reference_onnx(IMGSZ)
    blobs = [p.read_bytes() for p in sorted((EVAL_SET / "images").rglob("*.jpg"))[:images]]
    reference = LocalPipeline(onnx, IMGSZ, CONF, IOU, MAX_DET)
    variants = {
        "decode+letterbox+fp16": DevicePipeline(TorchEngine(onnx, precision="fp16"), IMGSZ, 8, MAX_DET),
        "decode+letterbox+fp32": DevicePipeline(TorchEngine(onnx, precision="fp32"), IMGSZ, 8, MAX_DET),
        "engine fp16": EnginePipeline(TorchEngine(onnx, precision="fp16")),
    }
    reports = {name: BoxReport() for name in variants}
    pixel = []
    for start in range(0, len(blobs), 8):
        chunk = blobs[start: start + 8]
        want = reference(chunk)
        for name, pipeline in variants.items():
            got = pipeline.detect([Job(chunk, CONF, IOU, MAX_DET)])[0] if isinstance(pipeline, DevicePipeline) \
                else pipeline(chunk)
            for k in range(len(chunk)):
                reports[name].add(start + k, rows(*want, k), rows(got[0], got[1], k), 0.5)
        for blob, gpu in zip(chunk, decode_images(chunk, "cuda")):
            diff = np.abs(gpu.permute(1, 2, 0).cpu().numpy().astype(np.int16) - decode_image_bytes(blob).astype(np.int16))
            pixel.append((int(diff.max()), float(diff.mean()), float((diff > 2).mean())))
    return {"images": len(blobs), "gpu": torch.cuda.get_device_name(),
            "pixels_nvjpeg_vs_pil": {"max": max(p[0] for p in pixel), "mean": float(np.mean([p[1] for p in pixel])),
                                     "share_over_2_levels": float(np.mean([p[2] for p in pixel]))},
            "vs_fp32_reference": {name: report.summary() for name, report in reports.items()}}


def main(argv=None) -> int:
    args = parse_args(argv)
    result = measure(args.images)
    write_record(args.out, "decode_drift", args, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
