#!/usr/bin/env python3
"""One bounded run of the reference deployment on a GPU machine (issues 4, 8, 12; issue 3 point 8), every
stage timed out on its own and written to OUT/gpu_run.json as soon as it ends, so a run cut short still
returns what it measured.

Stages (in this order; `--stages` picks a subset):
  env          versions, GPU, /dev/shm, which cv2 (the machine's or benchmarks/cv2_fallback)
  unit         pytest tests/test_gpu_pipeline.py and the torch engine tests on this GPU
  build        build_reference_repository(device, imgsz) (FP32 ONNX only: the server here loads Python-backend
               models, yolo_onnx/yolo_trt stay unloadable), a scratch copy, and yolo_e2e__unbatched (the
               same model without dynamic_batching, for the gain)
  server       ProcessServer (the nvidia-pytriton tritonserver) loading yolo_raw, yolo_e2e, yolo_e2e__unbatched
  accuracy     yolo_e2e on N eval images vs the local reference (LocalPipeline: same letterbox, ONNX Runtime
               FP32 on CPU, same NMS): box-for-box at IoU >= 0.99 / score within 1e-3 (the CPU criterion;
               on GPU the engine is PyTorch FP16, so the match fraction and the deltas are reported), plus
               mAP of served vs local on those images at conf 0.001
  e2e_cN       harness.load closed loop on yolo_e2e (one pre-encoded eval JPEG per request, gRPC): throughput,
               latency percentiles, average batch and histogram (statistics API), server-side split, GPU
               utilisation (nv_gpu_utilization sampled from the metrics endpoint during the run)
  e2e_xK_cN    yolo_e2e with K images a request ([K, 1] BYTES, --images-per-request): images/s when the
               per-request costs (gRPC, the Python backend's request handling) are shared by K images
  echo_cN      the same on yts_null (an echo model, one CPU instance): requests/s the generator, Triton's gRPC
               front end and a Python-backend model reach with no work in the model, the harness's own ceiling
  unbatched_cN the same on yolo_e2e__unbatched: the dynamic-batching gain at the same concurrency
  raw_cN       yolo_raw, one letterboxed FP32 [1,3,640,640] image per request
  fidelity     our HTTP generator vs wrk (carried, .gpu/wrk.tar.xz) on yolo_raw at 64 connections: the ratio
  e2e_poisson  open loop, Poisson arrivals at --poisson-fraction of the best closed-loop e2e throughput;
               e2e_poisson_rR the same at each of --poisson-rates R/s (the open-loop sweep)
  lifecycle    pytest suites/lifecycle on the GPU build (stress 45 s): request counts, 0 failed expected
  profile      the engine at --profile-batch (--profile-compile: through torch.compile) under torch.profiler:
               device time by kernel and by aten op with input shapes, per forward all kernels / inductor's
               triton_* / copies; the stem convolution with 3 input channels vs padded to 4 and 8
  pipeline     yolo_e2e's DevicePipeline locally, per batch size: header check, nvJPEG decode, letterbox,
               engine, NMS, restore + copy out, each synchronised and timed, and the whole detect()
  fusion       every convolution of the engine at --profile-batch: cuDNN's convolution alone, + bias + SiLU as
               the engine runs them, and cuDNN's fused conv->bias->SiLU graph (benchmarks/fusion.py; needs
               the carried nvidia-cudnn-frontend): GPU ms summed over the graph, what fusing would save
  decode       the decoder's ceiling: --decode-processes processes decoding batches of the load JPEG with
               torchvision's nvJPEG together (images/s, and every GPU engine's utilisation from nvidia-smi dmon)
  reload_V     yolo_e2e loaded again with a config override (--variants: iN = N instances, cN = N
               instances with torch_compile; suffixes, in this order: bM max_batch_size M, pA-B preferred
               batch sizes A and B, dU max_queue_delay U µs), then vV_cN: the closed loop on it at
               --variant-concurrency
  fp16_vs_fp32 TorchEngine (FP16 on GPU, torch.compile as yolo_e2e is served) vs ONNX Runtime FP32 on the eval
               set: raw-output error statistics (box rows in pixels, score rows) and COCO mAP of both
  engine       the limit: TorchEngine alone on pre-batched device tensors (no transport, no Python backend),
               images/s per batch size, node by node ("interpreted"), through the shape plan, and as CUDA
               graphs (what the served model runs), with --engine-compile also torch.compile'd plans as CUDA
               graphs (compile time, difference from eager); the numpy-in/numpy-out path; conv FLOPs per image

Usage on the GPU machine: see benchmarks/gpu_run.sh (venv with numpy 1.26 for the Python backend stub) and
benchmarks/README.md. Locally, a smoke run on CPU:
  .venv/bin/python benchmarks/gpu_run.py --device cpu --out /tmp/gpu-smoke --images 2 --e2e-concurrency 1 \
      --raw-concurrency 1 --unbatched-concurrency 1 --window-s 0.5 --warmup-s 0.5 --max-windows 3 \
      --engine-batches 1 --engine-seconds 0.3 --eval-images 4 --deadline-s 400
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

EVAL_DIR = ROOT / "fixtures" / "shapes_eval"
H200_FP16_DENSE_TFLOPS = 989.0  # H200 SXM datasheet, dense FP16/BF16 tensor core: an assumption, not a reading
UNBATCHED = "yolo_e2e__unbatched"
ECHO = "yts_null"  # harness.load.null_model: the generator's and the Python backend's own per-request ceiling


class StageTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise StageTimeout("stage budget exhausted")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


class Recorder:
    """Holds the run's JSON and rewrites it (atomically) after every stage."""

    def __init__(self, out: Path, deadline_s: float, meta: dict):
        self.out = out
        self.path = out / "gpu_run.json"
        self.started = time.monotonic()
        self.deadline = self.started + deadline_s
        self.data = {"meta": meta, "stages": {}, "summary": {}}
        self.write()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        self.data["meta"]["elapsed_s"] = round(time.monotonic() - self.started, 1)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=_json_default))
        os.replace(tmp, self.path)

    def stage(self, name: str, budget_s: float, fn, *args, min_s: float = 5.0, **kwargs):
        """Run fn under a wall-clock budget (SIGALRM) capped by the run's deadline; record ok / failed /
        timeout / skipped with its seconds; return fn's result or None."""
        left = self.remaining()
        entry: dict = {"budget_s": round(min(budget_s, max(left, 0)), 1)}
        if left < min_s:
            entry.update(status="skipped", reason=f"run deadline: {left:.0f} s left, stage needs >= {min_s:.0f} s")
            self.data["stages"][name] = entry
            self.write()
            print(f"[{name}] skipped: {entry['reason']}", flush=True)
            return None
        print(f"[{name}] start (budget {entry['budget_s']:.0f} s, run has {left:.0f} s left)", flush=True)
        started = time.monotonic()
        result = None
        signal.setitimer(signal.ITIMER_REAL, max(1.0, min(budget_s, left)))
        try:
            result = fn(*args, **kwargs)
            entry.update(status="ok", result=result)
        except StageTimeout as error:
            entry.update(status="timeout", error=str(error), traceback=traceback.format_exc(limit=8))
        except Exception as error:  # one stage failing must not lose the others
            entry.update(status="failed", error=f"{type(error).__name__}: {error}"[:4000],
                         traceback=traceback.format_exc(limit=12)[-6000:])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        entry["seconds"] = round(time.monotonic() - started, 2)
        self.data["stages"][name] = entry
        self.write()
        status = entry["status"]
        print(f"[{name}] {status} in {entry['seconds']:.1f} s" + (f": {entry.get('error')}" if status != "ok" else ""), flush=True)
        return result


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _r(value, digits: int = 4):
    return None if value is None else round(float(value), digits)


# ---- env ---------------------------------------------------------------------------------------------

def stage_env(args) -> dict:
    info = {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform(),
            "cpus": len(os.sched_getaffinity(0)), "argv": sys.argv}
    for name in ("numpy", "onnx", "onnxruntime", "tritonclient", "grpc", "google.protobuf", "PIL", "pycocotools"):
        try:
            module = __import__(name, fromlist=["__version__"])
            info[name] = getattr(module, "__version__", "present")
        except Exception as error:  # noqa: BLE001 - recorded, not fatal
            info[name] = f"unavailable: {type(error).__name__}: {error}"
    try:
        import cv2

        info["cv2"] = cv2.__version__
        info["cv2_fallback"] = bool(getattr(cv2, "IS_YTS_FALLBACK", False))
    except Exception as error:  # noqa: BLE001
        info["cv2"] = f"unavailable: {error}"
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                           "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                           "cudnn": torch.backends.cudnn.version()}
    except Exception as error:  # noqa: BLE001
        info["torch"] = f"unavailable: {type(error).__name__}: {error}"
    for label, cmd in {"nvidia_smi": ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                      "--format=csv,noheader"], "dev_shm": ["df", "-h", "/dev/shm"],
                       "cpu_topology": ["lscpu", "--parse=CPU,CORE,SOCKET"]}.items():
        try:
            info[label] = subprocess.run(cmd, capture_output=True, text=True, timeout=15).stdout.strip()
        except Exception as error:  # noqa: BLE001
            info[label] = f"unavailable: {error}"
    return info


