"""Which model of a repository the lifecycle suite reloads, and what is on disk for it."""

from __future__ import annotations

from pathlib import Path

from harness.repository.config import ModelConfig, read_config


def disk_versions(model_dir: Path) -> list[int]:
    """Numeric version directories, ascending (what Triton's version policy chooses from)."""
    return sorted(int(p.name) for p in Path(model_dir).iterdir() if p.is_dir() and p.name.isdigit())


def is_python_model(config: ModelConfig) -> bool:
    return config.backend == "python"


def serves_two_latest(config: ModelConfig) -> bool:
    return config.version_policy.WhichOneof("policy_choice") == "latest" and \
        config.version_policy.latest.num_versions == 2


def choose_model(repository: Path, name: str | None = None) -> str:
    """The explicitly named model; else the one with `latest { num_versions: 2 }` (it was set up for
    side-by-side versions); else the first Python-backend model (fast to reload on a CPU server)."""
    repository = Path(repository)
    if name:
        if not (repository / name / "config.pbtxt").is_file():
            raise LookupError(f"--lifecycle-model {name!r}: no {repository / name / 'config.pbtxt'}")
        return name
    configs = {}
    for model_dir in sorted(p for p in repository.iterdir() if (p / "config.pbtxt").is_file()):
        config = read_config(model_dir)
        if config.platform == "ensemble" or not disk_versions(model_dir):
            continue
        configs[model_dir.name] = config
    for chooser in (serves_two_latest, is_python_model):
        for model, config in configs.items():
            if chooser(config):
                return model
    raise LookupError(f"{repository}: no model with version policy latest{{2}} and no Python-backend model; "
                      "name one with --lifecycle-model")
