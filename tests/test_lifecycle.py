"""The lifecycle suite, run through pytester against a real server on a tiny repository, in both
directions: the conforming driver passes its hot-add test with zero failures; the wrapper that
unloads before loading (fixtures/lifecycle/unload_before_load.py) fails it, and the broken-version
test, with messages naming the failed requests and the model going unready; a version READY before it
answers (fixtures/lifecycle/ready_before_answering) fails both, named as such."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.paths import FIXTURES, PROJECT_ROOT
from tests.conftest import write_scale_add

SUITE = PROJECT_ROOT / "suites" / "lifecycle"
READY_BEFORE_ANSWERING = FIXTURES / "lifecycle" / "ready_before_answering" / "model.py"
UNLOAD_FIRST = f"{FIXTURES / 'lifecycle' / 'unload_before_load.py'}:UnloadBeforeLoad"


@pytest.fixture
def lifecycle_repo(tmp_path) -> Path:
    repository = tmp_path / "models"
    write_scale_add(repository)
    return repository


def _run(pytester, repository: Path, selection: str, *extra: str):
    pytester.makeini(f"[pytest]\ntestpaths = {SUITE}\naddopts = -p no:cacheprovider\n")
    return pytester.runpytest_subprocess(
        str(SUITE), "--repo", str(repository), "-k", selection, "--lifecycle-lead-s=0.5",
        "--lifecycle-tail-s=1.0", *extra, timeout=240)


def test_conforming_promotion_passes_with_counts(pytester, lifecycle_repo):
    result = _run(pytester, lifecycle_repo, "test_add_version_under_traffic and latest1")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    row = re.search(r"test_add_version_under_traffic\[latest1\]\s+passed\s+(\d+)\s+(\d+)\s+v1=(\d+), v2=(\d+)", out)
    assert row, out[-3000:]
    sent, failed, v1, v2 = map(int, row.groups())
    assert failed == 0 and sent == v1 + v2 and v1 > 0 and v2 > 0, row.group(0)


def test_unload_before_load_is_caught(pytester, lifecycle_repo):
    result = _run(pytester, lifecycle_repo, "test_add_version_under_traffic and latest1",
                  "--lifecycle-driver", UNLOAD_FIRST)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert re.search(r"[1-9]\d* of \d+ requests failed while version 2 was loaded \(expected 0\)", out), out[-3000:]
    assert "has no available versions" in out
    assert re.search(r"model 'scale_add' \(/v2/models/scale_add/ready\) answered not-ready in [1-9]", out)


def test_unload_before_load_is_caught_with_a_broken_version(pytester, lifecycle_repo):
    """Even a failing N+1 takes the service down when the wrapper unloads first: the old version
    must keep serving, and here it does not."""
    result = _run(pytester, lifecycle_repo, "test_broken_version_under_traffic and corrupt_model_file",
                  "--lifecycle-driver", UNLOAD_FIRST)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert re.search(r"requests failed while broken version 2 failed to load", out), out[-3000:]


def test_ready_before_answering_is_named_as_the_cause(pytester, lifecycle_repo):
    """Issue 34 item 4: a version READY before its session answers (fixtures/lifecycle/ready_before_answering)
    fails the broken-version test in the reload it starts from — named so, never blamed on the broken version —
    and the hot reload right after version 2 reported READY."""
    import shutil

    shutil.copy(READY_BEFORE_ANSWERING, lifecycle_repo / "scale_add" / "1" / "model.py")
    result = _run(pytester, lifecycle_repo, "test_broken_version_under_traffic and corrupt_model_file or "
                  "test_add_version_under_traffic and latest1")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    broken, hot = out.split("test_broken_version_under_traffic[corrupt_model_file] _")[1].split("test_add_version_under_traffic[latest1] _")
    assert re.search(r"[1-9]\d* of \d+ requests failed right after version 1 reported READY \(in the \(re\)load this "
                     r"test starts from, at [-+]\d\.\d+ s\)", broken), broken[-3000:]
    assert "session is still warming up" in broken and "failed while broken version 2 failed to load" not in out
    assert re.search(r"[1-9]\d* of \d+ requests failed right after version 2 reported READY \(once the test's load "
                     r"returned", hot), hot[-3000:]
    assert "version 2 never answered" not in hot  # one cause, said once


def _with_pipeline(repository: Path, pinned: bool) -> None:
    """fixtures/lifecycle/ensemble_pinned_version next to scale_add; unpinned: its step follows the policy (-1)."""
    import shutil

    from harness.repository.config import read_config, write_config

    target = repository / "pinned_pipeline"
    shutil.copytree(FIXTURES / "lifecycle" / "ensemble_pinned_version" / "pinned_pipeline", target)
    if not pinned:
        config = read_config(target)
        config.ensemble_scheduling.step[0].model_version = -1
        write_config(target, config)


@pytest.mark.parametrize("pinned", [False, True], ids=["follows_policy", "pinned_v1"])
def test_dependent_ensemble_driven_and_a_retired_pin_caught(pytester, lifecycle_repo, pinned):
    """Issue 25 item 4: the ensembles that use the reloaded model get traffic through the switch; one
    pinned to the version the policy retires fails there, named."""
    _with_pipeline(lifecycle_repo, pinned)
    result = _run(pytester, lifecycle_repo, "test_add_version_under_traffic and latest1")
    out = result.stdout.str()
    assert "ensembles using it driven too: ['pinned_pipeline']" in out, out[-3000:]
    if not pinned:
        result.assert_outcomes(passed=1)
        assert re.search(r"pinned_pipeline_sent=[1-9]\d*, pinned_pipeline_failed=0", out), out[-3000:]
        return
    result.assert_outcomes(failed=1)
    assert re.search(r"[1-9]\d* of \d+ requests failed by ensemble 'pinned_pipeline' \(it uses the model\) "
                     r"while version 2 was loaded", out), out[-3000:]


@pytest.mark.parametrize("model", [None, FIXTURES / "lifecycle" / "stub_left_running" / "model.py"],
                         ids=["scale_add", "stub_left_running"])
def test_stress_counts_stubs_left_running_by_unloaded_versions(pytester, lifecycle_repo, model):
    """The stress test's stub count, both ways: scale_add's stubs exit with their version; a model whose
    non-daemon thread keeps its stub alive (fixtures/lifecycle/stub_left_running) leaves one more per cycle."""
    import shutil

    if model is not None:
        shutil.copy(model, lifecycle_repo / "scale_add" / "1" / "model.py")
    result = _run(pytester, lifecycle_repo, "test_unload_load_cycles_under_traffic", "--lifecycle-cycles=6")
    out = result.stdout.str()
    row = re.search(r"test_unload_load_cycles_under_traffic\s+(passed|failed)\s.*cycles=6.*stub_processes=(\d+)->(\d+)", out)
    assert row, out[-3000:]
    if model is None:
        result.assert_outcomes(passed=1)
        assert row.group(2) == row.group(3), row.group(0)
    else:
        result.assert_outcomes(failed=1)
        assert int(row.group(3)) > int(row.group(2)), row.group(0)
        assert re.search(r"stub processes rose over 5 unload/load cycles \(\[\d+(, \d+)+\]\): unloaded versions' stubs "
                         r"were left running", out), out[-3000:]
        assert not re.search(r"memory floor \(resident, less shared memory\) rose -?\d", out)  # one cause, told once
