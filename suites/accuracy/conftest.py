"""The accuracy suite's candidates, runs and summary. Each candidate runs over the evaluation set once per
session (harness.accuracy.runner); the tests only judge those runs.

Candidates: by default the harness's FP16 and INT8 variants at the profile's size, TensorRT plans when
TensorRT is importable, and every served model (raw-tensor or end-to-end) of the repository under test.
`--accuracy-candidate SPEC` (repeatable) replaces that list: variant:NAME, served:MODEL or a .toml file
such as the broken ones in fixtures/accuracy/. `--accuracy-reference PATH` swaps the FP32 reference ONNX
(default reference_model/yolov8n_shapes.onnx, else $YTS_DEV_MODEL)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from harness.accuracy import specs as specs_module
from harness.accuracy.profile import load_profile

PROFILE_KEY = pytest.StashKey[object]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("yts-accuracy", "yolo-triton-suite accuracy suite")
    group.addoption("--accuracy-candidate", action="append", default=[], metavar="SPEC",
                    help="candidate to judge instead of the default list: variant:NAME, served:MODEL or a .toml file")
    group.addoption("--eval-set", type=Path, default=None, metavar="DIR",
                    help="labelled evaluation set: COCO annotations.json (per-image \"slice\" optional) or YOLO "
                         "images/ + labels/ (+ classes.txt, SLICE.txt lists); default fixtures/shapes_eval")
    group.addoption("--accuracy-reference", type=Path, default=None, metavar="ONNX",
                    help="FP32 reference model (default reference_model/yolov8n_shapes.onnx, else $YTS_DEV_MODEL)")


def pytest_configure(config: pytest.Config) -> None:
    """A bad --profile is a usage error up front, not one error per test."""
    try:
        config.stash[PROFILE_KEY] = load_profile(config.getoption("--profile"))
    except (FileNotFoundError, ValueError) as error:
        raise pytest.UsageError(f"--profile: {error}") from error


def _served_specs(config: pytest.Config) -> list:
    """Served models of the repository under test, read from its configs at collection time."""
    from harness.accuracy.served import served_models
    from harness.session import manifest_for

    from harness.session import source_repository

    repo = source_repository(config)
    return [specs_module.CandidateSpec(name=f"served:{name}", kind="served", target=name)
            for name, _ in served_models(Path(repo), manifest_for(config))]


def candidate_specs(config: pytest.Config) -> list:
    from harness.session import manifest_for

    profile = config.stash[PROFILE_KEY]
    if manifest_for(config).imgsz:  # the owner's declared input size wins over the profile's, for every run
        profile.eval["imgsz"] = manifest_for(config).imgsz
    imgsz = profile.eval["imgsz"]
    explicit = config.getoption("--accuracy-candidate")
    if explicit:
        try:
            return [specs_module.parse(text, imgsz) for text in explicit]
        except (FileNotFoundError, ValueError) as error:
            raise pytest.UsageError(f"--accuracy-candidate: {error}") from error
    specs = [specs_module.parse(f"variant:fp16-dyn-{imgsz}"), specs_module.parse(f"variant:int8-day+night-minmax-quint8-dyn-{imgsz}")]
    if importlib.util.find_spec("tensorrt") is not None:
        specs += [specs_module.parse(f"variant:trt-fp16-dyn-{imgsz}"), specs_module.parse(f"variant:trt-int8-day+night-minmax-qint8-dyn-{imgsz}")]
    return specs + _served_specs(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "candidate_spec" in metafunc.fixturenames:
        specs = candidate_specs(metafunc.config)
        metafunc.parametrize("candidate_spec", specs, ids=[s.id for s in specs], scope="session")


@pytest.fixture(scope="session")
def accuracy_profile(pytestconfig):
    return pytestconfig.stash[PROFILE_KEY]


@pytest.fixture(scope="session")
def reference_model(pytestconfig) -> Path:
    from harness.engines.artifacts import REFERENCE_MODEL

    chosen = pytestconfig.getoption("--accuracy-reference")
    if chosen is not None:
        return Path(chosen).resolve()
    if REFERENCE_MODEL.exists():
        return REFERENCE_MODEL
    if os.environ.get("YTS_DEV_MODEL"):
        return Path(os.environ["YTS_DEV_MODEL"])
    pytest.skip(f"{REFERENCE_MODEL} not committed yet and $YTS_DEV_MODEL not set")


@pytest.fixture(scope="session")
def eval_set(pytestconfig, accuracy_profile):
    from harness.accuracy.evalset import EvalSet
    from harness.engines.artifacts import EVAL_SET

    directory = pytestconfig.getoption("--eval-set") or EVAL_SET
    try:
        return EvalSet(directory, accuracy_profile.eval["images_per_slice"])
    except FileNotFoundError as error:
        raise pytest.UsageError(f"--eval-set: {error}") from error


@pytest.fixture(scope="session")
def artifact_cache(reference_model):
    from harness.engines.artifacts import ArtifactCache

    return ArtifactCache(source=reference_model)


@pytest.fixture(scope="session")
def accuracy_runs(request, accuracy_profile, eval_set, artifact_cache):
    """name -> (candidate, Run): every candidate and the reference run once per session."""
    from harness.accuracy.session import AccuracySession

    return AccuracySession(accuracy_profile, eval_set, artifact_cache, request)


@pytest.fixture(scope="session")
def reference_run(accuracy_runs):
    return accuracy_runs.reference()


@pytest.fixture(scope="session")
def candidate(accuracy_runs, candidate_spec):
    """(spec, candidate, run) of the candidate under test."""
    return accuracy_runs.candidate(candidate_spec)


@pytest.fixture(scope="session")
def report_dir(pytestconfig):
    return pytestconfig.getoption("--report-dir")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from harness.accuracy.summary import SUMMARY_KEY, summary_table

    rows = config.stash.get(SUMMARY_KEY, {})
    if rows:
        terminalreporter.section("accuracy: per candidate, per slice (mAP50-95; FP32 reference first)")
        terminalreporter.write_line(summary_table(rows))
