"""yolo_e2e: encoded JPEG/PNG bytes of any size in, detections in source-image pixels out.

The detector is chosen for the instance (harness.reference.serving.open_detector): on KIND_CPU the
host pipeline (harness.vision's DetectionPipeline, the very code of the local reference, around ONNX
Runtime); on KIND_GPU the device pipeline (nvJPEG, letterbox on the GPU, the torch FP16 engine's CUDA
graphs, batched NMS, on the instance's CUDA stream, outputs through DLPack). Either way the images of
every request Triton batched together run as one batch. conf/iou/max_det come from config parameters
and may be overridden per request (request parameters); a bad image fails its own request with a
message naming the problem, never the batch."""

import json

import triton_python_backend_utils as pb_utils

from harness.reference import serving
from harness.vision.pipeline import Job
from harness.vision.stages import STAGES


def _error(message: str, internal: bool = False):
    # TritonError exists only once the stub runs the model, not at import time
    code = pb_utils.TritonError.INTERNAL if internal else pb_utils.TritonError.INVALID_ARG
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, code))


def _stage_metrics(args, stages):
    """Seconds spent per stage (suites/operations adds them up against Triton's compute time); the
    family is kept with its metrics, which must not outlive it."""
    family = pb_utils.MetricFamily(name="yts_model_stage_seconds", description="seconds spent per pipeline stage",
                                   kind=pb_utils.MetricFamily.COUNTER)
    labels = {"model": args["model_name"], "version": args["model_version"]}
    return family, {stage: family.Metric(labels={**labels, "stage": stage}) for stage in stages}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = serving.parameters(config)
        self.defaults = serving.Thresholds.from_parameters(params)
        outputs = {o["name"]: o for o in config["output"]}
        if "detections" not in outputs or "num_detections" not in outputs:
            raise serving.ConfigParameterError(f"config.pbtxt outputs {sorted(outputs)}: need detections and num_detections")
        self.rows = int(outputs["detections"]["dims"][0])
        if self.defaults.max_det > self.rows:
            raise serving.ConfigParameterError(f"parameter max_det={self.defaults.max_det} exceeds detections dims {self.rows}")
        self.detector = serving.open_detector(args, params, self.rows, max(1, int(config.get("max_batch_size", 1))))
        self.stage_metrics = _stage_metrics(args, STAGES)
        pb_utils.Logger.log_info(f"yolo_e2e instance {args['model_instance_name']}: {self.detector.describe()}")

    def execute(self, requests):
        responses = [None] * len(requests)
        jobs, owners = [], []
        for index, request in enumerate(requests):
            try:
                thresholds = self.defaults.override(request.parameters(), limit=self.rows)
            except ValueError as error:
                responses[index] = _error(f"yolo_e2e: {error}")
                continue
            blobs = pb_utils.get_input_tensor_by_name(request, "images").as_numpy().reshape(-1)
            jobs.append(Job(blobs, thresholds.conf, thresholds.iou, thresholds.max_det))
            owners.append(index)
        for index, result in zip(owners, self.detector.detect(jobs) if jobs else []):
            if isinstance(result, ValueError):
                responses[index] = _error(f"yolo_e2e: {result}")
            elif isinstance(result, Exception):
                responses[index] = _error(f"yolo_e2e: {result}", internal=True)
            else:
                detections, num = result
                responses[index] = pb_utils.InferenceResponse(output_tensors=[
                    serving.output_tensor(pb_utils, "detections", detections),
                    serving.output_tensor(pb_utils, "num_detections", num)])
        for stage, seconds in getattr(self.detector, "stage_seconds", {}).items():
            self.stage_metrics[1][stage].increment(seconds)
        return responses

    def finalize(self):
        self.detector = None
        self.stage_metrics = None
