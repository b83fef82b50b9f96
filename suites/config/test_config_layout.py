"""Layout: version directories, model filenames, config name, stray files and symlinks as Triton reads them."""

from harness.checks.layout import check_layout


def test_layout(entry, judge):
    judge(check_layout, entry)
