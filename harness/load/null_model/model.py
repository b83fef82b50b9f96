"""Echo: OUTPUT0 = INPUT0, nothing else, so a load run against it measures client, transport and
Triton's own per-request cost — the floor under every model measurement."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