# ---- build / server ----------------------------------------------------------------------------------

def stage_unit(ctx) -> dict:
    """The harness's own GPU tests on this machine: the device pipeline and the engine against their CPU
    twins, CUDA graphs, nvJPEG (tests/test_gpu_pipeline.py, tests/test_engines.py)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           "tests/test_gpu_pipeline.py", "tests/test_engines.py", "-k", "torch or gpu or device or nms or cuda"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    tail = (done.stdout + done.stderr).strip().splitlines()
    return {"returncode": done.returncode, "summary": tail[-1] if tail else "", "tail": tail[-40:]}


class Context:
    def __init__(self, args):
        self.args = args
        self.built: Path | None = None  # the cached reference repository (models/)
        self.repository: Path | None = None  # the scratch copy served
        self.server = None
        self.grpc: str | None = None
        self.metrics: str | None = None
        self.engine_model: Path | None = None  # the FP32 ONNX the served models run
        self.best_e2e = 0.0
        self.load_points: dict[str, dict] = {}
        self.evalset = None  # the EvalSet of the accuracy stage
        self.e2e_config: dict | None = None  # yolo_e2e's config as built, before any variant reload


def stage_build(ctx: Context) -> dict:
    from harness.load.batching import write_unbatched_twin
    from harness.load.null_model import write_null_model
    from harness.reference.build import build_reference_repository, manifest
    from harness.repository.config import read_config
    from harness.repository.scratch import scratch_copy

    started = time.monotonic()
    ctx.built = build_reference_repository(ctx.args.device, ctx.args.imgsz, precisions=("fp32",))
    built_s = time.monotonic() - started
    ctx.repository = scratch_copy(ctx.built)
    write_unbatched_twin(ctx.repository, "yolo_e2e")
    write_null_model(ctx.repository)
    ctx.engine_model = ctx.built / "yolo_e2e" / "1" / "model.onnx"
    record = manifest(ctx.built)
    configs = {}
    for name in ("yolo_raw", "yolo_e2e", UNBATCHED):
        config = read_config(ctx.repository / name)
        configs[name] = {
            "max_batch_size": config.max_batch_size,
            "dynamic_batching": ({"preferred_batch_size": list(config.dynamic_batching.preferred_batch_size),
                                  "max_queue_delay_microseconds": config.dynamic_batching.max_queue_delay_microseconds}
                                 if config.HasField("dynamic_batching") else None),
            "instance_group": [{"kind": ig.Kind.Name(ig.kind), "count": ig.count} for ig in config.instance_group],
            "parameters": {k: v.string_value for k, v in config.parameters.items()},
        }
    return {"repository": str(ctx.built), "served_copy": str(ctx.repository), "build_s": round(built_s, 2),
            "target": record["target"], "plan_skipped": record.get("plan_skipped"), "artifacts": record["artifacts"],
            "configs": configs}


def stage_server(ctx: Context) -> dict:
    from harness.servers.base import ServerSettings
    from harness.servers.process import ProcessServer

    if ctx.repository is None:
        raise RuntimeError("no repository: the build stage failed")
    gpu = ctx.args.device == "gpu"
    settings = ServerSettings(repository=ctx.repository, load_models=("yolo_raw", "yolo_e2e", UNBATCHED, ECHO),
                              startup_timeout=float(ctx.args.startup_timeout), gpus=gpu,
                              log_dir=ctx.args.out / "logs",
                              extra_args=(("--metrics-interval-ms=500",) if gpu else ()))
    server = ProcessServer(settings)
    ctx.server = server  # stop() even when start fails half-way
    started = time.monotonic()
    server.start()
    ctx.grpc, ctx.metrics = server.endpoints.grpc, server.endpoints.metrics
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(ctx.grpc)
    index = client.get_model_repository_index(as_json=True)
    served = {}
    for name in ("yolo_raw", "yolo_e2e", UNBATCHED):
        config = client.get_model_config(name, as_json=True)["config"]
        served[name] = {"instance_group": config.get("instance_group"), "max_batch_size": config.get("max_batch_size"),
                        "dynamic_batching": config.get("dynamic_batching")}
    client.close()
    return {"startup_s": round(time.monotonic() - started, 2), "endpoints": vars(server.endpoints),
            "binary": str(server.files.binary), "log": str(server.log_path), "index": index.get("models", index),
            "served_configs": served}


def stage_server_stop(ctx: Context) -> dict:
    server, ctx.server = ctx.server, None
    if server is None:
        return {"stopped": False}
    tail = server.log_tail(400)
    (ctx.args.out / "tritonserver.log").write_text(tail)
    server.stop()
    return {"stopped": True, "log_tail_lines": len(tail.splitlines())}


# ---- accuracy (served vs local) ----------------------------------------------------------------------

def _detect(client, model: str, blob: bytes, parameters: dict | None = None) -> np.ndarray:
    import tritonclient.grpc as grpcclient

    tensor = grpcclient.InferInput("images", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[blob]], dtype=np.object_))
    result = client.infer(model, [tensor], parameters=parameters or None)
    rows = result.as_numpy("detections").reshape(-1, 6).astype(np.float64)
    n = int(result.as_numpy("num_detections").reshape(-1)[0])
    return rows[:n]


def _box_stats(reference: dict[int, np.ndarray], candidate: dict[int, np.ndarray]) -> dict:
    """Box-for-box comparison, image by image: the CPU criterion (same count, every box matched at
    IoU >= 0.99, no class flip, score within 1e-3) and the deltas."""
    from harness.accuracy.boxes import BoxReport
    from harness.vision.matching import match_detections

    strict, loose = BoxReport(), BoxReport()
    passing, coord_deltas, score_deltas, per_image = 0, [], [], []
    for image_id, ref in reference.items():
        cand = candidate[image_id]
        s = strict.add(image_id, ref, cand, 0.99)
        loose.add(image_id, ref, cand, 0.5)
        match = match_detections(ref, cand, 0.5)
        if len(match.pairs):
            a, b = ref[match.pairs[:, 0]], cand[match.pairs[:, 1]]
            coord_deltas.extend(np.abs(a[:, :4] - b[:, :4]).max(axis=1).tolist())
            score_deltas.extend(np.abs(a[:, 4] - b[:, 4]).tolist())
        ok = (len(ref) == len(cand) and s.missed == 0 and s.extra == 0 and s.class_flips == 0
              and s.max_score_delta <= 1e-3)
        passing += ok
        per_image.append({"image_id": image_id, "reference": len(ref), "served": len(cand), "matched_iou99": s.matched,
                          "max_score_delta": _r(s.max_score_delta, 6), "pass": bool(ok)})
    coord = np.asarray(coord_deltas) if coord_deltas else np.zeros(1)
    score = np.asarray(score_deltas) if score_deltas else np.zeros(1)
    return {
        "images": len(reference), "images_passing_cpu_criterion": passing,
        "pass_fraction": _r(passing / max(len(reference), 1)),
        "iou99": strict.summary(), "iou50": loose.summary(),
        "box_coord_delta_px": {"mean": _r(coord.mean()), "p99": _r(np.percentile(coord, 99)), "max": _r(coord.max())},
        "score_delta": {"mean": _r(score.mean(), 6), "p99": _r(np.percentile(score, 99), 6), "max": _r(score.max(), 6)},
        "per_image": per_image,
    }


def _coco(evalset, detections: dict[int, np.ndarray]) -> dict:
    from harness.metrics.coco import Detections, coco_map

    ids = set(detections)
    gt = {**evalset.coco, "images": [i for i in evalset.coco["images"] if i["id"] in ids],
          "annotations": [a for a in evalset.coco["annotations"] if a["image_id"] in ids]}
    dets = [Detections(i, rows[:, :4], rows[:, 4], rows[:, 5].astype(int)) for i, rows in detections.items()]
    return {k: {m: _r(v) if m != "images" else v for m, v in d.items()} for k, d in coco_map(gt, dets).items()}


def stage_accuracy(ctx: Context) -> dict:
    import tritonclient.grpc as grpcclient

    from harness.accuracy.evalset import EvalSet
    from harness.vision.pipeline import LocalPipeline

    if ctx.server is None:
        raise RuntimeError("no server")
    evalset = ctx.evalset = EvalSet(EVAL_DIR, images_per_slice=max(1, ctx.args.images // 2))
    images = evalset.images[: ctx.args.images]
    client = grpcclient.InferenceServerClient(ctx.grpc)
    out: dict = {"model": "yolo_e2e", "engine": "torch fp16 (KIND_GPU)" if ctx.args.device == "gpu" else "onnxruntime fp32 (KIND_CPU)",
                 "reference": "LocalPipeline: onnxruntime fp32 CPU, same letterbox and NMS", "image_files": [i.file_name for i in images]}
    for label, conf in (("default_thresholds", None), ("conf_0.001", 0.001)):
        local = LocalPipeline(ctx.engine_model, imgsz=ctx.args.imgsz, conf=conf or 0.25, iou=0.7, max_det=300)
        served, reference, seconds = {}, {}, 0.0
        for image in images:
            blob = image.encoded()
            t0 = time.perf_counter()
            served[image.id] = _detect(client, "yolo_e2e", blob, {"conf": conf} if conf else None)
            seconds += time.perf_counter() - t0
            detections, num = local([blob])
            reference[image.id] = detections[0, : int(num[0])].astype(np.float64)
        entry = _box_stats(reference, served) if conf is None else {}
        if conf is not None:  # mAP wants the low threshold; boxes at it are mostly noise, so compare mAP only
            entry = {"served_mAP": _coco(evalset, served), "local_mAP": _coco(evalset, reference),
                     "boxes_iou50": _box_stats(reference, served)["iou50"]}
        entry["served_seconds_sequential"] = round(seconds, 3)
        out[label] = entry
    if ctx.args.device == "gpu":
        out["same_engine"] = _same_engine(ctx, client, images)
    client.close()
    crit = out["default_thresholds"]
    out["verdict"] = ("box-for-box equal (CPU criterion met on every image)" if crit["images_passing_cpu_criterion"] == crit["images"]
                      else f"{crit['images_passing_cpu_criterion']}/{crit['images']} images meet the CPU criterion; "
                           f"matched at IoU>=0.99: {crit['iou99']['matched']:.3f}, at 0.5: {crit['iou50']['matched']:.3f}; "
                           f"max score delta {crit['score_delta']['max']}, max coord delta {crit['box_coord_delta_px']['max']} px")
    return out


def _same_engine(ctx: Context, client, images) -> dict:
    """Issue 4's GPU criterion: the served yolo_e2e against a local run of the same device pipeline (nvJPEG,
    device letterbox, TorchEngine FP16 compiled as the served config says, its CUDA graphs, GPU NMS) on this GPU. Requests go one at a
    time, so the server executes batch 1 like the local run (FP16 kernels differ by batch). `host_pipeline`
    compares the same engine behind the numpy/cv2 pipeline: what the GPU pre/post-processing changes."""
    from harness.reference.serving import open_detector
    from harness.vision.pipeline import DetectionPipeline, Job

    config, params = _e2e_config(ctx)
    # the served model's own constructor, as its KIND_GPU instance 0 calls it
    args = {"model_repository": str(ctx.repository / "yolo_e2e"), "model_version": "1",
            "model_instance_kind": "GPU", "model_instance_device_id": 0}
    device = open_detector(args, params, 300, config.max_batch_size)
    engine = device.engine
    host = DetectionPipeline(imgsz=ctx.args.imgsz, conf=0.25, iou=0.7, max_det=300)
    served, reference, host_rows = {}, {}, {}
    for image in images:
        blob = image.encoded()
        served[image.id] = _detect(client, "yolo_e2e", blob)
        (detections, num), = device.detect([Job([blob], 0.25, 0.7, 300)])
        reference[image.id] = detections[0, : int(num[0, 0])].numpy().astype(np.float64)
        batch, metas = host.preprocess([blob])
        raw = engine.infer({"images": batch})["output0"]
        rows, n = host.postprocess(raw, metas)
        host_rows[image.id] = rows[0, : int(n[0])].astype(np.float64)
    out = _box_stats(reference, served)
    out["reference"] = f"local DevicePipeline: {device.describe()}, batch 1, conf 0.25"
    out["served_mAP"], out["local_mAP"] = _coco(ctx.evalset, served), _coco(ctx.evalset, reference)
    host_stats = _box_stats(host_rows, reference)
    host_stats.pop("per_image")
    out["device_vs_host_pipeline"] = {"what": "same engine; host = PIL decode + cv2 letterbox + numpy NMS", **host_stats,
                                      "host_mAP": _coco(ctx.evalset, host_rows)}
    return out


# ---- load --------------------------------------------------------------------------------------------

def _host_cpu() -> tuple[float, float, dict[int, tuple[str, float]]]:
    """(wall s, busy CPU s of the whole host, {pid: (command name, CPU s)}), from /proc: the difference of two
    readings says how many cores the server, its stubs and everything else kept busy."""
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    busy = (sum(int(v) for v in fields) - int(fields[3]) - int(fields[4])) / tick  # minus idle and iowait
    processes: dict[int, tuple[str, float]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1: text.rindex(")")], text[text.rindex(")") + 2:].split()
        processes[int(stat.parent.name)] = (name, (int(rest[11]) + int(rest[12])) / tick)  # utime + stime
    return time.monotonic(), busy, processes


def _cores_busy(before, after) -> dict:
    """Cores busy between two _host_cpu readings, by command name over the processes alive at both (the load
    generator's own workers come and go inside a run: its client_cpu says what they used)."""
    wall = after[0] - before[0]
    names: dict[str, float] = {}
    for pid, (name, seconds) in after[2].items():
        if pid in before[2] and before[2][pid][0] == name:
            names[name] = names.get(name, 0.0) + (seconds - before[2][pid][1]) / wall
    top = dict(sorted(((n, _r(c, 2)) for n, c in names.items() if c > 0.05), key=lambda kv: -kv[1])[:8])
    return {"host_cores_busy": _r((after[1] - before[1]) / wall, 2), "host_cores": os.cpu_count(), "by_process": top}


class EngineSampler:
    """Utilisation of each of the GPU's engines, once a second, from `nvidia-smi dmon -s u`: sm (kernels),
    mem, enc, dec, jpg (the NVJPG hardware JPEG decoders nvJPEG's hardware backend runs on), ofa. Triton's
    nv_gpu_utilization is the sm column only; a wall in the JPEG engines shows only here."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.process = None
        self.lines: list[str] = []

    def __enter__(self):
        if self.enabled:
            try:
                self.process = subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1"], stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.process = None
        return self

    def __exit__(self, *exc):
        if self.process is not None:
            self.process.terminate()
            try:
                out, _ = self.process.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                out, _ = self.process.communicate()
            self.lines = out.splitlines()

    def summary(self, skip_s: float = 0.0, last_s: float | None = None) -> dict | None:
        """Mean and max per column over the samples after the first `skip_s` seconds (or the last `last_s`)."""
        header = next((line.lstrip("#").split() for line in self.lines if line.startswith("# gpu")), None)
        rows = [line.split() for line in self.lines if line.strip() and not line.startswith("#")]
        if header is None or not rows:
            return None if not self.enabled else {"samples": 0}
        rows = (rows[-max(1, int(last_s)):] if last_s else rows[int(skip_s):]) or rows
        out: dict = {"samples": len(rows)}
        for index, name in enumerate(header[1:], start=1):
            values = [float(r[index]) for r in rows if len(r) > index and r[index].replace(".", "", 1).isdigit()]
            if values:
                out[f"{name}_pct_mean"], out[f"{name}_pct_max"] = _r(float(np.mean(values)), 1), _r(max(values), 1)
        return out


def _processes(concurrency: int, cap: int) -> int:
    return max(1, min(cap, concurrency // 4, concurrency))


def _e2e_payload(images: int = 1):
    from harness.accuracy.evalset import EvalSet
    from harness.load.payload import Payload, Tensor

    evalset = EvalSet(EVAL_DIR)
    from PIL import Image

    chosen = next((i for i in evalset.images if Image.open(i.path).size == (640, 480)), evalset.images[0])
    blob = chosen.encoded()
    payload = Payload("yolo_e2e", (Tensor("images", "BYTES", np.array([[blob]] * images, dtype=np.object_)),))
    return payload, {"file": chosen.file_name, "size": list(Image.open(chosen.path).size), "jpeg_bytes": len(blob),
                     "images_per_request": images}


def _raw_payload(imgsz: int):
    from harness.load.payload import Payload, Tensor
    from harness.vision.pipeline import DetectionPipeline

    payload, info = _e2e_payload()
    batch, _ = DetectionPipeline(imgsz=imgsz).preprocess([payload.tensors[0].array.reshape(-1)[0]])
    return Payload("yolo_raw", (Tensor("images", "FP32", np.ascontiguousarray(batch, dtype=np.float32)),)), \
        {**info, "tensor": list(batch.shape), "request_bytes": int(batch.nbytes)}


def stage_load(ctx: Context, model: str, mode: str = "concurrency", concurrency: int = 1, rate: float = 0.0,
               images: int = 1) -> dict:
    from harness.load.batching import batch_profile
    from harness.load.clients import ClientSpec
    from harness.load.generator import LoadSettings, run_load
    from harness.load.server_stats import StatisticsProbe, split

    if ctx.server is None:
        raise RuntimeError("no server")
    a = ctx.args
    if model == "yolo_raw":
        payload, payload_info = _raw_payload(a.imgsz)
    elif model == ECHO:
        from harness.load.payload import payload_from_config
        from harness.repository.config import read_config

        payload = payload_from_config(read_config(ctx.repository / ECHO))
        payload_info = {"request_bytes": payload.nbytes}
    else:
        payload, payload_info = _e2e_payload(images)
        if model != payload.model:
            payload = type(payload)(model, payload.tensors)
    if mode == "concurrency":
        settings = LoadSettings(mode="concurrency", concurrency=concurrency, window_s=a.window_s, warmup_s=a.warmup_s,
                                max_windows=a.max_windows, processes=_processes(concurrency, a.max_processes))
    else:
        # ~1,000 arrivals/s a process at most (a process of this generator closes ~1.8k loops/s on the echo model)
        processes = max(2, min(a.max_processes, math.ceil(rate / 1000)))
        settings = LoadSettings(mode=mode, rate=rate, window_s=a.window_s, warmup_s=a.warmup_s, max_windows=a.max_windows,
                                processes=processes, seed=1)
    probe = StatisticsProbe(ctx.grpc, model)
    spec = ClientSpec("grpc", ctx.grpc, payload, timeout_s=30.0)
    cpu_before = _host_cpu()
    from harness.load.gpu_usage import GpuSampler

    with GpuSampler(ctx.metrics if a.device == "gpu" else None) as sampler, EngineSampler(a.device == "gpu") as engines:
        result = run_load(spec, settings, probe=probe)
    host_cpu = _cores_busy(cpu_before, _host_cpu())
    probe.close()
    data = result.to_dict()
    data.pop("latencies_ms", None)
    start, end = result.server_stats.get("start"), result.server_stats.get("end")
    batches = batch_profile(start, end, model).to_dict() if end else None
    server_split = split(start, end, model) if end else None
    out = {
        "model": model, "mode": mode, "concurrency": concurrency if mode == "concurrency" else None,
        "rate": rate if mode != "concurrency" else None, "processes": settings.processes,
        "throughput": _r(result.throughput, 2), "images_per_s": _r(result.throughput * images, 1), "latency_ms": {k: _r(v, 3) for k, v in result.latency_ms.items()},
        "completed": result.completed, "errors": result.errors, "error_messages": result.error_messages,
        "stable": result.stable, "windows": len(result.windows), "client_cpu": _r(result.client_cpu, 3),
        "late_sends": result.late_sends, "warnings": result.warnings, "batches": batches, "server_split_ms": server_split,
        "gpu": sampler.summary(skip_s=a.warmup_s), "gpu_engines": engines.summary(skip_s=a.warmup_s),
        "host_cpu": host_cpu, "payload": payload_info,
        "window_throughputs": [_r(w["throughput"], 1) for w in data["windows"]],
    }
    if model == "yolo_e2e" and mode == "concurrency":
        ctx.best_e2e = max(ctx.best_e2e, result.throughput)
    return out


def stage_fidelity(ctx: Context, model: str = "yolo_raw", concurrency: int = 64) -> dict:
    """Issue 8's fidelity goal where the client has cores of its own: our HTTP closed loop vs wrk (C,
    the same binary-tensor body, the same connections) on one saturated model, as the batching suite's
    test_generator_fidelity runs it."""
    from harness.load.clients import ClientSpec
    from harness.load.generator import LoadSettings, run_load
    from harness.load.wrk import fidelity_ratio, run_wrk

    payload, _ = _raw_payload(ctx.args.imgsz) if model == "yolo_raw" else _e2e_payload()
    http = ctx.server.endpoints.http
    settings = LoadSettings(mode="concurrency", concurrency=concurrency, window_s=ctx.args.window_s,
                            warmup_s=ctx.args.warmup_s, max_windows=ctx.args.max_windows,
                            processes=_processes(concurrency, ctx.args.max_processes))
    ours = run_load(ClientSpec("http", http, payload, timeout_s=30.0), settings)
    span = sum(w.duration_s for w in ours.windows[-3:])
    theirs = run_wrk(http, payload, connections=concurrency, duration_s=max(span, 20 * ours.latency_ms["avg"] / 1e3),
                     threads=4)
    ratio = fidelity_ratio(ours.throughput, theirs.throughput)
    return {"model": model, "connections": concurrency, "ours": {"throughput": _r(ours.throughput, 2), "processes": settings.processes,
            "latency_ms": {k: _r(v, 3) for k, v in ours.latency_ms.items()}, "errors": ours.errors, "stable": ours.stable},
            "wrk": {**theirs.to_dict(), "threads": 4}, "fidelity_ratio": _r(ratio, 4), "within_5_percent": abs(ratio - 1) <= 0.05}


def stage_lifecycle(ctx: Context) -> dict:
    """Issue 9's traffic volume where the model is fast: `pytest suites/lifecycle` on the GPU build of the
    reference repository (its own server, explicit model control), the per-test request table kept."""
    if ctx.built is None:
        raise RuntimeError("no repository: the build stage failed")
    report = ctx.args.out / "lifecycle"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/lifecycle", "-q", "-p", "no:cacheprovider",
                           f"--repo={ctx.built}", f"--report-dir={report}", "--lifecycle-stress-s=45"],
                          cwd=ROOT, capture_output=True, text=True, timeout=320)
    rows = json.loads((report / "lifecycle.json").read_text()) if (report / "lifecycle.json").exists() else []
    tail = (done.stdout + done.stderr).strip().splitlines()
    hot = [r for r in rows if "stress" not in r["test"]]
    return {"returncode": done.returncode, "seconds": round(time.monotonic() - started, 1), "summary": tail[-1] if tail else "",
            "requests": sum(r.get("sent", 0) for r in rows), "failed": sum(r.get("failed", 0) for r in rows),
            "hot_reload_requests": sum(r.get("sent", 0) for r in hot), "tests": rows, "tail": tail[-30:]}


# ---- inside one instance: where a batch's time goes ---------------------------------------------------

def stage_pipeline(ctx: Context) -> dict:
    """yolo_e2e's DevicePipeline run locally (no Triton, no stub) on batches of the load test's JPEG, each
    step synchronised and timed on its own, then the whole `detect` as the served model calls it: with
    compute_infer from the load stages this splits a served batch into header check, nvJPEG decode,
    letterbox, engine, NMS, restore + copy out, and what the Python backend adds around them."""
    import torch

    from harness.reference.configs import Target
    from harness.vision.gpu.decode import decode_batch
    from harness.vision.gpu.image import _nvjpeg_ok, decode_images
    from harness.vision.gpu.pipeline import DevicePipeline
    from harness.vision.image import DEFAULT_MAX_PIXELS
    from harness.vision.pipeline import Job

    if ctx.engine_model is None:
        raise RuntimeError("no model: the build stage failed")
    a = ctx.args
    target = Target(imgsz=a.imgsz)
    batches = sorted(b for b in a.engine_batches if b > 1)
    engine = _engine(ctx, compile_mode=a.pipeline_compile or None)
    started = time.monotonic()
    pipeline = DevicePipeline(engine, a.imgsz, max(batches), target.max_det, graph_batches=batches)
    out: dict = {"pipeline": pipeline.describe(), "setup_s": _r(time.monotonic() - started, 1),
                 "compile_mode": a.pipeline_compile or None, "batches": {}}
    payload, out["payload"] = _e2e_payload()
    blob = payload.tensors[0].array.reshape(-1)[0]
    dev = engine.device

    def sync():
        if pipeline.stream is not None:
            torch.cuda.synchronize()

    def clock(fn, repeats: int) -> tuple[float, object]:
        sync()
        times, result = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = fn()
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        return float(np.median(times)), result

    for batch in batches:
        blobs = [blob] * batch
        jobs = [Job(np.array([blob], dtype=np.object_), target.conf, target.iou, target.max_det) for _ in range(batch)]
        conf = torch.full((batch,), target.conf, device=dev)
        iou = torch.full((batch,), target.iou, dtype=torch.float64, device=dev)
        max_det = torch.full((batch,), target.max_det, dtype=torch.int64, device=dev)
        repeats = max(5, min(50, int(a.pipeline_seconds * 1e3 / batch)))
        with torch.inference_mode(), (torch.cuda.stream(pipeline.stream) if pipeline.stream else contextlib.nullcontext()):
            for _ in range(3):
                pipeline.detect(jobs)
            steps: dict = {}
            device: dict = {}

            def step(name: str, fn):
                """The step synchronised and timed, then (on CUDA) what it costs the GPU itself, waits left out."""
                steps[name], result = clock(fn, repeats)
                if pipeline.stream is not None:
                    device[name] = _device_ms(fn)
                return result

            step("header_check", lambda: [_nvjpeg_ok(b, DEFAULT_MAX_PIXELS) for b in blobs])
            images = step("decode", lambda: decode_images(blobs, dev))
            tensor, metas = step("letterbox", lambda: pipeline.letterbox.batch(images))
            raw = step("engine", lambda: engine.forward(tensor))
            det, num = step("nms", lambda: decode_batch(raw, conf, iou, max_det, target.max_det))
            step("restore_copy_out", lambda: (pipeline.letterbox.restore(det.clone(), num, metas).cpu(), num.cpu()))
            detect_ms, _ = clock(lambda: pipeline.detect(jobs), repeats)
            if pipeline.stream is not None:
                device["detect"] = _device_ms(lambda: pipeline.detect(jobs))
        row = {k: _r(v, 3) for k, v in steps.items()}
        if device:
            row["device_ms"] = {k: {kk: _r(vv, 3) for kk, vv in v.items()} for k, v in device.items()}
            per_image = device["detect"]["kernel_ms"] * 1e3 / batch
            row["kernel_us_per_image"] = _r(per_image, 2)
            row["kernel_bound_images_per_s"] = _r(1e6 / per_image, 0) if per_image else None
        row["sum_of_steps_ms"] = _r(sum(steps.values()) - steps["header_check"], 3)  # decode includes the header check
        row["detect_ms"] = _r(detect_ms, 3)
        row["detect_images_per_s"] = _r(batch / detect_ms * 1e3, 1)
        row["engine_share"] = _r(steps["engine"] / detect_ms, 3)
        row["repeats"] = repeats
        out["batches"][str(batch)] = row
        print(f"  pipeline batch {batch}: {row}", flush=True)
    return out


def _device_ms(fn, repeats: int = 5) -> dict:
    """GPU time per call of fn (CUPTI through torch.profiler): what a step costs the GPU, apart from the time
    it waits. nvJPEG's hardware decoder is an engine of its own and not in it."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    return _device_split(prof.events(), repeats)


