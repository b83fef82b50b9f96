"""The ONNX Runtime adapter's model.py: copied into every version folder of an onnxruntime_onnx model
whose config the harness turned into a Python-backend one (harness.adapters.onnx_runtime), it runs that
version's OWN ONNX file (the config's `onnx_model_filename` parameter) with ONNX Runtime's CPU execution
provider, as Triton's onnxruntime backend would: the config's tensors by name, requests Triton batched
together run as one batch, one response per request, errors inside the response. Imports nothing of
the harness: it runs in the server's Python (numpy < 2, PLATFORM.md)."""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils

FILENAME = "onnx_model_filename"


def _parameter(config, key, default=None):
    return config.get("parameters", {}).get(key, {}).get("string_value", default)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        folder = os.path.join(args["model_repository"], args["model_version"])
        path = os.path.join(folder, _parameter(config, FILENAME, "model.onnx"))
        if not os.path.isfile(path):
            raise pb_utils.TritonModelException(f"ONNX Runtime adapter: no ONNX file at {path}")
        options = ort.SessionOptions()
        for key, attribute in (("intra_op_thread_count", "intra_op_num_threads"),
                               ("inter_op_thread_count", "inter_op_num_threads")):
            if _parameter(config, key):
                setattr(options, attribute, int(_parameter(config, key)))
        self.session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.inputs = [(i["name"], pb_utils.triton_string_to_numpy(i["data_type"])) for i in config["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]

    def _feeds(self, requests):
        """Each input of every request, as numpy; with batching, requests whose shapes agree past the
        batch dim are one batch (returned with each request's share), else one run per request."""
        per_request = [{name: pb_utils.get_input_tensor_by_name(r, name).as_numpy().astype(dtype, copy=False)
                        for name, dtype in self.inputs} for r in requests]
        same = self.batched and all({n: a.shape[1:] for n, a in f.items()} == {n: a.shape[1:] for n, a in per_request[0].items()}
                                    for f in per_request)
        if not same:
            return [(f, None) for f in per_request]
        sizes = [next(iter(f.values())).shape[0] for f in per_request]
        joined = {name: np.concatenate([f[name] for f in per_request]) for name, _ in self.inputs}
        return [(joined, sizes)]

    def execute(self, requests):
        names = [name for name, _ in self.outputs]
        responses = []
        try:
            for feeds, sizes in self._feeds(requests):
                results = self.session.run(names, feeds)
                if sizes is None:
                    responses.append(results)
                    continue
                bounds = np.cumsum(sizes)[:-1]
                responses += list(zip(*(np.split(result, bounds) for result in results)))
        except Exception as error:  # a failed batch fails its requests, not the model
            message = f"ONNX Runtime adapter: {type(error).__name__}: {error}"
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests]
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor(name, np.ascontiguousarray(value.astype(dtype, copy=False)))
            for (name, dtype), value in zip(self.outputs, values)]) for values in responses]

    def finalize(self):
        self.session = None
