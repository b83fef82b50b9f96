"""suites/batching, run as a user would (`pytest --benchmark-only --repo ...`), passes the good
fixture repository and fails each broken one in the check and with the words that name the cause (through
`yts certify`, whose verdict names it too); a plain run skips it with a reason."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from harness.paths import FIXTURES, PROJECT_ROOT
from tests.conftest import assert_not_certified, certify_repo

SUITE = PROJECT_ROOT / "suites" / "batching"
FAST = ("--batching-window", "0.5", "--batching-warmup", "0.3", "--batching-max-windows", "4")

BROKEN = {  # fixture repository -> (check that must fail, words its message must contain)
    "max_batch_size_1": ("test_batches_form", "max_batch_size is 1"),
    "queue_delay_zero": ("test_batches_form", "never waits for a preferred batch to fill"),
    "execute_loops": ("test_batching_gain", "does execute() loop over requests one by one?"),
    "short_circuit_under_load": ("test_performance_audit", "differ from the sequential answers to the same inputs"),
}


def run_suite(pytester, repo, *args):
    return pytester.runpytest_subprocess(str(SUITE), "--benchmark-only", "--repo", str(FIXTURES / "batching" / repo),
                                         "-p", "no:cacheprovider", "-q", *FAST, *args, timeout=400)


def test_plain_run_skips_with_reason(pytester):
    result = pytester.runpytest_subprocess(str(SUITE), "--repo", str(FIXTURES / "batching" / "batched"), "-rs")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*run with `pytest --benchmark-only`*"])
    assert result.parseoutcomes().get("skipped") == 7  # the six measurements and the Poisson sweep


def test_batched_repository_passes_and_lands_in_benchmark_json(pytester, tmp_path):
    out = tmp_path / "bench.json"
    result = run_suite(pytester, "batched", f"--benchmark-json={out}", f"--report-dir={tmp_path}", "--latency-budget-ms=2000")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-4000:]
    benches = {b["name"]: b for b in json.loads(out.read_text())["benchmarks"]}
    expected = {"test_batches_form[detector]", "test_batching_gain[detector]", "test_performance_audit[detector]",
                "test_concurrency_sweep[detector]", "test_poisson_sweep[detector]", "test_harness_overhead"}
    has_wrk = shutil.which("wrk") is not None  # optional: .ci/run installs it; without it fidelity is not tested here
    assert set(benches) == expected | ({"test_generator_fidelity"} if has_wrk else set())
    fidelity = next(c for c in json.loads((tmp_path / "report.json").read_text())["checks"]
                    if c["id"].endswith("::test_generator_fidelity"))
    if not has_wrk:
        assert fidelity["verdict"] == "not tested" and fidelity.get("blocks_certification") is False, fidelity
        assert "not tested here, because wrk is not installed" in fidelity["message"], fidelity
    audit = benches["test_performance_audit[detector]"]["extra_info"]["audit"]
    assert audit["sampled"] >= 16 and audit["mismatches"] == 0, audit
    form = benches["test_batches_form[detector]"]["extra_info"]
    assert form["batch"]["average_batch"] > 1 and set(form["latency_ms"]) >= {"p50", "p90", "p95", "p99"}
    assert "stable" in form and benches["test_batches_form[detector]"]["stats"]["rounds"] == form["completed"]
    assert benches["test_batching_gain[detector]"]["extra_info"]["gain"] >= 1.5
    if has_wrk:
        assert "fidelity_ratio" in benches["test_generator_fidelity"]["extra_info"]
    assert (tmp_path / "batching" / "sweep-detector.png").stat().st_size > 0
    sweep = benches["test_concurrency_sweep[detector]"]["extra_info"]["sweep"]
    assert all(p["average_batch"] >= 1 for p in sweep) and sweep[-1]["average_batch"] > 1, sweep
    # one instance executing batches of up to 8 (20 ms each) while the next fills: throughput stops rising at
    # 16 requests in flight (8/20 ms = 400/s at most); the sweep goes on doubling past it until two doublings
    # add nothing (issue 31 item 3; the latency budget is raised so the plateau rule decides). On a host busy
    # with another test the rise is slower: a fresh-clone run beside two others saturated at 64 (373/s). The
    # saturating point is the first within 5 % of the best, so the sweep ends one or two doublings past it
    # (a fresh-clone CI run: saturated at 32 with 373/s, stopped at 64)
    capacity = benches["test_concurrency_sweep[detector]"]["extra_info"]["capacity"]
    assert capacity["stopped"] == "plateau" and capacity["saturating_concurrency"] in (16, 32, 64), (capacity, sweep)
    assert sweep[-1]["concurrency"] >= 2 * capacity["saturating_concurrency"] and capacity["saturated_throughput"] <= 400, sweep
    assert sweep[-1]["throughput"] < 1.05 * sweep[-3]["throughput"], sweep  # the last two doublings added < 5 %
    assert capacity["knee"]["throughput"] >= 0.95 * capacity["saturated_throughput"], capacity
    poisson = benches["test_poisson_sweep[detector]"]["extra_info"]
    assert [p["fraction"] for p in poisson["poisson"]] == [0.5, 0.7, 0.9], poisson
    for point in poisson["poisson"]:  # open loop keeps up below saturation (CPU host: no GPU utilisation)
        assert point["offered_per_s"] > 0 and point["errors"] == 0 and "gpu_util_pct" not in point, point
        assert point["throughput"] >= 0.5 * point["offered_per_s"], point


def test_repository_that_does_not_batch_is_not_applicable_unless_required(tmp_path):
    """Issue #32 item 5: a repository with no dynamic_batching anywhere does not batch by design: its batching
    checks are "not applicable" and the verdict says so (certified); a profile with require_batching refuses it,
    naming the cause."""
    from harness.report import gate

    result = certify_repo(FIXTURES / "batching" / "no_dynamic_batching", tmp_path / "report", ("batching",),
                          "-k", "batches_form or batching_gain or performance_audit or concurrency_sweep", *FAST)
    assert result.returncode == 0, result.stdout[-3000:]
    assert ("CERTIFIED: every required check passed; the repository does not use dynamic batching (by design)"
            in result.stdout), result.stdout[-3000:]
    assert ("  not applicable: the repository does not use dynamic batching: detector: config has no dynamic_batching"
            in result.stdout), result.stdout[-3000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    batching = [c for c in report["checks"] if c["suite"] == "batching"]
    assert len(batching) == 4 and {c["verdict"] for c in batching} == {"not applicable"}, batching
    profile = {**gate.load_profile("certified"), "require_batching": True}
    required = gate.judge(report, profile)
    assert not required.certified and required.exit_status == 1
    assert required.line().splitlines()[1].startswith(
        "  FAILED (profile: require_batching): the profile requires dynamic batching; not applicable: the repository "
        "does not use dynamic batching: detector: config has no dynamic_batching"), required.line()


@pytest.mark.parametrize("repo", sorted(BROKEN))
def test_broken_repository_is_flagged_and_not_certified(repo, tmp_path):
    """Through `yts certify`, as a user gates on it: the check fails naming the cause, the verdict names it."""
    check, words = BROKEN[repo]
    # The CPU default (0.8x) only catches batching that costs throughput; a CPU deployment that must gain
    # from batching says so, as here (the toy detector amortizes a fixed per-execution cost: ~3x).
    result = certify_repo(FIXTURES / "batching" / repo, tmp_path / "report", ("batching",),
                          "-k", "batches_form or batching_gain or performance_audit", "--batching-gain-min", "1.5", *FAST)
    assert re.search(rf"FAILED \S+::{check}\b", result.stdout), f"{check} did not fail for {repo}:\n{result.stdout[-3000:]}"
    assert_not_certified(result, "batching", check, words)


def test_no_drivable_model_says_why(pytester):
    """Issue 22 item 7: a repository whose models are all `skip` is "not tested, because…" naming each
    model, never pytest's empty parameter set."""
    models = sorted(p.name for p in (FIXTURES / "batching" / "batched").iterdir() if (p / "config.pbtxt").is_file())
    declared = [arg for model in models for arg in ("--model", f"{model}=skip")]
    result = run_suite(pytester, "batched", *declared, "-k", "none", "-rs")
    out = result.stdout.str()
    assert "NOTSET" not in out and result.parseoutcomes().get("skipped", 0) >= 1, out[-2000:]
    assert "not tested, because no model of the repository can be driven: " in out
    for model in models:
        assert f"{model}: command line marks it skip" in out, out[-2000:]
