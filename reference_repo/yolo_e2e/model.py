"""yolo_e2e: encoded JPEG/PNG bytes of any size in, detections in source-image pixels out. Letterbox,
confidence filter, class-aware NMS and restore are harness.vision's DetectionPipeline, the very code of
the local reference; inference runs once over every image of every request Triton batched together.
conf/iou/max_det come from config parameters and may be overridden per request (request parameters);
a bad image fails its own request with a message naming the problem, never the batch."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from harness.reference import serving


def _error(message: str):
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(message, pb_utils.TritonError.INVALID_ARG))


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = serving.parameters(config)
        self.pipeline = serving.pipeline_from_parameters(params)
        self.defaults = serving.Thresholds.from_parameters(params)
        outputs = {o["name"]: o for o in config["output"]}
        if "detections" not in outputs or "num_detections" not in outputs:
            raise serving.ConfigParameterError(f"config.pbtxt outputs {sorted(outputs)}: need detections and num_detections")
        self.rows = int(outputs["detections"]["dims"][0])
        if self.defaults.max_det > self.rows:
            raise serving.ConfigParameterError(f"parameter max_det={self.defaults.max_det} exceeds detections dims {self.rows}")
        self.engine = serving.open_model_engine(args, params)
        self.input_name = self.engine.signature.inputs[0].name
        self.output_name = self.engine.signature.outputs[0].name

    def execute(self, requests):
        responses = [None] * len(requests)
        jobs = []  # (request index, thresholds, letterboxed batch, metas)
        for index, request in enumerate(requests):
            try:
                thresholds = self.defaults.override(request.parameters(), limit=self.rows)
                blobs = pb_utils.get_input_tensor_by_name(request, "images").as_numpy()
                batch, metas = self.pipeline.preprocess(serving.request_images(self.pipeline, blobs))
            except ValueError as error:
                responses[index] = _error(f"yolo_e2e: {error}")
                continue
            jobs.append((index, thresholds, batch, metas))
        if not jobs:
            return responses
        try:
            raw = self.engine.infer({self.input_name: np.concatenate([job[2] for job in jobs])})[self.output_name]
        except Exception as error:
            for index, *_ in jobs:
                responses[index] = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"yolo_e2e: inference failed: {error}"))
            return responses
        for (index, thresholds, _, metas), rows in zip(jobs, serving.split_rows(raw, [len(job[3]) for job in jobs])):
            detections, num = serving.postprocess(self.pipeline, rows, metas, thresholds, self.rows)
            responses[index] = pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("detections", detections), pb_utils.Tensor("num_detections", num)])
        return responses

    def finalize(self):
        self.engine = None