def _device_split(events, calls: int) -> dict:
    """Device-side profiler events -> ms per call: all kernels, inductor's (triton_*) among them, and
    copies/memsets apart. Only events the GPU ran are counted (the host-side records of a launch carry
    device time too, and would count each kernel twice)."""
    import torch

    kernel_us = inductor_us = copy_us = 0.0
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = event.time_range.elapsed_us()
        if event.name.startswith(("Memcpy", "Memset")):
            copy_us += us
        else:
            kernel_us += us
            if event.name.startswith("triton_"):
                inductor_us += us
    return {"kernel_ms": kernel_us / calls / 1e3, "inductor_kernel_ms": inductor_us / calls / 1e3,
            "copy_ms": copy_us / calls / 1e3}


VARIANT = re.compile(r"(?P<kind>[ic])(?P<instances>\d+)(?:b(?P<max_batch>\d+))?(?:p(?P<preferred>\d+(?:-\d+)*))?"
                     r"(?:d(?P<delay_us>\d+))?")


def _variant(text: str, graph_batches: list[int]) -> dict:
    """--variants entry (see the docstring: c8, c8b128, c8p64, c8p32-64d2000, ...) -> _reload_e2e's arguments."""
    match = VARIANT.fullmatch(text)
    if match is None:
        raise ValueError(f"variant {text!r}: expected [ic]N[bM][pA-B][dU]")
    v = match.groupdict()
    compiled = v["kind"] == "c"
    return {"instances": int(v["instances"]), "compile_mode": "default" if compiled else None,
            "graph_batches": graph_batches if compiled else None,
            "max_batch": int(v["max_batch"]) if v["max_batch"] else None,
            "preferred": [int(b) for b in v["preferred"].split("-")] if v["preferred"] else None,
            "delay_us": int(v["delay_us"]) if v["delay_us"] else None}


