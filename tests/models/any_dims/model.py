"""A Python-backend model that takes an FP32 tensor X of any shape (a postprocess step's [-1,-1,-1]) and
answers STATS [2] per item: its element count and its sum (NaN/Inf are data, not an error)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.batched = json.loads(args["model_config"]).get("max_batch_size", 0) > 0

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            items = x.reshape(x.shape[0] if self.batched else 1, -1)
            stats = np.stack([np.full(items.shape[0], items.shape[1], np.float64), items.sum(axis=1, dtype=np.float64)], 1)
            stats = stats.astype(np.float32) if self.batched else stats[0].astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("STATS", stats)]))
        return responses
