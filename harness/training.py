"""`yts train`: train the reference YOLOv8n (built from yolov8n.yaml, no pretrained weights) on a generated
shapes set, score it per slice on the evaluation set, export ONNX — downloading nothing.

ultralytics otherwise reaches out for a font (Arial.ttf), the AMP-check weights (yolo11n.pt), hub sync
and pip installs; `offline_environment` closes each of those doors. Only this module imports
ultralytics/torch, and only inside functions: the suite's runtime needs neither."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import time
from pathlib import Path

from harness.dataset import CLASSES, generate_split
from harness.paths import FIXTURES, cache_dir

EVAL_SET = FIXTURES / "shapes_eval"


def offline_environment(config_dir: Path) -> None:
    """Environment for ultralytics with no network: offline flags, a local font, no settings sync."""
    import matplotlib

    font = config_dir / "Ultralytics" / "Arial.ttf"
    font.parent.mkdir(parents=True, exist_ok=True)
    if not font.exists():
        shutil.copyfile(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf", font)
    os.environ.update({"YOLO_OFFLINE": "1", "YOLO_AUTOINSTALL": "0", "YOLO_CONFIG_DIR": str(config_dir),
                       "YOLO_VERBOSE": os.environ.get("YOLO_VERBOSE", "True")})
    from ultralytics import settings

    settings.update({"sync": False, "wandb": False, "tensorboard": False, "mlflow": False})
    _read_results_without_polars()


def _read_results_without_polars() -> None:
    """The trainer reads results.csv with polars when it saves a checkpoint; hosts without polars (the GPU
    machine) read it with the csv module instead: same dict of columns, float values."""
    try:
        import polars  # noqa: F401
        return
    except ImportError:
        pass
    from ultralytics.engine.trainer import BaseTrainer

    def read_results_csv(self) -> dict:
        try:
            with open(self.csv, newline="") as f:
                rows = list(csv.DictReader(f))
        except OSError:
            return {}
        return {k.strip(): [float(r[k]) for r in rows] for k in (rows[0] if rows else {})}

    BaseTrainer.read_results_csv = read_results_csv


def write_data_yaml(path: Path, train_dir: Path, val: Path) -> Path:
    """data.yaml for ultralytics: train = a split's images/, val = an images dir or a slice list (.txt)."""
    names = "\n".join(f"  {k}: {n}" for k, n in enumerate(CLASSES))
    path.write_text(f"train: {(train_dir / 'images').resolve()}\nval: {val.resolve()}\nnc: {len(CLASSES)}\nnames:\n{names}\n")
    return path


def pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "0" if torch.cuda.is_available() else "cpu"


def training_set(root: Path | None, *, seed: int, n_day: int, n_night: int, sizes: str, workers: int) -> Path:
    """The generated training split, built once per (seed, counts, sizes)."""
    root = root or cache_dir("datasets")
    out = root / f"shapes_s{seed}_d{n_day}_n{n_night}_{sizes}"
    if not (out / "annotations.json").exists():
        t0 = time.time()
        generate_split(out, seed=seed, n_day=n_day, n_night=n_night, sizes=sizes, workers=workers)
        print(f"generated {n_day}+{n_night} images in {time.time() - t0:.0f}s -> {out}", flush=True)
    return out


def validate_slices(weights: Path, eval_dir: Path, *, imgsz: int, device: str, work: Path) -> dict:
    """mAP50-95 / mAP50 of `weights` on each slice of the evaluation set (ultralytics val)."""
    from ultralytics import YOLO

    scores = {}
    for slice_name in ("day", "night", "all"):
        val = eval_dir / "images" if slice_name == "all" else eval_dir / f"{slice_name}.txt"
        data = write_data_yaml(work / f"val_{slice_name}.yaml", eval_dir, val)
        m = YOLO(str(weights)).val(data=str(data), imgsz=imgsz, batch=16, device=device, plots=False,
                                   project=str(work), name=f"val_{slice_name}", exist_ok=True, verbose=False)
        scores[slice_name] = {"mAP50-95": round(float(m.box.map), 4), "mAP50": round(float(m.box.map50), 4)}
        print(f"{slice_name}: {scores[slice_name]}", flush=True)
    return scores


def export_onnx(weights: Path) -> Path:
    """The production export: opset 17, onnxslim-simplified, no NMS, dynamic batch/height/width."""
    from ultralytics import YOLO

    return Path(YOLO(str(weights)).export(format="onnx", opset=17, simplify=True, dynamic=True, device="cpu"))


def train(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    offline_environment(out / "yolo_config")
    from ultralytics import YOLO

    device = pick_device(args.device)
    data_dir = training_set(Path(args.data_root) if args.data_root else None, seed=args.data_seed,
                            n_day=args.day, n_night=args.night, sizes=args.sizes, workers=args.gen_workers)
    eval_dir = Path(args.eval).resolve()
    data = write_data_yaml(out / "data.yaml", data_dir, eval_dir / "images")
    t0 = time.time()
    model = YOLO("yolov8n.yaml")  # architecture only: nc comes from data.yaml, no weights are loaded
    model.train(data=str(data), epochs=args.epochs, time=args.time_min / 60 if args.time_min else None,
                imgsz=args.imgsz, batch=args.batch, workers=args.workers, device=device, seed=args.seed,
                deterministic=False, amp=False, pretrained=False,
                cache=False if args.cache.lower() in ("false", "none", "") else args.cache, plots=False,
                project=str(out), name="train", exist_ok=True, close_mosaic=max(1, args.epochs // 10),
                patience=1000)
    train_s = time.time() - t0
    weights = out / "train" / "weights" / "best.pt"
    record = {"command": " ".join(["yts"] + sys.argv[1:]) if args.command_line is None else args.command_line, "device": device, "train_seconds": round(train_s),
              "data": {"seed": args.data_seed, "day": args.day, "night": args.night, "sizes": args.sizes},
              "train_seed": args.seed, "epochs_requested": args.epochs, "time_limit_min": args.time_min,
              "imgsz": args.imgsz, "batch": args.batch, "weights": str(weights)}
    if args.validate:
        record["eval"] = validate_slices(weights, eval_dir, imgsz=args.imgsz, device=device, work=out)
    if args.export:
        try:
            record["onnx"] = str(export_onnx(weights))
        except Exception as exc:  # noqa: BLE001 - export is optional here; rerun locally if it fails
            record["onnx_error"] = f"{type(exc).__name__}: {exc}"
    (out / "train_record.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train the reference YOLOv8n on a generated shapes set (offline)")
    p.add_argument("--out", default="runs/reference", help="run folder (weights, results.csv, record)")
    p.add_argument("--data-root", default=None, help="where the training split is generated (default: cache)")
    p.add_argument("--data-seed", type=int, default=1)
    p.add_argument("--day", type=int, default=2400)
    p.add_argument("--night", type=int, default=1200)
    p.add_argument("--sizes", default="mixed")
    p.add_argument("--gen-workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--eval", default=str(EVAL_SET), help="evaluation split (validation during training)")
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--time-min", type=float, default=None, help="wall-clock budget; ultralytics fits epochs to it")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--device", default="auto", help="auto: GPU 0 when CUDA is present, else cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default="ram", help="ultralytics image cache: ram, disk or False")
    p.add_argument("--no-validate", dest="validate", action="store_false")
    p.add_argument("--export", action="store_true", help="also export ONNX (needs onnxslim)")
    p.set_defaults(func=lambda a: train(a), command_line=None)
