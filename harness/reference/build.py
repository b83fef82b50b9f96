"""Writes the reference repository for this machine (CPU or GPU) into the cache, from the cached model
artifacts and the model folders in reference_repo/. Content-addressed: the folder name is a hash of
everything that goes in (artifact keys, model.py sources, vendored harness modules, the configs), so a
second call is a lookup and an edit anywhere rebuilds.

Container servers have no harness package: every Python model gets the few harness modules it imports
copied into its version folder (the stub appends that folder to sys.path, after site-packages, so the
process server keeps using the installed harness and the container uses the copy)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from harness import hostinfo, paths
from harness.accuracy.coverage import SIDECAR
from harness.engines.artifacts import REFERENCE_MODEL, ArtifactCache, VariantSpec
from harness.reference import configs
from harness.reference.configs import Target
from harness.repository.config import read_config
from harness.repository.writer import write_model

SOURCES = paths.REFERENCE_REPO_SOURCES
# What a served model.py imports from harness (and what those import): vendored for the container.
VENDORED = (
    "harness/__init__.py",
    "harness/vision/__init__.py", "harness/vision/boxes.py", "harness/vision/decode.py", "harness/vision/image.py",
    "harness/vision/letterbox.py", "harness/vision/nms.py", "harness/vision/pipeline.py", "harness/vision/stages.py",
    "harness/vision/gpu/__init__.py", "harness/vision/gpu/decode.py", "harness/vision/gpu/image.py",
    "harness/vision/gpu/letterbox.py", "harness/vision/gpu/pipeline.py",
    "harness/engines/__init__.py", "harness/engines/base.py", "harness/engines/signature.py",
    "harness/engines/onnx_signature.py", "harness/engines/ort.py", "harness/engines/torch_engine.py",
    "harness/reference/__init__.py", "harness/reference/serving.py",
)
MANIFEST = "reference.json"


def source_model() -> Path:
    """The committed reference model; before it lands, $YTS_DEV_MODEL (any ultralytics YOLOv8 export)."""
    if REFERENCE_MODEL.exists():
        return REFERENCE_MODEL
    if os.environ.get("YTS_DEV_MODEL"):
        return Path(os.environ["YTS_DEV_MODEL"])
    raise FileNotFoundError(f"reference model {REFERENCE_MODEL} not committed yet and $YTS_DEV_MODEL not set")


def model_classes(onnx_path: Path, imgsz: int) -> int:
    """nc from the model's output [N, 4+nc, anchors]; the anchor count must be the one imgsz gives."""
    from harness.engines import read_signature

    (output,) = read_signature(onnx_path).outputs
    expected = Target(imgsz=imgsz).anchors
    if len(output.shape) != 3 or output.shape[2] not in (-1, expected):
        raise ValueError(f"{onnx_path}: output {output.name} {output.shape}, expected [N, 4+nc, {expected}] at imgsz {imgsz}")
    return output.shape[1] - 4


def configs_for(target: Target, onnx_versions: dict[int, str] = configs.ONNX_VERSIONS, plan_max_batch: int | None = None) -> dict:
    """Every ModelConfig the build writes for this target, by model name."""
    out = {name: build(target) for name, build in {**configs.PYTHON_MODELS, **configs.ENSEMBLES}.items()}
    out["yolo_onnx"] = configs.yolo_onnx(target, onnx_versions)
    if plan_max_batch is not None:
        out["yolo_trt"] = configs.yolo_trt(target, plan_max_batch)
    return out


