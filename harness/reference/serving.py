"""What the reference models do inside Triton's Python stub, beside `triton_python_backend_utils`:
read config parameters, open the engine for the instance's device, apply per-request threshold
overrides, and carry letterbox geometry between the ensemble's steps.

Kept free of tritonclient/onnx-tooling imports: in the container this module runs from a copy vendored
into the model's version folder (see reference_repo/README.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from harness.vision.letterbox import LetterboxMeta
from harness.vision.stages import StageClock

# Letterbox geometry as one FP64 row per image: the ensemble passes it from preprocess to postprocess.
META_FIELDS = ("source_h", "source_w", "output_h", "output_w", "ratio", "resized_h", "resized_w",
               "pad_top", "pad_bottom", "pad_left", "pad_right")


class ConfigParameterError(ValueError):
    """A config.pbtxt parameter is missing or malformed: raised in initialize, so the load fails."""


def parameters(model_config: dict) -> dict[str, str]:
    """config.pbtxt `parameters` (the JSON form the stub hands to initialize) -> {key: string_value}."""
    return {key: value.get("string_value", "") for key, value in model_config.get("parameters", {}).items()}


def required(params: dict[str, str], key: str, kind=str):
    if key not in params or params[key] == "":
        raise ConfigParameterError(f"config.pbtxt: parameter {key!r} is required (have {sorted(params)})")
    try:
        return kind(params[key])
    except ValueError as error:
        raise ConfigParameterError(f"config.pbtxt: parameter {key!r}={params[key]!r} is not a {kind.__name__}") from error


def flag(params: dict[str, str], key: str) -> bool:
    """A "true"/"false" parameter; anything else is refused, so a typo never silently keeps the default."""
    if params[key] not in ("true", "false"):
        raise ConfigParameterError(f"config.pbtxt: parameter {key!r}={params[key]!r} is not 'true' or 'false'")
    return params[key] == "true"


def instance_device(args: dict) -> str:
    """"cpu" or "cuda:N" from the instance Triton is creating (KIND_GPU instances carry a device id)."""
    if args.get("model_instance_kind") == "GPU":
        return f"cuda:{args.get('model_instance_device_id', 0)}"
    return "cpu"


def open_model_engine(args: dict, params: dict[str, str]):
    """The engine named by the config (`runtime`, `model_file`, `precision`, `torch_compile`, `intra_op_threads`,
    `enable_cpu_mem_arena`, `intra_op_spinning`), loaded from this version's folder onto this instance's device."""
    from harness.engines import open_engine

    path = Path(args["model_repository"]) / args["model_version"] / required(params, "model_file")
    if not path.exists():
        raise ConfigParameterError(f"model_file {path} does not exist")
    runtime = required(params, "runtime")
    device = instance_device(args)
    options: dict = {}
    if runtime == "onnxruntime" and params.get("intra_op_threads"):
        options["intra_op_threads"] = required(params, "intra_op_threads", int)
    if runtime == "onnxruntime":
        for key, option in (("enable_cpu_mem_arena", "cpu_mem_arena"), ("intra_op_spinning", "spinning")):
            if key in params:
                options[option] = flag(params, key)
    if runtime == "torch":
        options["precision"] = params.get("precision", "fp16")
        if params.get("torch_compile"):
            from harness.engines.torch_engine import COMPILE_MODES

            if params["torch_compile"] not in COMPILE_MODES:
                raise ConfigParameterError(f"config.pbtxt: parameter 'torch_compile'={params['torch_compile']!r} "
                                           f"is not one of {COMPILE_MODES}")
            options["compile_mode"] = params["torch_compile"]
    return open_engine(path, runtime=runtime, device=device, **options)


@dataclass(frozen=True)
class Thresholds:
    """conf, iou and max_det: defaults from config parameters, each overridable per request."""

    conf: float
    iou: float
    max_det: int

    @classmethod
    def from_parameters(cls, params: dict[str, str]) -> "Thresholds":
        for key in ("conf", "iou", "max_det"):
            required(params, key)
        try:
            return cls(0.0, 0.0, 1).override({k: params[k] for k in ("conf", "iou", "max_det") if k in params},
                                              limit=None, origin="config.pbtxt parameter")
        except ValueError as error:
            raise ConfigParameterError(str(error)) from error

    def override(self, request_parameters: str | dict | None, *, limit: int | None,
                 origin: str = "request parameter") -> "Thresholds":
        """Apply request parameters (the JSON string `request.parameters()` returns); ValueError names
        the bad one. max_det may only shrink below `limit` (the output shape is fixed by the config)."""
        given = json.loads(request_parameters) if isinstance(request_parameters, str) else dict(request_parameters or {})
        values = {}
        for key in ("conf", "iou"):
            if key in given:
                try:
                    value = float(given[key])
                except (TypeError, ValueError):
                    raise ValueError(f"{origin} {key}={given[key]!r} is not a number") from None
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"{origin} {key}={value} is outside [0, 1]")
                values[key] = value
        if "max_det" in given:
            try:
                value = int(given["max_det"])
            except (TypeError, ValueError):
                raise ValueError(f"{origin} max_det={given['max_det']!r} is not an integer") from None
            if value < 1 or (limit is not None and value > limit):
                raise ValueError(f"{origin} max_det={value} is outside [1, {limit}] (the config's detections dims)")
            values["max_det"] = value
        return replace(self, **values)


def pad_rows(detections: np.ndarray, rows: int) -> np.ndarray:
    """[N, k, 6] -> [N, rows, 6] padded with -1 (k <= rows)."""
    out = np.full((detections.shape[0], rows, 6), -1.0, dtype=np.float32)
    out[:, : detections.shape[1]] = detections
    return out


def meta_to_array(metas: list[LetterboxMeta]) -> np.ndarray:
    return np.asarray([[*m.source_shape, *m.output_shape, m.ratio, *m.resized_shape, *m.padding] for m in metas],
                      dtype=np.float64)


def meta_from_array(array: np.ndarray) -> list[LetterboxMeta]:
    array = np.asarray(array, dtype=np.float64).reshape(-1, len(META_FIELDS))
    metas = []
    for row in array:
        sh, sw, oh, ow, ratio, rh, rw, top, bottom, left, right = row.tolist()
        metas.append(LetterboxMeta((int(sh), int(sw)), (int(oh), int(ow)), float(ratio), (int(rh), int(rw)),
                                   (int(top), int(bottom), int(left), int(right))))
    return metas


def split_rows(array: np.ndarray, counts: list[int]) -> list[np.ndarray]:
    """One batched result back into per-request slices."""
    return np.split(array, np.cumsum(counts)[:-1]) if counts else []


def graph_batch_sizes(params: dict[str, str]) -> list[int]:
    """`cuda_graph_batches` ("1,2,4,...") -> the batch sizes a GPU engine captures CUDA graphs for."""
    text = params.get("cuda_graph_batches", "")
    try:
        sizes = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigParameterError(f"config.pbtxt: parameter 'cuda_graph_batches'={text!r} is not a comma list of batch sizes") from None
    if any(b < 1 for b in sizes):
        raise ConfigParameterError(f"config.pbtxt: cuda_graph_batches {sizes} must be positive")
    return sizes


def on_device(engine) -> bool:
    """A torch engine on a CUDA device: tensors stay on the GPU (DLPack in, `forward`), no numpy."""
    return hasattr(engine, "forward") and str(engine.device).startswith("cuda")


def run_raw(engine, inputs: list) -> list:
    """yolo_raw's batch: the requests' input tensors (pb_utils.Tensor) -> one output per request, run as
    one batch. On a CUDA engine the inputs come in through DLPack and the batch is one device tensor."""
    if on_device(engine):
        import torch

        parts = [torch.from_dlpack(tensor.to_dlpack()) for tensor in inputs]
        raw = engine.forward(torch.cat(parts).to(engine.device)).cpu()
        return list(torch.split(raw, [len(p) for p in parts]))
    arrays = [np.ascontiguousarray(tensor.as_numpy(), dtype=np.float32) for tensor in inputs]
    raw = engine.infer({engine.signature.inputs[0].name: np.concatenate(arrays)})[engine.signature.outputs[0].name]
    return split_rows(raw, [len(a) for a in arrays])


def output_tensor(pb_utils, name: str, value):
    """A response tensor from numpy (host path) or a torch tensor (device path, through DLPack)."""
    if isinstance(value, np.ndarray):
        return pb_utils.Tensor(name, np.ascontiguousarray(value))
    return pb_utils.Tensor.from_dlpack(name, value.contiguous())


def pipeline_from_parameters(params: dict[str, str]):
    """The DetectionPipeline the config describes (imgsz, conf, iou, max_det, max_pixels)."""
    from harness.vision.pipeline import DetectionPipeline

    thresholds = Thresholds.from_parameters(params)
    options = {"max_pixels": required(params, "max_pixels", int)} if params.get("max_pixels") else {}
    return DetectionPipeline(imgsz=required(params, "imgsz", int), conf=thresholds.conf, iou=thresholds.iou,
                             max_det=thresholds.max_det, **options)


def request_images(pipeline, blobs: np.ndarray) -> list[np.ndarray]:
    """A request's TYPE_STRING tensor ([b, 1] encoded images) -> b HWC uint8 RGB arrays. The ValueError
    says which image and what is wrong with it (empty, not an image, truncated, too many pixels)."""
    blobs = np.asarray(blobs, dtype=object).reshape(-1)
    images = []
    for index, blob in enumerate(blobs):
        try:
            images.append(pipeline.load(bytes(blob)))
        except ValueError as error:
            raise ValueError(f"image {index + 1} of {len(blobs)}: {error}") from None
    return images


def postprocess(pipeline, raw: np.ndarray, metas, thresholds: Thresholds, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode + NMS + restore with this request's thresholds, padded to the config's `rows`."""
    per_request = replace(pipeline, conf=thresholds.conf, iou=thresholds.iou, max_det=thresholds.max_det)
    detections, num = per_request.postprocess(raw, metas)
    return pad_rows(detections, rows), num.reshape(-1, 1).astype(np.int32)


