"""Role: whether the suites can tell what each model is (raw detector, end-to-end detector), from its
config or the owner's manifest, and whether declarations agree with the config."""

import pytest

from harness.checks.role import check_role, ensemble_steps


@pytest.fixture(scope="module")
def ensembles(repository_source):
    return ensemble_steps(repository_source)


def test_role(entry, judge, manifest, ensembles):
    judge(check_role, entry, manifest, ensembles)
