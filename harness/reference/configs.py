"""The reference models' ModelConfigs, as pure functions of the target (device, imgsz, classes), so
the committed config.pbtxt files are what the builder writes and a test can regenerate them.

Choices, from Triton's model-configuration and optimization guides:
- dims exclude the batch dimension; max_batch_size bounds what dynamic batching may form;
- dynamic batching with preferred sizes the runtime runs well, and a short queue delay;
- CPU instances: one each (2 shared cores here; ORT gets the threads); GPU: KIND_GPU instances running
  PyTorch FP16 with CUDA graphs for the batch sizes the batcher forms, two for yolo_raw (transport-bound)
  and eight for yolo_e2e (each a process with a serial decode -> engine -> NMS chain; with CUDA MPS their
  kernels interleave), or the TensorRT/ONNX Runtime backends;
- yolo_raw keeps two versions live (`latest {num_versions: 2}`) so hot reload can be exercised."""

from __future__ import annotations

from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2 as pb

from harness.engines.tensorrt_build import DEFAULT_BATCH_RANGE

STRIDES = (8, 16, 32)
DEVICES = ("cpu", "gpu")


@dataclass(frozen=True)
class Target:
    """What the configs depend on: the machine kind, the input size, the model's classes."""

    device: str = "cpu"
    imgsz: int = 640
    nc: int = 6
    max_det: int = 300
    conf: float = 0.25
    iou: float = 0.7
    gpu_instances: int = 2
    e2e_gpu_instances: int = 8  # processes: with CUDA MPS they share the GPU (benchmarks/results/README.md)
    # harness.engines.torch_engine.COMPILE_MODES, or None: eager kernels in CUDA graphs. torch.compile made the
    # engine ~1.4x faster on the H200 but costs ~60 s per load of 8 instances, and a certification loads
    # yolo_e2e six times (config, batching and its twin, session, lifecycle, operations): off by default
    e2e_torch_compile: str | None = None

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r}: choose from {DEVICES}")
        if self.imgsz % max(STRIDES):
            raise ValueError(f"imgsz {self.imgsz} is not a multiple of the largest stride {max(STRIDES)}")

    @property
    def anchors(self) -> int:
        return sum((self.imgsz // s) ** 2 for s in STRIDES)

    @property
    def gpu(self) -> bool:
        return self.device == "gpu"

    @property
    def max_batch_size(self) -> int:
        return 64 if self.gpu else 8

    @property
    def preferred_batch_sizes(self) -> list[int]:
        return [16, 32, 64] if self.gpu else [4, 8]

    @property
    def graph_batch_sizes(self) -> list[int]:
        """Batch sizes the GPU engine captures a CUDA graph for; other sizes run padded to the next."""
        return [b for b in (1, 2, 4, 8, 16, 24, 32, 48, 64) if b <= self.max_batch_size]

    @property
    def e2e_graph_batch_sizes(self) -> list[int]:
        """yolo_e2e's graphs: each is a torch.compile at load, so fewer sizes (a batch of 1 runs padded to 8)."""
        return [b for b in (8, 16, 32, 64) if b <= self.max_batch_size]


def _params(config: pb.ModelConfig, **values) -> None:
    for key, value in values.items():
        config.parameters[key].string_value = str(value)


def _instances(config: pb.ModelConfig, target: Target, gpu_count: int | None = None) -> None:
    kind = pb.ModelInstanceGroup.KIND_GPU if target.gpu else pb.ModelInstanceGroup.KIND_CPU
    config.instance_group.add(kind=kind, count=(gpu_count or target.gpu_instances) if target.gpu else 1)


def _batching(config: pb.ModelConfig, target: Target, delay_us: int) -> None:
    config.max_batch_size = target.max_batch_size
    config.dynamic_batching.preferred_batch_size.extend(target.preferred_batch_sizes)
    config.dynamic_batching.max_queue_delay_microseconds = delay_us


def _runtime(config: pb.ModelConfig, target: Target, graph_batches: list[int] | None = None,
             torch_compile: str | None = None) -> None:
    """The engine parameters: on GPU the torch engine, CUDA graphs for `graph_batches` (default: the
    target's), through torch.compile when `torch_compile` names a mode."""
    if target.gpu:
        _params(config, runtime="torch", precision="fp16", model_file="model.onnx",
                cuda_graph_batches=",".join(str(b) for b in graph_batches or target.graph_batch_sizes))
        if torch_compile:
            _params(config, torch_compile=torch_compile)
    else:
        # no CPU arena: its power-of-two growth would make the stub's memory depend on the traffic it saw; no
        # spinning: idle intra-op threads would burn the cores a co-tenant model needs (suites/operations' co-tenancy)
        _params(config, runtime="onnxruntime", intra_op_threads=2, enable_cpu_mem_arena="false",
                intra_op_spinning="false", model_file="model.onnx")


def _thresholds(config: pb.ModelConfig, target: Target) -> None:
    _params(config, imgsz=target.imgsz, conf=target.conf, iou=target.iou, max_det=target.max_det)


def _raw_io(config: pb.ModelConfig, target: Target, input_name: str = "images", output_name: str = "output0") -> None:
    config.input.add(name=input_name, data_type=pb.TYPE_FP32, dims=[3, target.imgsz, target.imgsz])
    config.output.add(name=output_name, data_type=pb.TYPE_FP32, dims=[4 + target.nc, target.anchors])


def _detections_out(config: pb.ModelConfig, target: Target) -> None:
    config.output.add(name="detections", data_type=pb.TYPE_FP32, dims=[target.max_det, 6])
    config.output.add(name="num_detections", data_type=pb.TYPE_INT32, dims=[1])


def yolo_raw(target: Target) -> pb.ModelConfig:
    config = pb.ModelConfig(name="yolo_raw", backend="python")
    config.version_policy.latest.num_versions = 2
    _raw_io(config, target)
    _batching(config, target, delay_us=2000)
    _instances(config, target)
    _runtime(config, target)
    return config


def yolo_e2e(target: Target) -> pb.ModelConfig:
    config = pb.ModelConfig(name="yolo_e2e", backend="python")
    config.input.add(name="images", data_type=pb.TYPE_STRING, dims=[1])
    _detections_out(config, target)
    _batching(config, target, delay_us=5000)
    _instances(config, target, target.e2e_gpu_instances)
    _runtime(config, target, target.e2e_graph_batch_sizes, target.e2e_torch_compile)
    _thresholds(config, target)
    return config


def yolo_preprocess(target: Target) -> pb.ModelConfig:
    config = pb.ModelConfig(name="yolo_preprocess", backend="python", max_batch_size=target.max_batch_size)
    config.input.add(name="images", data_type=pb.TYPE_STRING, dims=[1])
    config.output.add(name="letterboxed", data_type=pb.TYPE_FP32, dims=[3, target.imgsz, target.imgsz])
    config.output.add(name="letterbox_meta", data_type=pb.TYPE_FP64, dims=[11])
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)  # decoding is CPU work
    _thresholds(config, target)
    return config


def yolo_postprocess(target: Target) -> pb.ModelConfig:
    config = pb.ModelConfig(name="yolo_postprocess", backend="python", max_batch_size=target.max_batch_size)
    config.input.add(name="raw", data_type=pb.TYPE_FP32, dims=[4 + target.nc, target.anchors])
    config.input.add(name="letterbox_meta", data_type=pb.TYPE_FP64, dims=[11])
    _detections_out(config, target)
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)
    _thresholds(config, target)
    return config