def _decode_worker(blob: bytes, batch: int, seconds: float, barrier, results) -> None:
    """One process decoding batches of `blob` with torchvision's nvJPEG path as the served model does."""
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(blob), dtype=torch.uint8) for _ in range(batch)]
    for _ in range(3):
        decode_jpeg(data, mode=ImageReadMode.RGB, device="cuda:0")
    torch.cuda.synchronize()
    barrier.wait()
    images, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        decode_jpeg(data, mode=ImageReadMode.RGB, device="cuda:0")
        images += batch
    torch.cuda.synchronize()
    results.put((images, time.perf_counter() - t0))


def stage_decode(ctx: Context) -> dict:
    """The decoder's ceiling: P processes (as P model instances would) each decoding batches of the load
    test's JPEG through torchvision.io.decode_jpeg on the GPU for --decode-seconds, together: images/s in
    all, and the JPEG engines' utilisation while they run. No Triton, no engine, no letterbox."""
    import multiprocessing

    a = ctx.args
    payload, info = _e2e_payload()
    blob = bytes(payload.tensors[0].array.reshape(-1)[0])
    spawn = multiprocessing.get_context("spawn")
    out: dict = {"payload": info, "batch": a.decode_batch, "seconds": a.decode_seconds, "processes": {}}
    for count in a.decode_processes:
        barrier, results = spawn.Barrier(count), spawn.Queue()
        workers = [spawn.Process(target=_decode_worker, args=(blob, a.decode_batch, a.decode_seconds, barrier, results))
                   for _ in range(count)]
        try:
            with EngineSampler(True) as engines:
                for worker in workers:
                    worker.start()
                done = [results.get(timeout=120 + a.decode_seconds) for _ in workers]
        finally:  # a worker that died leaves the others at the barrier: none outlives the stage
            for worker in workers:
                worker.join(timeout=5)  # a finished one exits right after handing its count over
                if worker.is_alive():
                    worker.kill()
        row = {"images_per_s": _r(sum(n / t for n, t in done), 1),
               "per_process_images_per_s": sorted(_r(n / t, 1) for n, t in done),
               "engines": engines.summary(last_s=a.decode_seconds)}  # the timed part: start-up and warm-up left out
        out["processes"][str(count)] = row
        print(f"  decode {count} processes: {row}", flush=True)
    return out


