"""suites/operations passes the reference repository (stages, memory, growth per request, co-tenancy) and flags each broken
fixture in fixtures/operations/ by the check meant for it, with the numbers; fixtures/third_party does not grow; plus the
stage-metric reader on exposition text and the growth slope on made-up samples."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.metrics.prometheus import parse
from harness.operations import stages
from harness.operations.growth import Series, compute_apps
from harness.operations.memory import parse_size
from harness.operations.stages import breakdown, stage_series, warm_up
from harness.paths import PROJECT_ROOT
from tests.conftest import built_reference, load_module

SUITE = PROJECT_ROOT / "suites" / "operations"
FIXTURES = PROJECT_ROOT / "fixtures" / "operations"
THIRD_PARTY = PROJECT_ROOT / "fixtures" / "third_party"
BUDGET = "--memory-budget=2GiB"  # the reference holds ~1.5 GiB at 640 (~0.8 GiB at 320) once each model ran a batch, the fixture ~2.8 GiB


@pytest.fixture(scope="module")
def small_reference():
    """The CPU reference repository at 320, FP32 only: the same models, configs and code as `make conformance`'s
    at 640 (which runs this suite on that one), at a quarter of the inference: the co-tenancy run takes ~25 s
    instead of ~60 s alone on the host, the rest ~43 s instead of ~71 s."""
    return str(built_reference("cpu", 320, precisions=("fp32",)))


def run_suite(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", str(SUITE), "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)


@pytest.mark.server
def test_reference_passes_with_its_stage_breakdown(tmp_path, small_reference):
    result = run_suite(BUDGET, "--repo", small_reference, "--report-dir", str(tmp_path), "-k", "not cotenancy")
    assert result.returncode == 0, result.stdout[-4000:]
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("yolo_e2e:"))
    for stage in ("decode", "letterbox", "inference", "nms", "coverage"):
        assert stage in row, row
    assert "host memory with everything loaded" in result.stdout and "of a 2.00 GiB budget (--memory-budget" in result.stdout
    costs = next(line for line in result.stdout.splitlines() if "memory per model (unloaded one after another, then loaded again)" in line)
    assert all(model in costs for model in ("yolo_raw", "yolo_e2e", "yolo_preprocess", "yolo_postprocess")), costs
    assert "yolo_ensemble" not in costs, costs  # an ensemble holds no memory of its own
    assert re.search(r"memory growth: yolo_preprocess: 1,000 requests after 200 \(.*yolo_preprocess stub \(pid \d+\) RSS",
                     result.stdout), result.stdout[-4000:]
    assert (tmp_path / "operations_stages.png").stat().st_size > 0
    assert "yolo_e2e" in (tmp_path / "operations_stages.json").read_text()


@pytest.mark.server
@pytest.mark.alone  # co-tenancy's p99 ratio measures the whole host: only this part of the reference's run waits for it
def test_reference_light_model_keeps_its_latency_beside_a_saturated_one(small_reference):
    result = run_suite("--repo", small_reference, "-k", "cotenancy")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "co-tenancy: yolo_raw p99" in result.stdout and "while yolo_e2e is saturated" in result.stdout


@pytest.mark.server
def test_stages_in_the_wrong_unit_are_flagged():
    result = run_suite("--repo", str(FIXTURES / "stages_ms_as_s"), "-k", "stages")
    assert result.returncode == 1, result.stdout[-4000:]
    assert "FAILED suites/operations/test_stages.py::test_stages_add_up_to_compute_time" in result.stdout
    assert "yolo_raw: stages add up to" in result.stdout and "(milliseconds as seconds?)" in result.stdout, result.stdout[-4000:]


@pytest.mark.server
def test_too_many_instances_exceed_the_memory_budget():
    result = run_suite("--repo", str(FIXTURES / "too_many_instances"), "-k", "memory", BUDGET)
    assert result.returncode == 1, result.stdout[-4000:]
    assert "over the budget 2.00 GiB (--memory-budget 2GiB)" in result.stdout, result.stdout[-4000:]
    assert "yolo_raw: 2." in result.stdout and "GiB in 12 stub process(es)" in result.stdout, result.stdout[-4000:]
    assert "memory per model (unloaded one after another, then loaded again): yolo_raw 2." in result.stdout, result.stdout[-4000:]


@pytest.mark.server
def test_a_model_that_keeps_every_request_grows_per_request():
    result = run_suite("--repo", str(FIXTURES / "keeps_every_request"), "-k", "growth")
    assert result.returncode == 1, result.stdout[-4000:]
    assert "FAILED suites/operations/test_growth.py::test_memory_does_not_grow_per_request" in result.stdout
    grown = re.search(r"yolo_raw stub \(pid \d+\) RSS \d+ MiB -> \d+ MiB: \+(\d+\.\d) KiB/request while yolo_raw was driven",
                      result.stdout)
    assert grown and 250 < float(grown.group(1)) < 400, result.stdout[-4000:]  # ~310 KiB kept a request
    assert "bound +64.0 KiB/request, --growth-bound 64KiB" in result.stdout, result.stdout[-4000:]
    assert re.search(r"tritonserver \(pid \d+\) RSS", result.stdout) and "tritonserver (pid" not in grown.group(0)


@pytest.mark.server
def test_a_third_party_model_does_not_grow_per_request(tmp_path):
    """fixtures/third_party's vendor_yolo at imgsz 160 (the reference ONNX re-shaped, no export), 500 requests after
    100 given the time they need (~30-100 ms each on 2 cores: decode, numpy letterbox, ONNX Runtime, NMS): its stub
    measured +0.5 KiB/request over the default 1,000 (66 CPU-s), +2.1 over 500 (30 CPU-s), bound 64."""
    build = load_module(THIRD_PARTY / "build.py")
    repository = build.build(tmp_path / "models", build.reference_onnx(160), imgsz=160)
    result = run_suite("--repo", str(repository), "-k", "growth", "--growth-budget=280",
                       "--growth-requests=500")
    assert result.returncode == 0, result.stdout[-4000:]
    assert re.search(r"memory growth: vendor_yolo: 500 requests after 100 .*vendor_yolo stub \(pid \d+\) RSS",
                     result.stdout), result.stdout[-4000:]


@pytest.mark.server
def test_a_hog_without_rate_limiter_starves_the_light_model():
    result = run_suite("--repo", str(FIXTURES / "starved_by_hog"), "-k", "cotenancy")
    assert result.returncode == 1, result.stdout[-4000:]
    assert "yolo_raw starves beside hog" in result.stdout, result.stdout[-4000:]
    assert "hog: instances 16x KIND_CPU; rate limiter resources: none; priority levels: none" in result.stdout


def test_stage_metrics_are_read_in_their_unit_for_any_model():
    text = """# TYPE a_stage_ms counter
