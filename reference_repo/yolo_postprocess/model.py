"""yolo_postprocess, the ensemble's last step: raw [4+nc,anchors] + letterbox geometry -> detections
[max_det,6] in source pixels (padded with -1) and num_detections, by the same DetectionPipeline code
as yolo_e2e. Thresholds come from config parameters; request parameters override them when the
server forwards them to ensemble steps."""

import json

import triton_python_backend_utils as pb_utils

from harness.reference import serving


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = serving.parameters(config)
        self.pipeline = serving.pipeline_from_parameters(params)
        self.defaults = serving.Thresholds.from_parameters(params)
        self.rows = int({o["name"]: o for o in config["output"]}["detections"]["dims"][0])

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                thresholds = self.defaults.override(request.parameters(), limit=self.rows)
                raw = pb_utils.get_input_tensor_by_name(request, "raw").as_numpy()
                metas = serving.meta_from_array(pb_utils.get_input_tensor_by_name(request, "letterbox_meta").as_numpy())
                detections, num = serving.postprocess(self.pipeline, raw, metas, thresholds, self.rows)
            except ValueError as error:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"yolo_postprocess: {error}", pb_utils.TritonError.INVALID_ARG)))
                continue
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("detections", detections), pb_utils.Tensor("num_detections", num)]))
        return responses

    def finalize(self):
        self.pipeline = None
