"""End-to-end detectors in a model repository, found from their ModelConfig, and a client for them.

An end-to-end detector takes encoded images (one TYPE_STRING / BYTES element per image) and returns
detections in source-image pixels: an FP32 output whose last dimension is 6 (x1, y1, x2, y2, score,
class; rows padded with class -1), optionally with an integer count output. That is all a black-box
check may assume, so the check works on any repository, not only the reference one.

The geometry a check needs (model input size, largest stride) comes from the config too: an `imgsz`
parameter on the model, else on one of its ensemble steps, else the square input of a raw-tensor
model in the same repository the ensemble calls; the stride from a `stride` parameter, else YOLOv8's 32."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.repository.config import CONFIG_NAME, read_config

DEFAULT_STRIDE = 32  # YOLOv8's largest detection stride (P5)


@dataclass(frozen=True)
class EndToEndModel:
    """What a client needs to call one end-to-end detector and interpret its answer."""

    name: str
    input_name: str
    input_shape: tuple[int, ...]  # request shape for one image, batch dim included when batched
    detections: str
    count: str | None
    imgsz: tuple[int, int] | None  # (h, w) of the model input canvas, when the config states it
    stride: int

    def describe(self) -> str:
        size = f"{self.imgsz[0]}x{self.imgsz[1]}" if self.imgsz else "input size unknown"
        return f"{self.name} ({self.input_name} -> {self.detections}, {size}, stride {self.stride})"


def _string_input(config):
    from tritonclient.grpc import model_config_pb2 as pb

    strings = [i for i in config.input if i.data_type == pb.TYPE_STRING]
    return strings[0] if len(config.input) == 1 and strings else None


def _detections_output(config):
    from tritonclient.grpc import model_config_pb2 as pb

    rows = [o for o in config.output if o.data_type == pb.TYPE_FP32 and len(o.dims) >= 1 and o.dims[-1] == 6]
    if not rows:
        return None, None
    detections = next((o for o in rows if o.name == "detections"), rows[0])
    ints = (pb.TYPE_INT32, pb.TYPE_INT64, pb.TYPE_UINT32, pb.TYPE_UINT64)
    counts = [o for o in config.output if o.data_type in ints and [d for d in o.dims if d != 1] == []]
    return detections, (counts[0].name if counts else None)


def _parameter(config, key: str) -> str | None:
    return config.parameters[key].string_value if key in config.parameters else None


def _imgsz(config, configs: dict) -> tuple[int, int] | None:
    from tritonclient.grpc import model_config_pb2 as pb

    value = _parameter(config, "imgsz")
    if value:
        sides = [int(v) for v in value.replace("x", ",").split(",") if v.strip()]
        return (sides[0], sides[-1])
    for step in config.ensemble_scheduling.step:
        other = configs.get(step.model_name)
        if other is None:
            continue
        if _parameter(other, "imgsz"):
            return _imgsz(other, configs)
        first = other.input[0] if other.input else None
        if first is not None and first.data_type == pb.TYPE_FP32 and len(first.dims) >= 3 and first.dims[-3] == 3 \
                and min(first.dims[-2:]) > 0:
            return int(first.dims[-2]), int(first.dims[-1])
    return None


def end_to_end_models(repository: Path) -> list[EndToEndModel]:
    """Every model in `repository` that takes encoded images and returns detections rows, by name."""
    configs = {}
    for model_dir in sorted(p for p in Path(repository).iterdir() if (p / CONFIG_NAME).is_file()):
        config = read_config(model_dir)
        configs[config.name or model_dir.name] = config
    found = []
    for name, config in configs.items():
        image_input = _string_input(config)
        detections, count = _detections_output(config)
        if image_input is None or detections is None:
            continue
        dims = [1 if d < 0 else int(d) for d in image_input.dims] or [1]
        shape = ([1] if config.max_batch_size > 0 else []) + dims
        stride = int(_parameter(config, "stride") or DEFAULT_STRIDE)
        found.append(EndToEndModel(name, image_input.name, tuple(shape), detections.name, count,
                                   _imgsz(config, configs), stride))
    return found


class EndToEndClient:
    """detect(encoded) -> rows [k, 6] over tritonclient's HTTP or gRPC client (whichever is given)."""

    def __init__(self, client, model: EndToEndModel):
        self.client, self.model = client, model
        module = type(client).__module__
        if module.startswith("tritonclient.http"):
            import tritonclient.http as protocol
        elif module.startswith("tritonclient.grpc"):
            import tritonclient.grpc as protocol
        else:
            raise TypeError(f"{type(client).__name__}: not a tritonclient HTTP or gRPC client")
        self.protocol = protocol

    def detect(self, encoded: bytes) -> np.ndarray:
        model, protocol = self.model, self.protocol
        data = np.array([encoded], dtype=np.object_).reshape(model.input_shape)
        infer_input = protocol.InferInput(model.input_name, list(model.input_shape), "BYTES")
        infer_input.set_data_from_numpy(data)
        outputs = [protocol.InferRequestedOutput(name) for name in (model.detections, model.count) if name]
        response = self.client.infer(model.name, [infer_input], outputs=outputs)
        rows = np.asarray(response.as_numpy(model.detections), dtype=np.float64).reshape(-1, 6)
        if model.count is not None:
            rows = rows[: int(np.asarray(response.as_numpy(model.count)).reshape(-1)[0])]
        return rows[rows[:, 5] >= 0]
