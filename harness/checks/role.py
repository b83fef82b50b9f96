"""Role: which part a model plays for the suites, read from its layout (harness.repository.layouts: all
its inputs and outputs, with what the owner declared in [layout.NAME]) or declared by the owner
(harness.repository.manifest [models]). raw: FP32/FP16 [N, 3, H, W] tensors in, [N, 4 + nc, anchors] out;
e2e: images in any form (tensors, encoded or base64 bytes, UINT8 pixels) and detections out in any layout
(rows [max_det, 6], NMS-inside outputs, declared JSON). A model nobody can place is "not tested,
because…" with the yts.toml lines that would place it (never passed); a pipeline step is tested through
its ensemble; a declaration the config contradicts fails, naming the contradiction, as does an imgsz or
nc the config disagrees with. A segmentation head (prototypes beside the detections) passes as what its
detections are, with a NotTestedWarning saying its masks are not tested."""

from __future__ import annotations

import warnings

from harness.checks.findings import Finding, NotApplicable, NotTestedWarning
from harness.checks.model import ModelEntry, list_models, load_entry
from harness.repository.config import CONFIG_NAME
from harness.repository.layouts import RAW, ROLE_RAW, Layout, read_layout

CHECK = "role"
UNKNOWN = ("not tested, because its layout is neither raw ([N, 3, H, W] FP32 in, [N, 4 + nc, anchors] out) "
           "nor end-to-end (images in, detections out): {why}. Declare it with --model {name}=raw|e2e|skip, or "
           "say what its config cannot in a manifest (yts.toml): {declare}")


def _size_problems(layout: Layout, manifest) -> list[str]:
    if layout.output is not None and layout.output.kind == RAW:
        out = layout.output.ports[0]
    else:  # declared raw, outputs not read: the first, as the raw client takes it
        out = next((p for p in layout.outputs[:1] if len(p.dims) >= 2), None)
    if out is None:
        return [f"nc = {manifest.nc} is declared, but there is no [4 + nc, anchors] output: "
                f"{[(p.name, list(p.dims)) for p in layout.outputs]}"] if manifest.nc else []
    image = layout.input.port if layout.input is not None else layout.inputs[0]
    dims = out.dims[-2:]
    problems = []
    spatial = [d for d in image.dims[-2:] if d > 0]
    if manifest.imgsz and spatial and spatial != [manifest.imgsz] * len(spatial):
        problems.append(f"input {image.name!r} dims {list(image.dims)}, but imgsz is declared {manifest.imgsz}")
    masks = layout.output.masks if layout.output is not None else 0
    if manifest.nc and dims[0] > 0 and dims[0] != 4 + manifest.nc + masks:
        extra = f" + {masks} mask coefficients" if masks else ""
        problems.append(f"output {out.name!r} dims {list(out.dims)}: {dims[0]} rows, but nc = {manifest.nc} "
                        f"means 4 + {manifest.nc}{extra} = {4 + manifest.nc + masks}")
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
    declared = manifest.role(entry.name)
    if declared == "skip":
        raise NotApplicable(f"not tested, because {manifest.source} marks {entry.name} skip")
    layout = read_layout(config, manifest.layout(entry.name), entry.name)
    found = layout.role
    file = f"{entry.name}/{CONFIG_NAME}"
    if declared:
        problem = layout.contradicts(declared)
        if problem or (found and found != declared):
            reason = problem or f"its config reads as {found}: {layout.describe()}"
            return [Finding(CHECK, entry.name, file, f"declared {declared} ({manifest.source}), but {reason}")]
    role = declared or found
    if role is not None and layout.output is not None and layout.output.untested:
        warnings.warn(NotTestedWarning(f"{entry.name}: {layout.output.untested}"), stacklevel=2)
    if role is None:
        if entry.name in ensembles:
            raise NotApplicable(f"a step of {ensembles[entry.name]}: tested through the ensemble")
        if layout.unfilled:
            raise NotApplicable(f"not tested, because {layout.why_no_role()}; declare them: {layout.what_to_declare()}")
        raise NotApplicable(UNKNOWN.format(name=entry.name, why=layout.why_no_role(), declare=layout.what_to_declare()))
    if role == ROLE_RAW:
        return [Finding(CHECK, entry.name, file, problem) for problem in _size_problems(layout, manifest)]
    return []
