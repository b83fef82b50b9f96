"""yolo_raw: the raw detector behind the Python backend, the I/O contract of yolo_trt/yolo_onnx
([N,3,H,W] FP32 letterboxed images -> [N,4+nc,anchors] FP32), run by harness.engines: ONNX Runtime
on KIND_CPU instances; on KIND_GPU ones the PyTorch FP16 engine with a CUDA graph per batch size
(`cuda_graph_batches`), inputs and outputs through DLPack. Requests Triton batched together run as one
batch."""

import json

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
        graphs = serving.graph_batch_sizes(params) if serving.on_device(self.engine) else []
        if graphs:
            graphs = self.engine.capture(graphs, tuple(int(d) for d in config["input"][0]["dims"][1:]))
        pb_utils.Logger.log_info(f"yolo_raw instance {args['model_instance_name']}: {self.engine.name} "
                                 f"{self.engine.precision} on {self.engine.device}, CUDA graphs {graphs or 'none'}")

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, self.input_name) for r in requests]
        try:
            outputs = serving.run_raw(self.engine, inputs)
        except Exception as error:  # one failed batch fails its requests, not the model
            message = f"yolo_raw: {self.engine.name} failed on a batch of {len(requests)} requests: {error}"
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests]
        return [pb_utils.InferenceResponse(output_tensors=[serving.output_tensor(pb_utils, self.output_name, rows)])
                for rows in outputs]

    def finalize(self):
        self.engine = None
