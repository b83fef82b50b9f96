"""Layout: version directories, model filenames, config name, stray files and symlinks as Triton reads them."""

from harness.availability import engine_absent_here
from harness.checks.layout import check_layout


def test_layout(pytestconfig, entry, judge):
    judge(lambda e: engine_absent_here(pytestconfig, e, check_layout(e)), entry)
