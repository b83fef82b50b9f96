"""Adapters: serving a model whose backend the embedded server lacks through its Python backend
(harness.adapters.onnx_runtime: an onnxruntime_onnx model run by ONNX Runtime), so that a host
without an NGC image still judges the model the repository ships — labelled as such, since the
missing backend itself is not exercised."""
