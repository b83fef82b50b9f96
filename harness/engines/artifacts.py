"""Artifact cache: every variant is built on demand from the committed model and kept under a key that is
the content hash of everything that determines its bytes (source model, build parameters, calibration
images, tool versions, the recipe's own source). Same inputs -> same key -> nothing is rebuilt.

Variant names are the CLI's vocabulary: "<precision>[-<calibration slices>][-<method>][-<activation>]
-<dyn|bN>-<imgsz>", with "trt-" in front for TensorRT plans, e.g. fp32-dyn-640, fp16-b1-320,
int8-day+night-minmax-quint8-dyn-640, trt-int8-day+night-minmax-qint8-dyn-640."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

import onnx

from harness import paths
from harness.engines import calibration as calibration_module
from harness.engines import variants as variants_module
from harness.engines.calibration import CalibrationSet

REFERENCE_MODEL = paths.PROJECT_ROOT / "reference_model" / "yolov8n_shapes.onnx"
EVAL_SET = paths.FIXTURES / "shapes_eval"
PRECISIONS = ("fp32", "fp16", "int8")
DEFAULT_VARIANTS = (
    "fp32-dyn-640", "fp32-b1-640", "fp32-dyn-320", "fp32-b1-320",
    "fp16-dyn-640", "fp16-dyn-320",
    "int8-day+night-minmax-quint8-dyn-640", "int8-day+night-minmax-quint8-dyn-320",
    "int8-day-minmax-quint8-dyn-320",
)


@dataclass(frozen=True)
class VariantSpec:
    precision: str
    imgsz: int = 640
    batch: int | None = None  # None: dynamic batch dim
    slices: tuple[str, ...] | None = ("day", "night")  # INT8 calibration slices; None = all images
    method: str = "minmax"
    activation: str = "quint8"
    per_slice: int = 64
    tensorrt: bool = False
    calibration_dir: str = field(default="", compare=False)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: choose from {PRECISIONS}")
        if self.tensorrt and self.precision == "int8" and self.activation != "qint8":
            raise ValueError("TensorRT builds only symmetric int8 Q/DQ: use activation qint8 for trt-int8")

    @property
    def name(self) -> str:
        parts = ["trt"] if self.tensorrt else []
        parts.append(self.precision)
        if self.precision == "int8":
            parts += ["+".join(self.slices) if self.slices else "all", self.method, self.activation]
        parts += ["dyn" if self.batch is None else f"b{self.batch}", str(self.imgsz)]
        return "-".join(parts)

    @classmethod
    def parse(cls, name: str, **overrides) -> "VariantSpec":
        tokens = name.split("-")
        tensorrt = tokens[0] == "trt"
        tokens = tokens[1:] if tensorrt else tokens
        if len(tokens) < 3 or tokens[0] not in PRECISIONS:
            raise ValueError(f"variant {name!r}: expected <fp32|fp16|int8>[-slices][-method][-activation]-<dyn|bN>-<imgsz>")
        precision, batch_token, size_token = tokens[0], tokens[-2], tokens[-1]
        options: dict = {}
        for token in tokens[1:-2]:
            if token in variants_module.CALIBRATION_METHODS:
                options["method"] = token
            elif token in variants_module.ACTIVATION_TYPES:
                options["activation"] = token
            else:
                options["slices"] = None if token == "all" else tuple(token.split("+"))
        if precision != "int8" and options:
            raise ValueError(f"variant {name!r}: calibration options only apply to int8")
        if tensorrt and precision == "int8":
            options.setdefault("activation", "qint8")
        batch = None if batch_token == "dyn" else int(batch_token.removeprefix("b"))
        return cls(precision=precision, imgsz=int(size_token), batch=batch, tensorrt=tensorrt, **{**options, **overrides})

    def calibration(self) -> CalibrationSet:
        return CalibrationSet(self.calibration_dir or str(EVAL_SET), self.slices, self.per_slice)

    def params(self) -> dict:
        out = {"precision": self.precision, "imgsz": self.imgsz, "batch": self.batch, "tensorrt": self.tensorrt}
        if self.precision == "int8":
            out.update(slices=self.slices, method=self.method, activation=self.activation, per_slice=self.per_slice)
        return out


@dataclass(frozen=True)
class Artifact:
    spec: VariantSpec
    path: Path
    key: str
    built: bool  # False: taken from the cache
    seconds: float

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def tool_versions(tensorrt: bool = False) -> dict:
    versions = {}
    for dist in ("onnx", "onnxruntime", "onnxslim", "numpy", "opencv-python-headless", "pillow"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    # The recipe is code: editing it must invalidate what it built.
    for module in (variants_module, calibration_module):
        versions[module.__name__] = hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()[:16]
    if tensorrt:
        from harness.engines import tensorrt_build  # noqa: PLC0415

        versions.update(tensorrt_build.build_environment())
    return versions


def _file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_key(spec: VariantSpec, source: Path) -> tuple[str, dict]:
    inputs = {
        "source_sha256": _file_digest(source),
        "params": spec.params(),
        "tools": tool_versions(spec.tensorrt),
    }
    if spec.precision == "int8":
        digest = hashlib.sha256()
        for path, slice_name in spec.calibration().select():
            digest.update(slice_name.encode() + b"\0" + path.read_bytes())
        inputs["calibration_sha256"] = digest.hexdigest()
    blob = json.dumps(inputs, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest(), inputs


class ArtifactCache:
    """`build(spec)` returns the cached artifact or builds it. Builds go to a temporary folder inside the
    cache and are renamed into place, so an interrupted build never leaves a half artifact behind."""

    def __init__(self, root: Path | None = None, source: Path | None = None, progress=None):
        self.root = Path(root) if root else paths.cache_dir("artifacts")
        self.root.mkdir(parents=True, exist_ok=True)
        self.source = Path(source) if source else REFERENCE_MODEL
        self.progress = progress  # a rich.progress.Progress, or None for silence

    def _require_source(self):
        if not self.source.exists():
            raise FileNotFoundError(f"reference model {self.source} not found (committed by issue 3 part 2)")

    def folder(self, spec: VariantSpec, key: str) -> Path:
        return self.root / f"{spec.name}-{key[:16]}"

    def build(self, spec: VariantSpec | str) -> Artifact:
        if isinstance(spec, str):
            spec = VariantSpec.parse(spec)
        self._require_source()
        key, inputs = cache_key(spec, self.source)
        folder = self.folder(spec, key)
        artifact_name = "model.plan" if spec.tensorrt else "model.onnx"
        if (folder / "build.json").exists():
            return Artifact(spec, folder / artifact_name, key, built=False, seconds=0.0)
        with paths.one_builder(folder):
            if (folder / "build.json").exists():  # built by the run we waited for
                return Artifact(spec, folder / artifact_name, key, built=False, seconds=0.0)
            return self._build(spec, key, inputs, folder, artifact_name)

    def _build(self, spec: VariantSpec, key: str, inputs: dict, folder: Path, artifact_name: str) -> Artifact:
        started = time.perf_counter()
        task = self.progress.add_task(f"building {spec.name}", total=None) if self.progress else None
        tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=self.root))
        try:
            record = self._build_into(spec, tmp / artifact_name, task)
            seconds = time.perf_counter() - started
            meta = {"variant": spec.name, "key": key, "inputs": inputs, "build_seconds": round(seconds, 2),
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            if record is not None:
                # The accuracy suite reads calibration coverage from here.
                (tmp / "calibration.json").write_text(json.dumps(record, indent=2))
            (tmp / "build.json").write_text(json.dumps(meta, indent=2))
            try:
                os.replace(tmp, folder)
            except OSError:  # another process won the race: its artifact has the same key
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            if task is not None:
                self.progress.update(task, completed=1, total=1, description=f"built {spec.name}")
        return Artifact(spec, folder / artifact_name, key, built=True, seconds=seconds)

    def _build_into(self, spec: VariantSpec, out: Path, task) -> dict | None:
        if spec.tensorrt:
            from harness.engines import tensorrt_build  # noqa: PLC0415

            onnx_spec = replace(spec, tensorrt=False)
            if spec.precision == "fp16":
                onnx_spec = replace(onnx_spec, precision="fp32")  # TensorRT makes fp16 from the FP16 flag
            parent = self.build(onnx_spec)
            batch_range = (1, 1, 1) if spec.batch is not None else tensorrt_build.DEFAULT_BATCH_RANGE
            tensorrt_build.build_plan(parent.path, out, precision=spec.precision, batch=(spec.batch,) * 3 if spec.batch else batch_range,
                                      timing_cache=self.root / "tensorrt.timing-cache")
            return None
        model = variants_module.load_reference(self.source)
        model = variants_module.with_input_shape(model, imgsz=spec.imgsz, batch=spec.batch)
        if spec.precision == "fp32":
            onnx.save(model, str(out))
            return None
        if spec.precision == "fp16":
            onnx.save(variants_module.to_fp16(model), str(out))
            return None
        calibration = spec.calibration()
        if task is not None:
            self.progress.update(task, total=len(calibration.select()) // (spec.batch or 1), completed=0,
                                 description=f"calibrating {spec.name}")
        advance = (lambda n: self.progress.advance(task, n)) if task is not None else None
        return variants_module.to_int8(model, out, calibration, imgsz=spec.imgsz, method=spec.method,
                                       activation=spec.activation, progress=advance)
