"""`yts reference --out DIR`: the reference repository, built for this machine, copied where a user
wants it — what vendors start from, and what `yts certify --repo DIR` certifies."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def export(args) -> int:
    from harness.reference import build_reference_repository

    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"yts reference: {out} exists and is not empty; choose a new folder", file=sys.stderr)
        return 2
    if args.post == "onnx-nms":
        from harness.reference.onnx_nms import build_repository

        build_repository(out, args.imgsz)
        print(f"[yts reference] NMS-in-the-graph variant at {args.imgsz} px: {out.resolve()} "
              f"({', '.join(sorted(p.name for p in out.iterdir() if p.is_dir()))})")
        return 0
    from harness.hostinfo import reference_device

    device, why = reference_device(args.device)
    models = build_reference_repository(device, args.imgsz)
    shutil.copytree(models, out, dirs_exist_ok=True)
    print(f"[yts reference] {device} repository ({why}) at {args.imgsz} px: {out.resolve()} "
          f"({', '.join(sorted(p.name for p in out.iterdir() if p.is_dir()))})")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("reference", help="write the reference model repository (built for this machine) to a folder")
    parser.add_argument("--out", required=True, help="new folder to write the repository into")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                        help="cpu: ONNX Runtime, KIND_CPU; gpu: KIND_GPU, PyTorch FP16; auto (default): gpu where an "
                             "NVIDIA GPU and a CUDA torch are here")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--post", default="python", choices=("python", "onnx-nms"),
                        help="python (default): the reference repository; onnx-nms: the variant with NMS in the ONNX "
                             "graph (Python backend running ONNX Runtime, and platform onnxruntime_onnx for an NGC image)")
    parser.set_defaults(func=export)
