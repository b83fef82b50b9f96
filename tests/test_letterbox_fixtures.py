"""suites/letterbox catches every broken implementation in fixtures/letterbox/, by the property and with
the message that names its mistake, and passes the harness's own implementation."""

from __future__ import annotations

import pytest

from harness.paths import PROJECT_ROOT

# Imported here, before pytester snapshots sys.modules: pytester drops the modules an in-process run
# imported, and neither OpenCV (no second import in one process) nor hypothesis (strategies built by
# one copy of the module are refused by another) survives being imported twice.
import harness.hypothesis_profiles  # noqa: E402,F401
import harness.vision.letterbox  # noqa: E402,F401
import harness.vision.strategies  # noqa: E402,F401

SUITE = PROJECT_ROOT / "suites" / "letterbox"

# fixture module -> (property that must fail, words the failure message must contain)
BROKEN = {
    "offsets_not_subtracted": ("test_restore_inverts_the_forward_mapping", "pad offsets not subtracted"),
    "ratio_on_padded_size": ("test_restore_inverts_the_forward_mapping", "ratio taken from the padded canvas"),
    "padding_one_side": ("test_padding_is_centered", "padding not centered"),
    "pad_zero": ("test_padding_is_filled_with_pad_value", "padding filled with [0] (/255), expected pad value 114/255"),
    "int_truncation": ("test_scale_is_min_ratio_and_content_is_rounded", "truncated with int() instead of rounded"),
    "stretch_resize": ("test_scale_is_min_ratio_and_content_is_rounded", "aspect ratio not kept"),
    "divide_by_r": ("test_restore_inverts_the_forward_mapping", "divided by r = min(th/h, tw/w) instead of"),
    "boxes_not_clipped": ("test_restored_boxes_are_clipped_to_the_source", "restored boxes not clipped"),
}


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(str(SUITE), "-p", "no:cacheprovider", "-q", *args)


def test_reference_implementation_passes(pytester):
    # the local properties only; the served property (marker server) is tests/test_letterbox_served.py's
    result = run_suite(pytester, "-m", "not server")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) >= 11 and "failed" not in outcomes


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_broken_implementation_is_caught(pytester, module):
    prop, message = BROKEN[module]
    result = run_suite(pytester, "--letterbox-impl", f"fixtures.letterbox.{module}:LETTERBOX", "-k", prop)
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, f"{module} was not caught by {prop}:\n{output[-3000:]}"
    result.stdout.fnmatch_lines([f"FAILED *::{prop}*"])
    assert message in output, f"failure for {module} does not name the mistake ({message!r}):\n{output[-3000:]}"


def test_bad_impl_spec_is_a_usage_error(pytester):
    result = run_suite(pytester, "--letterbox-impl", "harness.vision.letterbox")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--letterbox-impl wants MODULE:ATTR" in result.stderr.str() + result.stdout.str()
