"""A minimal Python-backend model for the harness's own tests: Y = 2·X + 1 per row, and BATCH = the
number of rows in the batch execute() received, so a test can see dynamic batching happen."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.scale = 2.0

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        rows = sum(x.shape[0] for x in inputs)
        responses = []
        for x in inputs:
            y = (x * self.scale + 1.0).astype(np.float32)
            batch = np.full((x.shape[0], 1), rows, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y), pb_utils.Tensor("BATCH", batch)]))
        return responses
