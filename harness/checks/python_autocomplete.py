"""What a Python-backend model's `auto_complete_config` adds to its config, found by running it.

Triton's Python backend calls `TritonPythonModel.auto_complete_config(config)` at load (unless the
server disables auto-complete) with `pb_utils.ModelConfig`; what the model adds there (inputs,
outputs, max_batch_size, dynamic batching) is part of the config Triton validates, and a contradiction
with config.pbtxt refuses the model ("configuration specified max_batch_size 6, but in
auto-complete-config function ... specified max_batch_size 4"). The function is run here in a child
process, against the `triton_python_backend_utils` module that ships with the embedded server (the
same class the stub hands the model), so its answers and its refusals are Triton's own.

Only a model.py that defines `auto_complete_config` is run; one whose imports are not installed here
(torch on a CPU box, say) is reported as not completed offline, not as wrong."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from google.protobuf import json_format

from harness.repository.config import ModelConfig

TIMEOUT_S = 60
# Keys whose int64 values protobuf's JSON writes as strings; Triton's own JSON writes numbers.
INT_LISTS = ("dims", "shape", "preferred_batch_size")

_RUNNER = r"""
import importlib.util, json, sys
backend_dir, model_py, config_json = sys.argv[1], sys.argv[2], sys.stdin.read()
sys.path.insert(0, backend_dir)
import triton_python_backend_utils as pb_utils
spec = importlib.util.spec_from_file_location("yts_autocomplete_model", model_py)
try:
    module = importlib.util.module_from_spec(spec)
    sys.modules["yts_autocomplete_model"] = module
    spec.loader.exec_module(module)
except BaseException as error:
    print(json.dumps({"unrunnable": f"{type(error).__name__}: {error}"})); sys.exit(0)
config = pb_utils.ModelConfig(config_json)
name = config.as_dict()["name"]
try:
    result = module.TritonPythonModel.auto_complete_config(config)
except ValueError as error:
    print(json.dumps({"error": str(error)})); sys.exit(0)
except BaseException as error:
    print(json.dumps({"unrunnable": f"{type(error).__name__}: {error}"})); sys.exit(0)
if not isinstance(result, pb_utils.ModelConfig):
    print(json.dumps({"error": f"auto_complete_config function in model '{name}' must return a valid "
                               "pb.ModelConfig object."})); sys.exit(0)
print(json.dumps({"config": result.as_dict()}))
"""


def defines_auto_complete(model_py: Path) -> bool:
    try:
        tree = ast.parse(model_py.read_text(), str(model_py))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == "auto_complete_config" for node in ast.walk(tree))


def complete_python(config: ModelConfig, version: Path | None, completion) -> None:
    model_py = version / (config.default_model_filename or "model.py") if version is not None else None
    if model_py is None or not model_py.is_file() or not defines_auto_complete(model_py):
        return
    backend_dir = _backend_dir()
    if backend_dir is None:
        completion.notes.append("auto_complete_config not run: triton_python_backend_utils is not installed here")
        return
    answer = _run(str(backend_dir), str(model_py), model_py.stat().st_mtime_ns, json.dumps(triton_json(config)))
    if "unrunnable" in answer:
        completion.notes.append(f"{model_py.name}'s auto_complete_config could not run here ({answer['unrunnable']}); "
                                "its additions are not judged offline")
    elif "error" in answer:
        completion.errors.append(answer["error"])
    else:
        _merge(config, answer["config"], completion.filled)


@lru_cache(maxsize=256)
def _run(backend_dir: str, model_py: str, mtime_ns: int, config_json: str) -> dict:
    """The model's answer, once per model file version and config: every check of a run loads the same
    entries again (roles, ensembles, live), and each answer is a child interpreter."""
    try:
        run = subprocess.run([sys.executable, "-c", _RUNNER, backend_dir, model_py], input=config_json,
                             capture_output=True, text=True, timeout=TIMEOUT_S, cwd=str(Path(model_py).parent))
    except subprocess.TimeoutExpired:
        return {"unrunnable": f"did not return within {TIMEOUT_S} s"}
    try:
        answer = json.loads(run.stdout.strip().splitlines()[-1]) if run.stdout.strip() else {}
    except json.JSONDecodeError:
        answer = {}
    return answer or {"unrunnable": (run.stderr.strip().splitlines() or ["no answer"])[-1]}


def triton_json(config: ModelConfig) -> dict:
    """The config as Triton hands it to the stub: proto field names, enum names, numbers as numbers,
    and the lists the model may append to present even when empty."""
    payload = json_format.MessageToDict(config, preserving_proto_field_name=True)
    _numbers(payload)
    payload.setdefault("name", config.name)
    payload.setdefault("max_batch_size", 0)
    payload.setdefault("input", [])
    payload.setdefault("output", [])
    return payload


def _numbers(value) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in INT_LISTS and isinstance(item, list):
                value[key] = [int(v) for v in item]
            else:
                _numbers(item)
    elif isinstance(value, list):
        for item in value:
            _numbers(item)


def _merge(config: ModelConfig, completed: dict, filled: dict) -> None:
    before = {t.name for t in config.input}, {t.name for t in config.output}, config.max_batch_size
    result = json_format.ParseDict(completed, ModelConfig(), ignore_unknown_fields=True)
    config.CopyFrom(result)
    added_in = [t.name for t in config.input if t.name not in before[0]]
    added_out = [t.name for t in config.output if t.name not in before[1]]
    if added_in:
        filled["input"] = added_in
    if added_out:
        filled["output"] = added_out
    if config.max_batch_size != before[2]:
        filled["max_batch_size"] = config.max_batch_size
    if "dynamic_batching" in completed:
        filled.setdefault("dynamic_batching", completed["dynamic_batching"])


def _backend_dir() -> Path | None:
    """The Python backend folder of the embedded server's files (nvidia-pytriton)."""
    from harness.servers.serverfiles import ServerFilesMissing, locate

    try:
        directory = locate().root / "backends" / "python"
    except ServerFilesMissing:
        return None
    return directory if (directory / "triton_python_backend_utils.py").is_file() else None
