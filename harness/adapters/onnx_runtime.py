"""The ONNX Runtime adapter: on a server without Triton's onnxruntime backend (the embedded one), an
onnxruntime_onnx model of the repository under test becomes, on the scratch copy only, a Python-backend
model that runs its own ONNX file with ONNX Runtime (harness/adapters/onnx_model.py, copied into every
version folder). Its config is the one Triton would complete (harness.checks.model.completed_config) with
only the backend changed: name, tensors (names, dtypes, dims), max_batch_size, dynamic_batching, version
policy and every version folder kept, instance groups kept by count on CPU (ONNX Runtime's CPU
execution provider). A model Triton's onnxruntime backend would refuse — the config suite's bindings
check of its ONNX file against the config has findings — is not adapted: its checks are not tested,
citing that finding. Every check of an adapted model says so (NOTE): the backend itself is not exercised.
A tensorrt_plan model is adapted only when the user names the ONNX it was built from (`--onnx-for`): served
from that file, at its precision, and labelled so."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from harness.repository.config import CONFIG_NAME, ConfigError, ModelConfig, write_config
from harness.verdicts import SERVED_BY_ADAPTER

BACKEND = "onnxruntime"
NOTE = SERVED_BY_ADAPTER
MODEL_PY = Path(__file__).with_name("onnx_model.py")
FILENAME_PARAMETER = "onnx_model_filename"  # read by onnx_model.py: the ONNX file of each version folder
REFUSED = "Triton's onnxruntime backend would refuse it"
PLAN_BACKEND = "tensorrt"


@dataclass
class Plan:
    """What the adapter does to a repository: the models it serves (model -> the label every check of it
    carries), those it will not (model -> why: the bindings finding Triton's backend would refuse it for),
    and the ONNX file the user named for a TensorRT plan (`--onnx-for MODEL=FILE`)."""

    served: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    onnx_for: dict[str, Path] = field(default_factory=dict)


def plan(repository: Path, backends: set[str] | None, onnx_for: dict[str, Path] | None = None) -> Plan:
    """For a server whose backends are known and lack onnxruntime: every onnxruntime_onnx model of
    `repository` (as Triton completes its config), served unless the bindings check has findings; and a
    tensorrt_plan model the server cannot run, when `onnx_for` names the ONNX it was built from, served
    from that file at its precision unless the file's signature disagrees with the config."""
    from harness.checks.bindings import check_bindings, compare_signature, read_model_signature
    from harness.checks.findings import NotApplicable
    from harness.checks.model import load_entry
    from harness.reference.loadable import required_backend

    found = Plan()
    if backends is None or BACKEND in backends:
        return found
    for directory in sorted(p for p in Path(repository).iterdir() if (p / CONFIG_NAME).is_file()):
        entry = load_entry(directory.parent, directory.name)
        try:
            backend = required_backend(entry.config) if entry.config is not None else None
            if backend == BACKEND:
                findings, label, refusal = check_bindings(entry), NOTE, REFUSED
            elif entry.name in (onnx_for or {}) and backend == PLAN_BACKEND and PLAN_BACKEND not in backends:
                source = Path(onnx_for[entry.name])
                findings = compare_signature(entry.config, read_model_signature(source), entry.name, str(source))
                label, refusal = plan_label(source), f"the ONNX --onnx-for names ({source}) does not fit its config"
                found.onnx_for[entry.name] = source
            else:
                continue
        except ConfigError:
            continue
        except NotApplicable as reason:  # no ONNX file where Triton looks, a config it cannot complete
            found.refused[entry.name] = f"{REFUSED}: {reason}"
            continue
        if findings:
            more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
            found.refused[entry.name] = f"{refusal}: {findings[0]}{more}"
        else:
            found.served[entry.name] = label
    return found


def plan_label(source: Path) -> str:
    return (f"served through the ONNX Runtime adapter from {source} (the ONNX its plan was built from, at that "
            "ONNX's precision); Triton's tensorrt backend and the plan itself not exercised")


def adapted_config(completed: ModelConfig, onnx_filename: str) -> ModelConfig:
    """The Python-backend config serving `completed` (the config Triton would load) through onnx_model.py."""
    config = ModelConfig()
    config.CopyFrom(completed)
    config.platform, config.backend = "", "python"
    config.ClearField("default_model_filename")
    config.ClearField("cc_model_filenames")
    config.optimization.ClearField("execution_accelerators")  # ONNX Runtime's, which the adapter does not use
    if not config.optimization.ListFields():
        config.ClearField("optimization")
    for group in config.instance_group:
        group.kind = group.KIND_CPU
        group.ClearField("gpus")
    config.parameters[FILENAME_PARAMETER].string_value = onnx_filename
    return config


def adapt(repository: Path, found: Plan) -> list[str]:
    """Rewrite each model `found` serves in `repository` (a scratch copy, never the user's) to be served
    through the adapter (a plan's versions get the ONNX the user named, as model.onnx); a model already
    adapted is left as it is. Returns the models rewritten."""
    from harness.checks.model import completed_config, load_entry

    rewritten = []
    for name in found.served:
        directory = Path(repository) / name
        if is_adapted(directory):
            continue
        filename = "model.onnx" if name in found.onnx_for else load_entry(Path(repository), name).model_filename or "model.onnx"
        write_config(directory, adapted_config(completed_config(directory), filename))
        for version in (p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()):
            shutil.copyfile(MODEL_PY, version / "model.py")
            if name in found.onnx_for:
                shutil.copyfile(found.onnx_for[name], version / filename)
        rewritten.append(name)
    return rewritten


def is_adapted(model_dir: Path) -> bool:
    from harness.repository.config import read_config

    try:
        return FILENAME_PARAMETER in read_config(model_dir).parameters
    except (ConfigError, OSError):
        return False
