"""Host-aware by default: without --repo the suites serve the reference build for this host — the GPU
build where an NVIDIA GPU and a CUDA torch are both here, else the CPU build, saying which is missing;
the choice is printed in the header, and `yts certify` / `yts reference` choose the same way."""

from __future__ import annotations

import argparse

import pytest

from harness import hostinfo


def test_auto_names_the_build_and_why(monkeypatch):
    hostinfo.reference_device.cache_clear()
    monkeypatch.setattr(hostinfo, "has_gpu", lambda: False)
    assert hostinfo.reference_device("auto") == ("cpu", "auto: no NVIDIA GPU here")
    assert hostinfo.reference_device("gpu") == ("gpu", "asked for")
    hostinfo.reference_device.cache_clear()
    with pytest.raises(ValueError, match="--device 'tpu'"):
        hostinfo.reference_device("tpu")


def test_certify_without_repo_certifies_the_reference_build_for_this_host():
    from harness.report.certify import pytest_command, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["certify", "--precision", "yolo_e2e=fp16"])
    command = pytest_command(args)
    assert "--device=auto" in command and not any(c.startswith("--repo=") for c in command)
    assert "--precision=yolo_e2e=fp16" in command


def test_the_header_says_which_build(pytester):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--device", "cpu")
    result.stdout.fnmatch_lines(["repository: the reference build for cpu (asked for; --device=cpu)"])