a_stage_ms{model="m",stage="decode"} %s
a_stage_ms{model="m",stage="nms"} %s
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="m",version="1"} %s
# TYPE other_seconds counter
other_seconds{model="m"} 5
"""
    before, after = parse(text % (0, 0, 0)), parse(text % (3, 1, 5000))
    assert set(stage_series(after)) == {"m"}
    result = breakdown("m", before, after, requests=1)
    assert result.stages_us == {"decode": 3000.0, "nms": 1000.0} and result.coverage == pytest.approx(0.8)
    assert result.problem(0.8, 1.05) is None
    assert "a stage that takes time is missing" in breakdown("m", before, parse(text % (1, 1, 5000)), 1).problem(0.8, 1.05)


def test_memory_sizes():
    assert parse_size("512MiB") == 512 * 2**20 and parse_size("6GB") == 6 * 10**9 and parse_size("100") == 100
    with pytest.raises(ValueError, match="memory size '6 lots'"):
        parse_size("6 lots")


def test_warm_up_goes_on_until_as_many_requests_in_a_row_are_warm_as_there_are_instances(monkeypatch):
    """On a clock the requests advance (real sleeps of 5 ms took over 10 ms on a loaded 2-core host)."""
    now = [0.0]
    monkeypatch.setattr(stages, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def taking(latencies):
        latencies = iter(latencies)
        return lambda: now.__setitem__(0, now[0] + next(latencies))

    assert warm_up(taking([0.08, 0.08, 0.005, 0.08, 0.005, 0.005, 0.005]), count=3) == 7  # a cold one between warm
    assert warm_up(taking([0.2] * 100), count=100, cap_s=0.5) == 3  # bounded in time, whatever the count


def test_growth_is_the_slope_of_a_line_through_every_sample():
    requests = list(range(0, 1001, 25))
    leak = Series("m stub (pid 1)", "RSS", requests, [100 * 2**20 + 300 * 1024 * n for n in requests])
    assert leak.slope() == pytest.approx(300 * 1024)
    step = Series("m stub (pid 1)", "RSS", requests, [100 * 2**20 + (8 * 2**20 if n > 500 else 0) for n in requests])
    assert step.slope() < 13 * 1024  # one 8 MiB arena step in 1,000 requests weighs ~12 KiB/request, not 8 MiB
    assert "m stub (pid 1) RSS 100 MiB -> 393 MiB: +300.0 KiB/request" == leak.line()


def test_gpu_memory_per_process_is_read_from_nvidia_smi_rows():
    rows = "4120, 1536\n4133, 812\n4120, 20\n4200, [N/A]\n"  # --query-compute-apps=pid,used_memory, noheader, nounits
    assert compute_apps(rows) == {4120: 1556 * 2**20, 4133: 812 * 2**20}
    assert compute_apps("") == {}