def _digest(paths_: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths_:
        digest.update(str(path.relative_to(paths.PROJECT_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _code_files() -> list[Path]:
    own = sorted(Path(__file__).parent.glob("*.py"))
    models = sorted(p for p in SOURCES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return own + models + [paths.PROJECT_ROOT / v for v in VENDORED]


def _vendor(staging: Path) -> Path:
    """The VENDORED modules as a `harness` package tree, ready to copy into a version folder."""
    for rel in VENDORED:
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(paths.PROJECT_ROOT / rel, target)
    return staging / "harness"


@functools.cache
def _gpu_sizing(target: Target, onnx_path: Path):
    """Instances for this card (harness.reference.gpu_sizing), from one instance's measured cost; once per
    process, so a later lookup while a server holds memory finds the same build."""
    from harness.reference import gpu_sizing

    cost = gpu_sizing.measure(onnx_path, target.imgsz, target.graph_batch_sizes, target.max_batch_size)
    name, total, used = gpu_sizing.card()
    return gpu_sizing.size(total, used, cost, name)


def _plan(cache: ArtifactCache, imgsz: int):
    """A TensorRT plan for the GPU build, when this machine can build one (or has one cached)."""
    from harness.engines.base import EngineUnavailable

    try:
        return cache.build(VariantSpec("fp16", imgsz=imgsz, tensorrt=True)), None
    except (EngineUnavailable, ImportError, RuntimeError) as error:
        return None, f"{type(error).__name__}: {error}"


def build_reference_repository(device: str = "cpu", imgsz: int = 640, *,
                               precisions: tuple[str, ...] = ("fp32", "fp16", "int8"),
                               cache: ArtifactCache | None = None, root: Path | None = None) -> Path:
    """The reference repository for `device` ("cpu" | "gpu") at `imgsz`: returns its models folder."""
    Target(device=device, imgsz=imgsz)  # validate before any build
    cache = cache or ArtifactCache(source=source_model())
    fp32 = cache.build(VariantSpec("fp32", imgsz=imgsz))
    target = Target(device=device, imgsz=imgsz, nc=model_classes(fp32.path, imgsz))
    sizing = _gpu_sizing(target, fp32.path) if target.gpu and hostinfo.has_gpu() else None
    if sizing is not None:  # (a GPU build written on a host without one keeps the defaults: configs to read, not serve)
        target = dataclasses.replace(target, gpu_instances=sizing.raw_instances, e2e_gpu_instances=sizing.e2e_instances)
    onnx = {v: cache.build(VariantSpec(p, imgsz=imgsz)) for v, p in configs.ONNX_VERSIONS.items() if p in precisions}
    plan, plan_skipped = _plan(cache, imgsz) if target.gpu else (None, "CPU build: no TensorRT plan")
    plan_max = None
    if plan is not None:
        from harness.engines import read_signature

        profiles = read_signature(plan.path).profiles
        plan_max = profiles[0].max[0] if profiles else 1
    all_configs = configs_for(target, {v: configs.ONNX_VERSIONS[v] for v in onnx}, plan_max)

    record = {
        "target": vars(target) | {"anchors": target.anchors},
        "artifacts": {"raw": fp32.key, **{f"onnx_v{v}": a.key for v, a in onnx.items()}, "plan": plan.key if plan else None},
        "plan_skipped": plan_skipped,
        "gpu_sizing": sizing.record() if sizing else None,
        "code": _digest(_code_files()),
        "configs": {n: str(c) for n, c in all_configs.items()},
    }
    key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    parent = Path(root) if root else paths.cache_dir("reference")
    folder = parent / f"{device}-{imgsz}-{key[:16]}"
    if (folder / MANIFEST).exists():
        return folder / "models"

    tmp = Path(tempfile.mkdtemp(prefix=f".{device}-{imgsz}-", dir=parent))
    try:
        models = tmp / "models"
        vendored = _vendor(tmp / "vendored")
        for name in configs.PYTHON_MODELS:
            files = {"model.py": SOURCES / name / "model.py", "harness": vendored}
            if name in ("yolo_raw", "yolo_e2e"):
                files["model.onnx"] = fp32.path
            write_model(models, all_configs[name], {1: files})
        write_model(models, all_configs["yolo_ensemble"], {1: {}})
        write_model(models, all_configs["yolo_onnx"], {v: _with_calibration(a.path) for v, a in onnx.items()})
        if plan is not None:
            write_model(models, all_configs["yolo_trt"], {1: {"model.plan": plan.path}})
        shutil.rmtree(vendored.parent)
        (tmp / MANIFEST).write_text(json.dumps(record | {"key": key}, indent=2))
        try:
            os.replace(tmp, folder)
        except OSError:  # a concurrent build won: same key, same content
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder / "models"


def _with_calibration(onnx: Path) -> dict[str, Path]:
    """A version folder's files: the ONNX artifact, and its calibration record where it has one (the INT8
    version: the accuracy suite's coverage check reads it beside the served file)."""
    sidecar = onnx.parent / SIDECAR
    return {"model.onnx": onnx, **({SIDECAR: sidecar} if sidecar.is_file() else {})}


def manifest(repository: Path) -> dict:
    """What the build recorded beside a repository it wrote."""
    return json.loads((Path(repository).parent / MANIFEST).read_text())


COMMITTED_TARGET = Target(device="cpu", imgsz=640, nc=6)  # the reference model: 6 shape classes


def committed_target_configs() -> dict:
    """What reference_repo/*/config.pbtxt hold: the CPU build at 640 for the 6-class model, and
    yolo_trt as the GPU build writes it with the default plan profile."""
    out = configs_for(COMMITTED_TARGET)
    out["yolo_trt"] = configs.yolo_trt(Target(device="gpu", imgsz=COMMITTED_TARGET.imgsz, nc=COMMITTED_TARGET.nc))
    return out


def write_committed_configs() -> list[Path]:
    """Regenerate reference_repo/*/config.pbtxt (after changing configs.py)."""
    from harness.repository.config import write_config

    return [write_config(SOURCES / name, config) for name, config in committed_target_configs().items()]


def committed_configs() -> dict:
    """The config.pbtxt files committed in reference_repo/, by model name."""
    return {d.name: read_config(d) for d in sorted(SOURCES.iterdir()) if (d / "config.pbtxt").is_file()}