def _reload_e2e(ctx: Context, instances: int, compile_mode: str | None, graph_batches: list[int] | None,
                max_batch: int | None = None, preferred: list[int] | None = None, delay_us: int | None = None) -> dict:
    """Load yolo_e2e again with a config override (Triton's load API): instance count, torch_compile,
    cuda_graph_batches, max_batch_size (preferred sizes its quarter, half and whole unless `preferred`),
    the queue delay. The first call remembers the built config; each variant starts from it."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(ctx.grpc)
    try:
        if ctx.e2e_config is None:
            ctx.e2e_config = client.get_model_config("yolo_e2e", as_json=True)["config"]
        config = json.loads(json.dumps(ctx.e2e_config))
        config["instance_group"] = [{**config["instance_group"][0], "count": instances}]
        params = config.setdefault("parameters", {})
        if compile_mode:
            params["torch_compile"] = {"string_value": compile_mode}
        if max_batch:
            config["max_batch_size"] = max_batch
            config["dynamic_batching"]["preferred_batch_size"] = [max_batch // 4, max_batch // 2, max_batch]
            graph_batches = sorted({b for b in graph_batches or [] if b < max_batch} | {max_batch})
        if preferred:
            config["dynamic_batching"]["preferred_batch_size"] = preferred
        if delay_us is not None:
            config["dynamic_batching"]["max_queue_delay_microseconds"] = delay_us
        if graph_batches:
            params["cuda_graph_batches"] = {"string_value": ",".join(str(b) for b in graph_batches)}
        started = time.monotonic()
        client.load_model("yolo_e2e", config=json.dumps(config))
        load_s = time.monotonic() - started
        served = client.get_model_config("yolo_e2e", as_json=True)["config"]
    finally:
        client.close()
    return {"instances": instances, "torch_compile": compile_mode, "cuda_graph_batches": graph_batches, "max_batch_size": max_batch,
            "load_s": _r(load_s, 1), "served_instance_group": served.get("instance_group"),
            "served_dynamic_batching": served.get("dynamic_batching"),
            "served_parameters": {k: v.get("string_value") for k, v in served.get("parameters", {}).items()}}


# ---- engine alone ------------------------------------------------------------------------------------

def stage_fusion(ctx: Context) -> dict:
    import torch

    from benchmarks.fusion import stage_fusion as fusion

    if ctx.engine_model is None:
        raise RuntimeError("no model: the build stage failed")
    engine, batch, size = _engine(ctx), ctx.args.profile_batch, ctx.args.imgsz
    convs: list = []
    with torch.inference_mode():
        _graph_forward(engine, torch.zeros(batch, 3, size, size, device=engine.device, dtype=engine.compute_dtype), convs)
    return fusion(engine, convs, batch)


def _profile_rows(averages, limit: int) -> list[dict]:
    """torch.profiler averages with device time, slowest first (attribute names moved across torch versions)."""
    def device_us(row, which: str) -> float:
        return float(getattr(row, f"{which}_device_time_total", None) or getattr(row, f"{which}_cuda_time_total", 0) or 0)

    rows = [{"name": row.key[:140], "shapes": str(getattr(row, "input_shapes", "") or "")[:160], "count": row.count,
             "device_ms": _r(device_us(row, "self") / 1e3, 3)} for row in averages if device_us(row, "self") > 0]
    rows.sort(key=lambda r: -r["device_ms"])
    return rows[:limit]


def stage_profile(ctx: Context) -> dict:
    """Where the engine's time goes at --profile-batch: one shape-plan forward under torch.profiler, by
    kernel and by aten op with input shapes (the same kernels the CUDA graph replays), and the first
    convolution alone with its input channels as given and padded to 4 and 8 (tensor-core convolution
    kernels want C % 8 == 0; a YOLO stem has C = 3 on the largest activation)."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    if ctx.engine_model is None:
        raise RuntimeError("no model: the build stage failed")
    a = ctx.args
    engine = _engine(ctx, compile_mode=a.profile_compile or None)
    batch, size = a.profile_batch, a.imgsz
    shape = (batch, 3, size, size)
    plan = engine.plan(shape)
    gpu = engine.device.startswith("cuda")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    x = engine._layout(torch.rand(shape, device=engine.device, dtype=engine.compute_dtype))
    with torch.inference_mode():
        for _ in range(3):
            plan.runner(x)
        sync()
        started = time.perf_counter()
        for _ in range(5):
            plan.runner(x)
        sync()
        plan_ms = (time.perf_counter() - started) / 5 * 1e3
        with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])], record_shapes=True) as prof:
            for _ in range(2):
                plan.runner(x)
            sync()
    kernels = _profile_rows(prof.key_averages(), 40)
    by_shape = [r for r in _profile_rows(prof.key_averages(group_by_input_shape=True), 400) if r["name"].startswith("aten::")][:40]
    per_forward = _device_split(prof.events(), 2) if gpu else None
    out: dict = {"batch": batch, "compile_mode": a.profile_compile or None, "shape_plan_ms_per_batch": _r(plan_ms, 3),
                 "steps": len(plan.steps), "profiled_forwards": 2, "kernels": kernels, "aten_by_shape": by_shape,
                 "device_ms_per_forward": {k: _r(v, 3) for k, v in per_forward.items()} if per_forward else None}
    stem = next((node for node in engine._nodes if node[0] == "Conv"), None)
    if stem is not None:
        weight = engine._consts[stem[2][1]]
        attrs = stem[1]
        stride, pad = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])[:2]
        stem_out: dict = {"weight": list(weight.shape), "stride": stride}
        for channels in sorted({weight.shape[1], 4, 8}):
            w = torch.zeros((weight.shape[0], channels, *weight.shape[2:]), device=engine.device, dtype=weight.dtype)
            w[:, : weight.shape[1]] = weight
            xi = torch.rand(batch, channels, size, size, device=engine.device, dtype=engine.compute_dtype)
            for layout in ("channels_last", "nchw"):
                xl = xi.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else xi
                wl = w.contiguous(memory_format=torch.channels_last) if layout == "channels_last" else w.contiguous()
                with torch.inference_mode():
                    for _ in range(3):
                        F.conv2d(xl, wl, None, stride=stride, padding=pad)
                    sync()
                    started = time.perf_counter()
                    for _ in range(20):
                        F.conv2d(xl, wl, None, stride=stride, padding=pad)
                    sync()
                stem_out[f"c{channels}_{layout}_ms"] = _r((time.perf_counter() - started) / 20 * 1e3, 3)
        out["stem_conv"] = stem_out
    print(f"  profile batch {batch}: plan {plan_ms:.2f} ms; top kernels " +
          "; ".join(f"{r['name'][:60]} {r['device_ms']}" for r in kernels[:8]), flush=True)
    return out


