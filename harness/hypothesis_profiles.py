"""Named hypothesis settings profiles, chosen by $YTS_HYPOTHESIS_PROFILE (default "ci").

"ci": derandomized (the same examples on every run, so a red build is reproducible and never flaky),
no example database (nothing written into the checkout), few examples so the local properties stay
under a minute on two cores. "deep": many random examples for a night run, with the failure database
kept in the harness cache (outside the repository) so found counter-examples are replayed first.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ENV_VAR = "YTS_HYPOTHESIS_PROFILE"
DEFAULT = "ci"
# Drawing an 8K frame is slow by hypothesis' standards; that is the point of the size strategies.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def register_profiles() -> None:
    from harness.paths import cache_dir

    settings.register_profile(
        "ci", derandomize=True, database=None, max_examples=25, deadline=None,
        suppress_health_check=_SLOW_OK, print_blob=True,
    )
    settings.register_profile(
        "deep", derandomize=False, max_examples=2000, deadline=None, suppress_health_check=_SLOW_OK,
        database=DirectoryBasedExampleDatabase(str(cache_dir("hypothesis"))), print_blob=True,
    )


def load_profile(name: str | None = None) -> str:
    """Register the profiles and load `name`, else $YTS_HYPOTHESIS_PROFILE, else "ci"."""
    register_profiles()
    name = name or os.environ.get(ENV_VAR, DEFAULT)
    try:
        settings.load_profile(name)
    except Exception as error:  # hypothesis raises InvalidArgument with a terse text
        raise ValueError(f"${ENV_VAR}={name!r} is not a profile; choose 'ci' or 'deep'") from error
    return name