class HostDetector:
    """yolo_e2e on a CPU instance (or any engine without a device path): DetectionPipeline's numpy and
    OpenCV steps around the engine, all the requests' images in one inference."""

    def __init__(self, pipeline, engine, rows: int):
        self.pipeline, self.engine, self.rows = pipeline, engine, rows
        self.input_name = engine.signature.inputs[0].name
        self.output_name = engine.signature.outputs[0].name

    def describe(self) -> str:
        return f"{self.engine.name} {self.engine.precision} on {self.engine.device}, numpy letterbox and NMS"

    def detect(self, jobs) -> list:
        """Per job: (detections [b, rows, 6], num_detections [b, 1]) or the exception that failed it.
        Leaves the seconds each stage took in `stage_seconds` (exported as stage metrics by model.py)."""
        clock = StageClock()
        self.stage_seconds = clock.seconds
        results: list = [None] * len(jobs)
        batches = []
        for index, job in enumerate(jobs):
            try:
                with clock("decode"):
                    images = request_images(self.pipeline, job.blobs)
                with clock("letterbox"):
                    batches.append((index, *self.pipeline.preprocess(images)))
            except ValueError as error:
                results[index] = error
        if not batches:
            return results
        try:
            with clock("inference"):
                raw = self.engine.infer({self.input_name: np.concatenate([b[1] for b in batches])})[self.output_name]
        except Exception as error:  # noqa: BLE001 -- the batch's requests fail, the model stays up
            for index, *_ in batches:
                results[index] = RuntimeError(f"inference failed: {error}")
            return results
        with clock("nms"):
            for (index, _, metas), rows in zip(batches, split_rows(raw, [len(b[2]) for b in batches])):
                job = jobs[index]
                results[index] = postprocess(self.pipeline, rows, metas, Thresholds(job.conf, job.iou, job.max_det), self.rows)
        return results


def open_detector(args: dict, params: dict[str, str], rows: int, max_batch: int):
    """yolo_e2e's detector for this instance: the device pipeline (nvJPEG, GPU letterbox, CUDA graphs,
    GPU NMS) for the torch engine on a KIND_GPU instance, the host pipeline otherwise."""
    engine = open_model_engine(args, params)
    if on_device(engine):
        from harness.vision.gpu.pipeline import DevicePipeline

        options = {"max_pixels": required(params, "max_pixels", int)} if params.get("max_pixels") else {}
        return DevicePipeline(engine, required(params, "imgsz", int), max_batch, rows,
                              graph_batches=graph_batch_sizes(params), **options)
    return HostDetector(pipeline_from_parameters(params), engine, rows)