def _graph_forward(engine, x, convs: list | None = None):
    """TorchEngine's own node loop (same ops, same constants) on a device tensor: what infer() does minus
    the numpy -> device copy in and the device -> numpy copy out. `convs` collects each Conv node as it
    runs: attributes, input shape, weight, bias, output name and shape."""
    from harness.engines.torch_engine import _store

    values = dict(engine._consts)
    values[engine.signature.inputs[0].name] = x
    for op_type, attrs, in_names, out_names in engine._nodes:
        args = [values[n] if n else None for n in in_names]
        result = engine._ops[op_type](attrs, *args)
        _store(values, out_names, result)
        if convs is not None and op_type == "Conv":
            convs.append({"attrs": attrs, "x_shape": tuple(args[0].shape), "w": args[1],
                          "b": args[2] if len(args) > 2 else None, "out": out_names[0], "y_shape": tuple(result.shape)})
    return values[engine.signature.outputs[0].name]


def _engine(ctx: Context, compile_mode: str | None = None):
    from harness.engines.torch_engine import TorchEngine

    gpu = ctx.args.device == "gpu"
    return TorchEngine(ctx.engine_model, device="cuda:0" if gpu else "cpu", precision="fp16" if gpu else "fp32",
                       compile_mode=compile_mode)


def _e2e_config(ctx: Context):
    """yolo_e2e's ModelConfig as built for this device, and its parameters as {key: string}."""
    from harness.repository.config import read_config

    config = read_config(ctx.repository / "yolo_e2e")
    return config, {key: value.string_value for key, value in config.parameters.items()}


def _served_compile_mode(ctx: Context) -> str | None:
    """yolo_e2e's torch_compile as built for this device (None: eager)."""
    if ctx.repository is None or ctx.args.device != "gpu":
        return None
    return _e2e_config(ctx)[1].get("torch_compile") or None


def _compiled_engine(ctx: Context, eager, mode: str, batches: list[int], size: int) -> dict:
    """The engine with its shape plans through torch.compile (inductor), captured as CUDA graphs: the
    compile time per batch size, and the largest difference from the eager plan's output."""
    import torch

    engine = _engine(ctx, compile_mode=mode)
    info: dict = {"mode": mode, "compile_s": {}, "max_abs_diff_vs_eager": {}}
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception as error:  # noqa: BLE001
        info["triton"] = f"not importable: {type(error).__name__}: {error}"
    for batch in sorted(batches, reverse=True):
        started = time.monotonic()
        try:
            engine.capture([batch], (size, size))
        except Exception as error:  # noqa: BLE001 -- recorded: the eager variants are still measured
            info["error"] = f"batch {batch}: {type(error).__name__}: {error}"[:3000]
            info["traceback"] = traceback.format_exc(limit=20)[-5000:]
            return info
        info["compile_s"][str(batch)] = _r(time.monotonic() - started, 1)
        x = torch.rand(batch, 3, size, size, device=engine.device, dtype=engine.compute_dtype)
        with torch.inference_mode():
            info["max_abs_diff_vs_eager"][str(batch)] = _r((engine.forward(x) - eager.forward(x)).abs().max().item(), 4)
        print(f"  compiled batch {batch}: {info['compile_s'][str(batch)]} s, diff {info['max_abs_diff_vs_eager'][str(batch)]}", flush=True)
    info["engine"] = engine
    return info


