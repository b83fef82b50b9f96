"""Which model of a repository the lifecycle suite reloads, what is on disk for it, and which ensembles
depend on it (their traffic runs too: a reload must not break the pipelines that use the model)."""

from __future__ import annotations

from pathlib import Path

from harness.repository.config import CONFIG_NAME, ModelConfig
from harness.repository.sizing import read_configs


class NoTarget(LookupError):
    """No model of the repository can be driven; the message says why, model by model."""


def disk_versions(model_dir: Path) -> list[int]:
    """Numeric version directories, ascending (what Triton's version policy chooses from)."""
    return sorted(int(p.name) for p in Path(model_dir).iterdir() if p.is_dir() and p.name.isdigit())


def is_python_model(config: ModelConfig) -> bool:
    return config.backend == "python"


def serves_two_latest(config: ModelConfig) -> bool:
    return config.version_policy.WhichOneof("policy_choice") == "latest" and \
        config.version_policy.latest.num_versions == 2


def dependent_ensembles(configs: dict[str, ModelConfig | None], model: str) -> list[str]:
    """Ensembles that schedule `model`, directly or through another ensemble."""
    found: list[str] = []
    frontier = [model]
    while frontier:
        step = frontier.pop()
        for name, config in configs.items():
            if config is not None and config.platform == "ensemble" and name not in found and \
                    any(s.model_name == step for s in config.ensemble_scheduling.step):
                found.append(name)
                frontier.append(name)
    return sorted(found)


def models_to_load(configs: dict[str, ModelConfig | None], model: str, dependents: tuple[str, ...]) -> tuple[str, ...]:
    """What the lifecycle server loads: the model, the ensembles built on it and every step they schedule,
    nothing else of the repository (another model's instances would only add start and reload time and, on a
    GPU, memory: the suite never sends them a request)."""
    needed = {model, *dependents}
    frontier = list(dependents)
    while frontier:
        config = configs.get(frontier.pop())
        for step in config.ensemble_scheduling.step if config is not None else ():
            if step.model_name not in needed:
                needed.add(step.model_name)
                frontier.append(step.model_name)
    return tuple(sorted(needed))


def why_not_drivable(name: str, configs: dict[str, ModelConfig | None], repository: Path, manifest=None,
                     unloadable: dict[str, str] | None = None) -> str | None:
    """Why the lifecycle suite cannot reload `name` and send it requests of its own, or None."""
    config = configs.get(name)
    if config is None:
        return "its config.pbtxt does not parse"
    if manifest is not None and manifest.skipped(name):
        return f"{manifest.source} marks it skip"
    if config.platform == "ensemble":
        return "an ensemble (its steps are reloaded; it is driven as their dependent)"
    if unloadable and name in unloadable:
        return unloadable[name]
    if not disk_versions(Path(repository) / name):
        return "no version directory"
    from harness.repository.pipeline import pipeline_step_of

    if fed_by := pipeline_step_of(repository, name, manifest):
        return f"a pipeline step of ensemble {fed_by!r}, fed by its other steps (driven through the ensemble)"
    return None


def choose_model(repository: Path, name: str | None = None, manifest=None,
                 unloadable: dict[str, str] | None = None) -> str:
    """The explicitly named model; else, of the models it can drive (not `skip`, not an ensemble, not
    a step fed by other steps, loadable here), the one with `latest { num_versions: 2 }` (set up for
    side-by-side versions), else the first Python-backend model (fast to reload), else the first.
    NoTarget names each model and why it cannot be driven."""
    repository = Path(repository)
    if name:
        if not (repository / name / CONFIG_NAME).is_file():
            raise LookupError(f"--lifecycle-model {name!r}: no {repository / name / CONFIG_NAME}")
        return name
    configs = read_configs(repository)
    folders = sorted(p.name for p in repository.iterdir() if (p / CONFIG_NAME).is_file())
    reasons = {model: why_not_drivable(model, configs, repository, manifest, unloadable)
               for model in sorted({*folders, *configs})}
    drivable = [model for model, reason in reasons.items() if reason is None]
    for chooser in (serves_two_latest, is_python_model, lambda config: True):
        for model in drivable:
            if chooser(configs[model]):
                return model
    raise NoTarget("not tested, because no model of the repository can be driven: " +
                   "; ".join(f"{model}: {reason}" for model, reason in reasons.items()) +
                   " (name one with --lifecycle-model)")
