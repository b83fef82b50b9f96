"""yolo_raw: the raw detector behind the Python backend, the I/O contract of yolo_trt/yolo_onnx
([N,3,H,W] FP32 letterboxed images -> [N,4+nc,anchors] FP32), run by harness.engines: ONNX Runtime
on KIND_CPU instances, PyTorch FP16 on KIND_GPU ones. Requests Triton batched together run as one
batch."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

from harness.reference import serving


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = serving.parameters(config)
        self.input_name = config["input"][0]["name"]
        self.output_name = config["output"][0]["name"]
        self.engine = serving.open_model_engine(args, params)
        names = ([s.name for s in self.engine.signature.inputs], [s.name for s in self.engine.signature.outputs])
        if names != ([self.input_name], [self.output_name]):
            raise serving.ConfigParameterError(
                f"config.pbtxt declares input {self.input_name!r} / output {self.output_name!r}, "
                f"the model file has inputs {names[0]} / outputs {names[1]}")

    def execute(self, requests):
        batches = [np.ascontiguousarray(pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy(), dtype=np.float32)
                   for r in requests]
        try:
            raw = self.engine.infer({self.input_name: np.concatenate(batches)})[self.output_name]
        except Exception as error:  # one failed batch fails its requests, not the model
            message = f"yolo_raw: {self.engine.name} failed on a batch of {sum(len(b) for b in batches)}: {error}"
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests]
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(self.output_name, np.ascontiguousarray(rows))])
                for rows in serving.split_rows(raw, [len(b) for b in batches])]

    def finalize(self):
        self.engine = None
