"""Bindings: config.pbtxt against the model file's real inputs and outputs."""

from harness.checks.bindings import check_bindings


def test_bindings(entry, judge):
    judge(check_bindings, entry)