def stage_engine(ctx: Context) -> dict:
    import torch

    if ctx.engine_model is None:
        raise RuntimeError("no model: the build stage failed")
    a = ctx.args
    engine = _engine(ctx)
    gpu = engine.device.startswith("cuda")

    def sync():
        if gpu:
            torch.cuda.synchronize()

    size = a.imgsz
    convs: list = []
    with torch.inference_mode():
        _graph_forward(engine, torch.rand(1, 3, size, size, device=engine.device, dtype=engine.compute_dtype), convs)
    # per image: Cout*(Cin/g)*kh*kw*Ho*Wo
    macs = sum(math.prod(c["w"].shape) * c["y_shape"][2] * c["y_shape"][3] for c in convs)
    gflops = 2 * macs / 1e9
    out: dict = {"engine": f"TorchEngine {engine.precision} on {engine.device}", "model": str(ctx.engine_model),
                 "conv_gflops_per_image": _r(gflops, 3), "convs": len(convs), "device_tensors": {}, "numpy_path": {}}

    def timed(fn, batch: int) -> dict:
        for _ in range(3):
            fn()
        sync()
        n, t0 = 0, time.perf_counter()
        while n < 5 or (time.perf_counter() - t0 < a.engine_seconds and n < 2000):
            fn()
            n += 1
            if n % 10 == 0:
                sync()
        sync()
        dt = time.perf_counter() - t0
        return {"iterations": n, "ms_per_batch": _r(dt / n * 1e3, 3), "images_per_s": _r(batch * n / dt, 1),
                "achieved_tflops": _r(batch * n / dt * gflops / 1e3, 2)}

    variants = {"interpreted": lambda x: _graph_forward(engine, x), "shape_plan": lambda x: engine.plan(tuple(x.shape)).run(engine._layout(x))}
    if gpu:
        captured = engine.capture(a.engine_batches, (size, size))
        out["cuda_graph_batches"] = captured
        variants["cuda_graph"] = engine.forward
        if a.engine_compile:
            out["compiled"] = _compiled_engine(ctx, engine, a.engine_compile, a.engine_batches, size)
            if out["compiled"].get("engine") is not None:
                variants["compiled_cuda_graph"] = out["compiled"].pop("engine").forward
    for variant, fn in variants.items():
        table = {}
        for batch in a.engine_batches:
            x = torch.rand(batch, 3, size, size, device=engine.device, dtype=engine.compute_dtype)
            with torch.inference_mode():
                table[str(batch)] = timed(lambda: fn(x), batch)
            if gpu:
                table[str(batch)]["max_memory_gib"] = _r(torch.cuda.max_memory_allocated() / 2**30, 2)
            print(f"  engine {variant} batch {batch}: {table[str(batch)]}", flush=True)
            ctx_write = getattr(ctx, "recorder", None)
            out["device_tensors"][variant] = table
            if ctx_write:
                ctx_write.data["stages"].setdefault("engine_partial", {})["result"] = out
                ctx_write.write()
    for batch in [b for b in a.engine_batches if b <= 32][-2:]:  # the served model's path: fp32 numpy in and out
        arr = np.random.default_rng(0).random((batch, 3, size, size), dtype=np.float32)
        name = engine.signature.inputs[0].name
        out["numpy_path"][str(batch)] = timed(lambda: engine.infer({name: arr}), batch)
    best = max((row["images_per_s"] for table in out["device_tensors"].values() for row in table.values()), default=0)
    out["best_images_per_s"] = best
    if gpu:
        out["flops_bound_images_per_s"] = _r(H200_FP16_DENSE_TFLOPS * 1e12 / (gflops * 1e9), 0)
        out["flops_bound_note"] = (f"{H200_FP16_DENSE_TFLOPS:g} TFLOP/s dense FP16 (H200 SXM datasheet, assumed) / conv FLOPs "
                                   "per image; an op-by-op interpreted graph of a 3 M-parameter model never gets near it")
    return out


# ---- FP16 vs FP32 on the eval set --------------------------------------------------------------------

