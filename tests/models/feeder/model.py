"""The step that feeds a postprocess in the harness's own sizing fixture: RAW [4] in, FEATURES of the
shape its config declares out (zeros plus RAW's mean), as a detector feeds its decoder."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        output = next(o for o in config["output"] if o["name"] == "FEATURES")
        self.dims = [int(d) for d in output["dims"]]

    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            features = np.zeros((raw.shape[0], *self.dims), np.float32) + raw.mean(axis=1).reshape(-1, *[1] * len(self.dims))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FEATURES", features.astype(np.float32))]))
        return responses
