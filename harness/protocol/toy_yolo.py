"""A tiny deterministic stand-in for a YOLO deployment, so the protocol suite and its broken fixtures
can run without trained weights: the same contract as the reference models (raw head output
[N, 4 + nc, anchors]; end-to-end encoded bytes -> detections [max_det, 6] + num_detections, request
parameters conf/iou/max_det) with a "detector" that scores each 8x8-pixel cell by its mean colour.

fixtures/protocol/*/model.py subclass these and break one thing each. Runs inside the Python
backend stub (the harness's venv is the models' Python in process mode)."""

from __future__ import annotations

import json

import numpy as np

CELL = 8
NUM_CLASSES = 2


def raw_forward(images: np.ndarray) -> np.ndarray:
    """[N, 3, H, W] float in [0, 1] -> [N, 4 + nc, anchors]: one anchor per cell, a 2-cell box at the
    cell centre, class c scored by sigmoid(10 * (mean of channel c - 0.5))."""
    n, _, h, w = images.shape
    gh, gw = h // CELL, w // CELL
    cells = images[:, :NUM_CLASSES, : gh * CELL, : gw * CELL].reshape(n, NUM_CLASSES, gh, CELL, gw, CELL).mean(axis=(3, 5))
    scores = 1.0 / (1.0 + np.exp(-10.0 * (cells - 0.5)))
    ys, xs = np.meshgrid((np.arange(gh) + 0.5) * CELL, (np.arange(gw) + 0.5) * CELL, indexing="ij")
    boxes = np.stack([xs, ys, np.full_like(xs, 2 * CELL), np.full_like(ys, 2 * CELL)])
    out = np.concatenate([np.broadcast_to(boxes, (n, 4, gh, gw)), scores], axis=1)
    return out.reshape(n, 4 + NUM_CLASSES, gh * gw).astype(np.float32)


class RequestError(ValueError):
    """A request the model refuses; becomes an INVALID_ARG error response."""


def request_options(parameters_json: str, defaults: dict) -> dict:
    """conf / iou / max_det from the request parameters, validated; defaults for the rest."""
    options = dict(defaults)
    given = json.loads(parameters_json or "{}")
    for key in ("conf", "iou", "max_det"):
        if key in given:
            options[key] = given[key]
    for key in ("conf", "iou"):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise RequestError(f"request parameter {key}={value!r} must be a number in [0, 1]")
        options[key] = float(value)
    value = options["max_det"]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= defaults["max_det"]:
        raise RequestError(f"request parameter max_det={value!r} must be an integer in [1, {defaults['max_det']}]")
    return options


class RawModel:
    """yolo_raw: images [N, 3, H, W] FP32 -> output0 [N, 4 + nc, anchors] FP32."""

    def initialize(self, args):
        import triton_python_backend_utils as pb_utils

        self.pb = pb_utils
        config = json.loads(args["model_config"])
        self.input = config["input"][0]["name"]
        self.output = config["output"][0]["name"]

    def forward(self, images: np.ndarray) -> np.ndarray:
        return raw_forward(images)

    def execute(self, requests):
        responses = []
        for request in requests:
            images = self.pb.get_input_tensor_by_name(request, self.input).as_numpy()
            out = self.forward(images)
            responses.append(self.pb.InferenceResponse([self.pb.Tensor(self.output, out)]))
        return responses


class EndToEndModel:
    """yolo_e2e: images [N, 1] BYTES (encoded) -> detections [N, max_det, 6] FP32 (-1-padded) and
    num_detections [N, 1] INT32. One image that cannot be decoded fails its whole request."""

    defaults = {"conf": 0.25, "iou": 0.7, "max_det": 100}
    imgsz = 64

    def initialize(self, args):
        import triton_python_backend_utils as pb_utils

        from harness.vision.pipeline import DetectionPipeline

        self.pb = pb_utils
        self.pipeline = DetectionPipeline(imgsz=self.imgsz)

    def infer(self, encoded: list[bytes], options: dict) -> tuple[np.ndarray, np.ndarray]:
        self.pipeline.conf, self.pipeline.iou, self.pipeline.max_det = options["conf"], options["iou"], options["max_det"]
        try:
            tensors, metas = self.pipeline.preprocess(encoded)
        except ValueError as error:
            raise RequestError(str(error)) from error
        except OSError as error:  # PIL raises OSError for a JPEG cut inside its headers
            raise RequestError(f"image data is truncated or corrupt: {error}") from error
        return self.pipeline.postprocess(raw_forward(tensors), metas)

    def outputs(self, detections: np.ndarray, num: np.ndarray):
        return [self.pb.Tensor("detections", detections.astype(np.float32)),
                self.pb.Tensor("num_detections", num.reshape(-1, 1).astype(np.int32))]

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                options = request_options(request.parameters(), self.defaults)
                encoded = [bytes(b) for b in self.pb.get_input_tensor_by_name(request, "images").as_numpy().reshape(-1)]
                responses.append(self.pb.InferenceResponse(self.outputs(*self.infer(encoded, options))))
            except RequestError as error:
                responses.append(self.pb.InferenceResponse(
                    error=self.pb.TritonError(str(error), self.pb.TritonError.INVALID_ARG)))
        return responses
