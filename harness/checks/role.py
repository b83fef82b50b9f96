"""Role: which part a model plays for the suites, read from its config or declared by the owner
(harness.repository.manifest). raw: [N, 3, H, W] FP32 images in, [N, 4 + nc, anchors] out; e2e: encoded
images (TYPE_STRING) in, detections [max_det, 6] out. A model nobody can place is "not tested,
because…" (never passed); a pipeline step is tested through its ensemble; a declaration the config
contradicts fails, naming the contradiction, as does an imgsz or nc the config disagrees with."""

from __future__ import annotations

from harness.accuracy.served import E2E, RAW, model_kind
from harness.checks.findings import Finding, NotApplicable
from harness.checks.model import ModelEntry, list_models, load_entry
from harness.repository.config import CONFIG_NAME

CHECK = "role"
UNKNOWN = ("not tested, because its layout is neither raw ([N, 3, H, W] FP32 in, [N, 4 + nc, anchors] out) "
           "nor end-to-end (TYPE_STRING images in, a [max_det, 6] `detections` output): declare it with "
           "--model {name}=raw|e2e|skip or in a manifest (yts.toml)")


def _contract_problem(config, role: str) -> str | None:
    """Why the config cannot be a model of `role`, or None."""
    from tritonclient.grpc import model_config_pb2 as pb  # noqa: PLC0415

    if not config.input or not config.output:
        return "it declares no inputs or no outputs"
    first = config.input[0]
    if role == RAW:
        if first.data_type not in (pb.TYPE_FP32, pb.TYPE_FP16) or len(first.dims) < 3 or first.dims[-3] not in (3, -1):
            return f"input {first.name!r} is {pb.DataType.Name(first.data_type)} {list(first.dims)}, not FP32 [3, H, W]"
        if len(config.output[0].dims) < 2:
            return f"output {config.output[0].name!r} {list(config.output[0].dims)} is not [4 + nc, anchors]"
    if role == E2E:
        if first.data_type != pb.TYPE_STRING:
            return f"input {first.name!r} is {pb.DataType.Name(first.data_type)}, not TYPE_STRING encoded images"
        if not any(len(o.dims) >= 2 and o.dims[-1] == 6 for o in config.output):
            return f"no output has rows of 6 (x1, y1, x2, y2, score, class): {[(o.name, list(o.dims)) for o in config.output]}"
    return None


def _size_problems(config, manifest) -> list[str]:
    if not config.output or len(config.output[0].dims) < 2:
        return [f"nc = {manifest.nc} is declared, but there is no [4 + nc, anchors] output: "
                f"{[(o.name, list(o.dims)) for o in config.output]}"] if manifest.nc else []
    first, out = config.input[0], config.output[0]
    problems = []
    spatial = [d for d in first.dims[-2:] if d > 0]
    if manifest.imgsz and spatial and spatial != [manifest.imgsz] * len(spatial):
        problems.append(f"input {first.name!r} dims {list(first.dims)}, but imgsz is declared {manifest.imgsz}")
    if manifest.nc and out.dims[-2] > 0 and out.dims[-2] != 4 + manifest.nc:
        problems.append(f"output {out.name!r} dims {list(out.dims)}: {out.dims[-2]} rows, but nc = {manifest.nc} "
                        f"means 4 + {manifest.nc} = {4 + manifest.nc}")
    return problems


def ensemble_steps(repository) -> dict[str, list[str]]:
    """Step model name -> the ensembles of the repository that schedule it."""
    steps: dict[str, list[str]] = {}
    for name in list_models(repository):
        config = load_entry(repository, name).config
        if config is not None and config.platform == "ensemble":
            for step in config.ensemble_scheduling.step:
                steps.setdefault(step.model_name, []).append(name)
    return steps


def check_role(entry: ModelEntry, manifest, ensembles: dict[str, list[str]]) -> list[Finding]:
    """`ensembles`: step model name -> the ensembles that schedule it."""
    config = entry.config
    if config is None:
        raise NotApplicable("config.pbtxt does not parse (the schema check reports it)")
    declared, found = manifest.role(entry.name), model_kind(config)
    if declared == "skip":
        raise NotApplicable(f"not tested, because {manifest.source} marks {entry.name} skip")
    file = f"{entry.name}/{CONFIG_NAME}"
    if declared:
        problem = _contract_problem(config, declared)
        if problem or (found and found != declared):
            reason = problem or f"its config reads as {found}"
            return [Finding(CHECK, entry.name, file, f"declared {declared} ({manifest.source}), but {reason}")]
    role = declared or found
    if role is None:
        if entry.name in ensembles:
            raise NotApplicable(f"a step of {ensembles[entry.name]}: tested through the ensemble")
        raise NotApplicable(UNKNOWN.format(name=entry.name))
    if role == RAW:
        return [Finding(CHECK, entry.name, file, problem) for problem in _size_problems(config, manifest)]
    return []
