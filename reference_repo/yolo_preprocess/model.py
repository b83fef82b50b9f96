"""yolo_preprocess, the ensemble's first step: encoded image bytes -> letterboxed [3,H,W] FP32 and the
letterbox geometry (one FP64 row per image) the postprocess step needs to restore boxes."""

import json

import triton_python_backend_utils as pb_utils

from harness.reference import serving


class TritonPythonModel:
    def initialize(self, args):
        params = serving.parameters(json.loads(args["model_config"]))
        self.pipeline = serving.pipeline_from_parameters(params)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                blobs = pb_utils.get_input_tensor_by_name(request, "images").as_numpy()
                batch, metas = self.pipeline.preprocess(serving.request_images(self.pipeline, blobs))
            except ValueError as error:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"yolo_preprocess: {error}", pb_utils.TritonError.INVALID_ARG)))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("letterboxed", batch), pb_utils.Tensor("letterbox_meta", serving.meta_to_array(metas))]))
        return responses

    def finalize(self):
        self.pipeline = None