def stage_fp16_vs_fp32(ctx: Context) -> dict:
    from harness.accuracy.evalset import EvalSet
    from harness.accuracy.tensors import compare
    from harness.engines.ort import OrtEngine
    from harness.vision.pipeline import DetectionPipeline

    if ctx.engine_model is None:
        raise RuntimeError("no model: the build stage failed")
    a = ctx.args
    evalset = EvalSet(EVAL_DIR, images_per_slice=(a.eval_images // 2) if a.eval_images else None)
    images = evalset.images
    ort = OrtEngine(ctx.engine_model, intra_op_threads=len(os.sched_getaffinity(0)))
    compile_mode = _served_compile_mode(ctx)
    torch_engine = _engine(ctx, compile_mode=compile_mode)
    name = torch_engine.signature.inputs[0].name
    out_name = torch_engine.signature.outputs[0].name
    pipeline = DetectionPipeline(imgsz=a.imgsz)
    ref_raw, cand_raw, metas_all, ids = [], [], [], []
    t_ort = t_torch = 0.0
    for start in range(0, len(images), 16):
        chunk = images[start:start + 16]
        batch, metas = pipeline.preprocess([i.encoded() for i in chunk])
        t0 = time.perf_counter()
        ref_raw.append(ort.infer({name: batch})[out_name])
        t1 = time.perf_counter()
        cand_raw.append(torch_engine.infer({name: batch})[out_name])
        t2 = time.perf_counter()
        t_ort, t_torch = t_ort + t1 - t0, t_torch + t2 - t1
        metas_all.extend(metas)
        ids.extend(i.id for i in chunk)
    ref, cand = np.concatenate(ref_raw), np.concatenate(cand_raw)
    boxes = compare("output0:boxes", ref[:, :4], cand[:, :4], atol=1.0, rtol=0.0).as_dict()
    scores = compare("output0:scores", ref[:, 4:], cand[:, 4:], atol=1e-3, rtol=0.0).as_dict()
    live = ref[:, 4:].max(axis=1) > 0.25  # anchors that carry a detection: where the error matters
    live_err = np.abs(ref[:, :4] - cand[:, :4]).max(axis=1)[live] if live.any() else np.zeros(1)
    out = {"images": len(images), "reference": "onnxruntime fp32 CPU", "candidate": f"TorchEngine {torch_engine.precision} on {torch_engine.device}, torch.compile {compile_mode}",
           "seconds": {"ort": round(t_ort, 2), "torch": round(t_torch, 2)},
           "raw_error": {"boxes_px": boxes, "scores": scores,
                         "boxes_px_at_anchors_scoring_over_0.25": {"anchors": int(live.sum()), "mean": _r(live_err.mean()),
                                                                    "p99": _r(np.percentile(live_err, 99)), "max": _r(live_err.max())}}}
    for label, conf in (("mAP", 0.001), ("boxes_at_0.25", 0.25)):
        decoder = DetectionPipeline(imgsz=a.imgsz, conf=conf, iou=0.7, max_det=300)
        dets = {}
        for which, raw in (("fp32", ref), ("candidate", cand)):
            detections, num = decoder.postprocess(raw, metas_all)
            dets[which] = {i: detections[k, : int(num[k])].astype(np.float64) for k, i in enumerate(ids)}
        if label == "mAP":
            out["mAP"] = {"fp32_ort": _coco(evalset, dets["fp32"]), "candidate": _coco(evalset, dets["candidate"])}
            f, c = out["mAP"]["fp32_ort"]["all"], out["mAP"]["candidate"]["all"]
            out["mAP"]["delta_all"] = {"mAP50_95": _r(c["mAP50_95"] - f["mAP50_95"]), "mAP50": _r(c["mAP50"] - f["mAP50"])}
        else:
            stats = _box_stats(dets["fp32"], dets["candidate"])
            stats.pop("per_image")
            out["boxes_at_conf_0.25"] = stats
    return out


# ---- summary -----------------------------------------------------------------------------------------

def summarise(data: dict) -> dict:
    stages = data["stages"]

    def res(name):
        entry = stages.get(name) or {}
        return entry.get("result") if entry.get("status") == "ok" else None

    summary: dict = {"status": {k: v.get("status") for k, v in stages.items()}}
    load = {}
    for name, entry in stages.items():
        r = res(name)
        if r and "throughput" in r:
            load[name] = {"throughput": r["throughput"], "p50_ms": r["latency_ms"]["p50"], "p95_ms": r["latency_ms"]["p95"],
                          "p99_ms": r["latency_ms"]["p99"], "avg_batch": (r["batches"] or {}).get("average_batch"),
                          "gpu_util_pct": (r["gpu"] or {}).get("util_pct_mean"), "errors": r["errors"], "stable": r["stable"],
                          "client_cpu": r["client_cpu"], "images_per_s": r.get("images_per_s")}
    summary["load"] = load
    gains = {}
    for name in load:
        if name.startswith("unbatched_c"):
            on = load.get("e2e_c" + name.removeprefix("unbatched_c"))
            off = load[name]
            if on and off["throughput"]:
                gains[name.removeprefix("unbatched_")] = {"throughput_ratio": _r(on["throughput"] / off["throughput"], 2),
                                                          "p95_ratio": _r(on["p95_ms"] / off["p95_ms"], 2) if off["p95_ms"] else None}
    summary["dynamic_batching_gain_e2e"] = gains
    if (acc := res("accuracy")):
        summary["accuracy"] = acc["verdict"]
    if (eng := res("engine")):
        summary["engine_limit_images_per_s"] = {v: {b: row["images_per_s"] for b, row in t.items()} for v, t in eng["device_tensors"].items()}
        summary["engine_numpy_path_images_per_s"] = {b: row["images_per_s"] for b, row in eng["numpy_path"].items()}
        summary["flops_bound_images_per_s"] = eng.get("flops_bound_images_per_s")
    if (fp := res("fp16_vs_fp32")):
        summary["fp16_vs_fp32"] = {"mAP": {k: fp["mAP"][k]["all"] for k in ("fp32_ort", "candidate")} | {"delta": fp["mAP"]["delta_all"]},
                                   "box_px_max": fp["raw_error"]["boxes_px"]["abs_max"],
                                   "box_px_at_detections": fp["raw_error"]["boxes_px_at_anchors_scoring_over_0.25"],
                                   "score_abs_max": fp["raw_error"]["scores"]["abs_max"]}
    return summary


# ---- main --------------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--images", type=int, default=20, help="eval images for the served-vs-local check")
    p.add_argument("--e2e-concurrency", type=_ints, default=[1, 8, 64])
    p.add_argument("--raw-concurrency", type=_ints, default=[1, 8, 64])
    p.add_argument("--unbatched-concurrency", type=_ints, default=[8, 64])
    p.add_argument("--multi-concurrency", type=_ints, default=[], help="yolo_e2e with --images-per-request images a request")
    p.add_argument("--images-per-request", type=int, default=4)
    p.add_argument("--echo-concurrency", type=_ints, default=[256], help="yts_null (echo, one CPU instance): the harness's ceiling")
    p.add_argument("--poisson-fraction", type=float, default=0.7, help="of the best closed-loop e2e throughput; 0 = no Poisson run")
    p.add_argument("--poisson-rates", type=_ints, default=[], help="open-loop sweep on yolo_e2e: Poisson arrivals at these rates/s")
    p.add_argument("--window-s", type=float, default=2.0)
    p.add_argument("--warmup-s", type=float, default=1.5)
    p.add_argument("--max-windows", type=int, default=5)
    p.add_argument("--max-processes", type=int, default=4, help="load-generator processes at most (concurrency // 4)")
    p.add_argument("--engine-batches", type=_ints, default=[1, 8, 32, 64])
    p.add_argument("--engine-seconds", type=float, default=2.0)
    p.add_argument("--eval-images", type=int, default=0, help="images for fp16_vs_fp32 (0 = the whole eval set)")
    p.add_argument("--startup-timeout", type=float, default=240)
    p.add_argument("--deadline-s", type=float, default=480, help="the whole run; stages past it are skipped")
    p.add_argument("--pipeline-seconds", type=float, default=1.0, help="per step and batch size in the pipeline stage")
    p.add_argument("--decode-processes", type=_ints, default=[1, 4, 8], help="decode stage: processes decoding together")
    p.add_argument("--decode-batch", type=int, default=64)
    p.add_argument("--decode-seconds", type=float, default=4.0)
    p.add_argument("--pipeline-compile", default="", help="torch.compile mode for the pipeline stage's engine ('' = eager)")
    p.add_argument("--profile-batch", type=int, default=64, help="batch size of the profile and fusion stages")
    p.add_argument("--profile-compile", default="", help="torch.compile mode of the profile stage's engine ('' = eager)")
    p.add_argument("--engine-compile", default="", help="torch.compile mode measured in the engine stage ('' = not measured)")
    p.add_argument("--variants", type=lambda t: [v for v in t.split(",") if v], default=[],
                   help="yolo_e2e reloaded with: iN = N instances, cN = N instances with torch_compile=default; "
                        "then bM max_batch_size, pA-B preferred sizes, dU queue delay µs")
    p.add_argument("--variant-concurrency", type=_ints, default=[64, 128, 256])
    p.add_argument("--compile-graph-batches", type=_ints, default=[8, 16, 32, 64],
                   help="cuda_graph_batches of the compiled variants (one compile per size per instance at load)")
    p.add_argument("--stages", default="", help="comma list of stage names/prefixes to run (default all)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)
    meta = {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": args.device, "imgsz": args.imgsz,
            "command": " ".join(sys.argv), "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        # the device tool's copy of the tree has no .git: pass YTS_GIT_COMMIT there
        meta["git_commit"] = os.environ.get("YTS_GIT_COMMIT") or (done.stdout.strip() if done.returncode == 0 else None)
    except Exception:  # noqa: BLE001
        meta["git_commit"] = None
    rec = Recorder(args.out, args.deadline_s, meta)
    ctx = Context(args)
    ctx.recorder = rec
    wanted = [s for s in args.stages.split(",") if s]

    def want(name: str) -> bool:
        return not wanted or any(name == w or name.startswith(w) for w in wanted)

    def stage(name, budget, fn, *fargs, **kw):
        if want(name):
            out = rec.stage(name, budget, fn, *fargs, **kw)
            rec.data["summary"] = summarise(rec.data)
            rec.write()
            return out
        return None

    load_budget = args.warmup_s + args.window_s * args.max_windows + 60
    try:
        stage("env", 60, stage_env, args)
        stage("unit", 240, stage_unit, ctx, min_s=30)
        stage("build", 180, stage_build, ctx, min_s=20)
        stage("profile", 90 + (120 if args.profile_compile else 0), stage_profile, ctx, min_s=20)
        stage("pipeline", 120 + (240 if args.pipeline_compile else 0), stage_pipeline, ctx, min_s=30)
        if args.device == "gpu":
            stage("fusion", 240, stage_fusion, ctx, min_s=30)
            stage("decode", 60 + len(args.decode_processes) * (30 + args.decode_seconds), stage_decode, ctx, min_s=30)
        if want("server") or any(want(p) for p in ("accuracy", "e2e", "raw", "unbatched")):
            rec.stage("server", args.startup_timeout + 30, stage_server, ctx, min_s=60)
            rec.data["summary"] = summarise(rec.data)
            rec.write()
        if ctx.server is not None and ctx.grpc is not None:
            stage("accuracy", 120, stage_accuracy, ctx, min_s=20)
            for c in args.e2e_concurrency:
                stage(f"e2e_c{c}", load_budget, stage_load, ctx, "yolo_e2e", concurrency=c, min_s=load_budget - 40)
            for c in args.multi_concurrency:
                stage(f"e2e_x{args.images_per_request}_c{c}", load_budget, stage_load, ctx, "yolo_e2e", concurrency=c,
                      images=args.images_per_request, min_s=load_budget - 40)
            for c in args.echo_concurrency:
                stage(f"echo_c{c}", load_budget, stage_load, ctx, ECHO, concurrency=c, min_s=load_budget - 40)
            for c in args.unbatched_concurrency:
                stage(f"unbatched_c{c}", load_budget, stage_load, ctx, UNBATCHED, concurrency=c, min_s=load_budget - 40)
            for c in args.raw_concurrency:
                stage(f"raw_c{c}", load_budget, stage_load, ctx, "yolo_raw", concurrency=c, min_s=load_budget - 40)
            stage("fidelity", load_budget + 60, stage_fidelity, ctx, min_s=load_budget)
            if args.poisson_fraction > 0 and ctx.best_e2e > 0:
                rate = round(ctx.best_e2e * args.poisson_fraction, 1)
                stage("e2e_poisson", load_budget, stage_load, ctx, "yolo_e2e", mode="poisson", rate=rate, min_s=load_budget - 40)
            for rate in args.poisson_rates:
                stage(f"e2e_poisson_r{rate}", load_budget, stage_load, ctx, "yolo_e2e", mode="poisson", rate=rate,
                      min_s=load_budget - 40)
            for variant in args.variants:
                options = _variant(variant, args.compile_graph_batches)
                if stage(f"reload_{variant}", 420 if options["compile_mode"] else 120, _reload_e2e, ctx, **options,
                         min_s=30) is None:
                    continue
                for c in args.variant_concurrency:
                    stage(f"v{variant}_c{c}", load_budget, stage_load, ctx, "yolo_e2e", concurrency=c, min_s=load_budget - 40)
        if ctx.server is not None:
            rec.stage("server_stop", 60, stage_server_stop, ctx, min_s=0)
        stage("lifecycle", 330, stage_lifecycle, ctx, min_s=200)
        stage("fp16_vs_fp32", 150, stage_fp16_vs_fp32, ctx, min_s=20)
        stage("engine", 150 + (360 if args.engine_compile else 0), stage_engine, ctx, min_s=20)
        if (rec.data["stages"].get("engine") or {}).get("status") == "ok":
            rec.data["stages"].pop("engine_partial", None)  # kept when the stage timed out: what it measured
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if ctx.server is not None:
            try:
                (args.out / "tritonserver.log").write_text(ctx.server.log_tail(400))
            except Exception:  # noqa: BLE001
                pass
            ctx.server.stop()
        rec.data["summary"] = summarise(rec.data)
        rec.write()
    print(json.dumps(rec.data["summary"], indent=1, default=_json_default), flush=True)
    failed = [k for k, v in rec.data["stages"].items() if v.get("status") != "ok"]
    print(f"done in {time.monotonic() - rec.started:.0f} s; not ok: {failed or 'none'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
