"""A TensorRT plan against the server that will load it, before the load: plans are bound to the
TensorRT version and the GPU architecture they were built with, and a plan copied between machines
fails only at load, with TensorRT's "Serialization assertion ... Version tag does not match" deep in
the server log. The plan's facts come from its sidecar (`model.json` beside `model.plan`, written by
harness.engines.tensorrt_build); the serving host's from its driver (nvidia-smi) and TensorRT, or from
YTS_COMPUTE_CAPABILITY / YTS_TENSORRT_VERSION when the suite judges a repository for another host."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

SERIALIZATION_ERROR = "Serialization assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match"


@lru_cache(maxsize=1)
def serving_host() -> tuple[str | None, str | None]:
    """(GPU compute capability, TensorRT version) of the host that will serve; None where unknown."""
    capability = os.environ.get("YTS_COMPUTE_CAPABILITY")
    if capability is None:
        from harness.engines.tensorrt_build import gpu_identity

        capability = gpu_identity().get("compute_capability")
    version = os.environ.get("YTS_TENSORRT_VERSION")
    if version is None:
        try:
            from harness.engines.tensorrt_runtime import import_tensorrt

            version = import_tensorrt().__version__
        except Exception:  # no TensorRT here: the version is not judged
            version = None
    return capability, version


def plan_problems(plan: Path, capability: str | None, tensorrt_version: str | None) -> tuple[list[str], str | None]:
    """(problems, why not judged): what keeps the serving host from loading the plan."""
    sidecar = plan.with_suffix(".json")
    if not sidecar.is_file():
        return [], f"no {sidecar.name} beside {plan.name} records the TensorRT version and GPU it was built for"
    try:
        built = json.loads(sidecar.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return [f"{sidecar.name} does not parse as JSON ({error})"], None
    problems, unjudged = [], []
    built_cc, built_trt = built.get("compute_capability"), built.get("tensorrt_version")
    gpu = f" ({built['gpu_name']})" if built.get("gpu_name") else ""
    if capability is None or built_cc is None:
        unjudged.append("the GPU architecture (" + ("no GPU on this host" if capability is None else
                                                    f"{sidecar.name} names none") + ")")
    elif str(built_cc) != str(capability) and not built.get("hardware_compatible"):
        problems.append(f"{plan.name} was built for sm_{built_cc}{gpu}; the serving GPU is sm_{capability}: TensorRT "
                        f"cannot load it there (Triton: \"{SERIALIZATION_ERROR}\"); rebuild the plan on the serving "
                        "GPU, or build it hardware-compatible")
    if tensorrt_version is None or built_trt is None:
        unjudged.append("the TensorRT version (" + ("no TensorRT here: set YTS_TENSORRT_VERSION to the server's"
                                                    if tensorrt_version is None else f"{sidecar.name} names none") + ")")
    elif _major_minor(built_trt) != _major_minor(tensorrt_version) and not (
            built.get("version_compatible") and _major_minor(tensorrt_version) >= _major_minor(built_trt)):
        problems.append(f"{plan.name} was built with TensorRT {built_trt}; the server runs TensorRT {tensorrt_version}: "
                        f"it refuses the plan (Triton: \"{SERIALIZATION_ERROR}\"); rebuild it with the server's "
                        "TensorRT, or build it version-compatible with an older one")
    return problems, ("; ".join(unjudged) or None)


def _major_minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(version).split(".")[:2] if part.isdigit())
