"""Role: whether the suites can tell what each model is (raw detector, end-to-end detector), from its
config or the owner's manifest, and whether declarations agree with the config."""

from harness.checks.model import load_entry
from harness.checks.role import check_role


def _ensembles(repository) -> dict[str, list[str]]:
    from harness.checks import list_models

    steps: dict[str, list[str]] = {}
    for name in list_models(repository):
        config = load_entry(repository, name).config
        if config is not None and config.platform == "ensemble":
            for step in config.ensemble_scheduling.step:
                steps.setdefault(step.model_name, []).append(name)
    return steps


def test_role(entry, judge, manifest, repository_source):
    judge(check_role, entry, manifest, _ensembles(repository_source))