def yolo_ensemble(target: Target) -> pb.ModelConfig:
    """preprocess -> yolo_raw -> postprocess: the alternative layout, each step batched on its own."""
    config = pb.ModelConfig(name="yolo_ensemble", platform="ensemble", max_batch_size=target.max_batch_size)
    config.input.add(name="images", data_type=pb.TYPE_STRING, dims=[1])
    _detections_out(config, target)
    steps = (
        ("yolo_preprocess", {"images": "images"}, {"letterboxed": "letterboxed", "letterbox_meta": "letterbox_meta"}),
        ("yolo_raw", {"images": "letterboxed"}, {"output0": "raw"}),
        ("yolo_postprocess", {"raw": "raw", "letterbox_meta": "letterbox_meta"},
         {"detections": "detections", "num_detections": "num_detections"}),
    )
    for model, inputs, outputs in steps:
        step = config.ensemble_scheduling.step.add(model_name=model, model_version=-1)
        step.input_map.update(inputs)
        step.output_map.update(outputs)
    return config


ONNX_VERSIONS = {1: "fp32", 2: "fp16", 3: "int8"}


def yolo_onnx(target: Target, versions: dict[int, str] = ONNX_VERSIONS) -> pb.ModelConfig:
    """The ONNX variants as versions 1/2/3 (fp32/fp16/int8), all served (a `specific` policy naming them), for servers with
    the ONNX Runtime backend."""
    config = pb.ModelConfig(name="yolo_onnx", platform="onnxruntime_onnx")
    config.version_policy.specific.versions.extend(sorted(versions))
    _raw_io(config, target)
    _batching(config, target, delay_us=2000)
    _instances(config, target)
    return config


def yolo_trt(target: Target, profile_max_batch: int = DEFAULT_BATCH_RANGE[2]) -> pb.ModelConfig:
    """TensorRT plan: max_batch_size never above the plan's optimization profile max."""
    config = pb.ModelConfig(name="yolo_trt", platform="tensorrt_plan")
    _raw_io(config, target)
    _batching(config, target, delay_us=1000)
    config.max_batch_size = min(config.max_batch_size, profile_max_batch)
    config.dynamic_batching.ClearField("preferred_batch_size")
    config.dynamic_batching.preferred_batch_size.extend(
        [b for b in target.preferred_batch_sizes if b <= config.max_batch_size] or [config.max_batch_size])
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_GPU, count=1)
    return config


# Python models and the ensemble: always written. yolo_onnx: always (the config suite judges it even
# where it cannot load). yolo_trt: only with a plan.
PYTHON_MODELS = {"yolo_raw": yolo_raw, "yolo_e2e": yolo_e2e, "yolo_preprocess": yolo_preprocess,
                 "yolo_postprocess": yolo_postprocess}
ENSEMBLES = {"yolo_ensemble": yolo_ensemble}
