"""Fixtures for the harness's own tests: small repositories written through the repository writer, and
the ways a test runs the suites as a user would (a suite file under pytest, a repository through `yts certify`)."""

import fcntl
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

# Loaded before pytester snapshots sys.modules: in-process suite runs build the reference at collection
# time (harness.availability), and onnx's C++ extension aborts the process when imported a second time.
import harness.reference.build  # noqa: F401
from harness.paths import FIXTURES, PROJECT_ROOT
from harness.repository.writer import write_model

pytest_plugins = ["pytester"]

MODELS = Path(__file__).parent / "models"
# pytest-xdist (`make test` runs four workers) marks each worker's environment; the pytest runs the tests
# start themselves (pytester, `yts certify`) would inherit it, take themselves for workers and, for one,
# have pytest-benchmark refuse --benchmark-only. They are runs of their own: the marks go.
XDIST_ENVIRONMENT = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # shared by the workers of one `make test`; None without xdist


def pytest_configure(config: pytest.Config) -> None:
    for name in XDIST_ENVIRONMENT:
        os.environ.pop(name, None)


@contextmanager
def host_share(alone: bool):
    """A test marked `alone` runs with no test of another worker beside it: a timing verdict (co-tenancy's p99
    ratio) measures the whole 2-core host, and a CI run once saw 3.6x and 6.9x instead of ~2x with a neighbour
    busy. Every other test holds a shared lock; `alone` takes the gate first, so the other workers start nothing
    new while it waits for the running tests to end."""
    if RUN_ID is None:
        yield
        return
    gate, share = _lock_files()
    with ExitStack() as held:
        gate_file, share_file = (held.enter_context(open(path, "a")) for path in (gate, share))
        if alone:
            fcntl.flock(gate_file, fcntl.LOCK_EX)
            fcntl.flock(share_file, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate_file, fcntl.LOCK_SH)
            fcntl.flock(share_file, fcntl.LOCK_SH)
            fcntl.flock(gate_file, fcntl.LOCK_UN)
        yield


def _lock_files() -> tuple[Path, Path]:
    return tuple(Path(tempfile.gettempdir()) / f"yts-tests-{RUN_ID}.{name}.lock" for name in ("gate", "share"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A worker that is done removes the lock files: the other one, if still running, has nobody left to wait for
    and opens new ones; the last leaves none behind in the temporary directory."""
    if RUN_ID is not None:
        for path in _lock_files():
            path.unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Around setup, call and teardown, so a module's server starting for the first test is inside too."""
    with host_share(item.get_closest_marker("alone") is not None):
        return (yield)


def write_scale_add(repository: Path, name: str = "scale_add", **config_fields) -> Path:
    from tritonclient.grpc import model_config_pb2 as pb

    config = pb.ModelConfig(name=name, backend="python", max_batch_size=8)
    config.input.add(name="X", data_type=pb.TYPE_FP32, dims=[4])
    config.output.add(name="Y", data_type=pb.TYPE_FP32, dims=[4])
    config.output.add(name="BATCH", data_type=pb.TYPE_INT32, dims=[1])
    config.dynamic_batching.max_queue_delay_microseconds = 20000
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1)
    for field, value in config_fields.items():
        setattr(config, field, value)
    return write_model(repository, config, {1: {"model.py": MODELS / "scale_add" / "model.py"}})


@pytest.fixture(scope="session")
def tiny_repository(tmp_path_factory) -> Path:
    repository = tmp_path_factory.mktemp("tiny") / "models"
    write_scale_add(repository)
    return repository


def built_reference(*args, **kwargs) -> Path:
    """harness.reference.build_reference_repository(*args, **kwargs); skips until the trained reference model is there."""
    from harness.reference.build import build_reference_repository, source_model

    try:
        source_model()
    except FileNotFoundError as error:
        pytest.skip(f"needs a detector that detects: {error}")
    return build_reference_repository(*args, **kwargs)


@pytest.fixture(scope="session")
def reference_repository() -> Path:
    """The reference repository built for this machine (session scope: built before any pytester snapshot)."""
    return built_reference()


def run_suite_file(pytester: pytest.Pytester, path: Path, *args: str, timeout: float = 900) -> pytest.RunResult:
    """A suite (or one of its files) in a pytest subprocess under the project's own pytest.ini."""
    return pytester.runpytest_subprocess(str(path), "-p", "no:cacheprovider", "-rfs", f"--rootdir={PROJECT_ROOT}",
                                         "-c", str(PROJECT_ROOT / "pytest.ini"), *args, timeout=timeout)


def certify_repo(repo: Path, report_dir: Path, suites: tuple[str, ...], *pytest_args: str,
                 certify_args: tuple[str, ...] = (), env: dict | None = None) -> subprocess.CompletedProcess:
    """`yts certify --repo REPO --suites ... --report-dir DIR [certify_args] -- [pytest_args]`, as a user runs it;
    its stdout holds pytest's failures and the verdict (verdict_block)."""
    command = [sys.executable, "-m", "harness.cli", "certify", "--repo", str(repo), "--suites", *suites,
               "--report-dir", str(report_dir), *certify_args, "--", "-p", "no:randomly", *pytest_args]
    return subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def verdict_block(stdout: str, headline: str = "NOT CERTIFIED") -> str | None:
    """The certification verdict: its headline and the indented lines under it (one per cause)."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(headline)), None)
    if start is None:
        return None
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block)


def assert_not_certified(result: subprocess.CompletedProcess, suite: str, check: str, cause: str | None = None) -> None:
    """A certify_repo run of a broken repository: not certified, `check` of `suite` named in the verdict, and
    `cause` (the words naming what is broken) in pytest's failure output."""
    out = result.stdout
    assert result.returncode != 0, f"certified:\n{out[-3000:]}"
    if cause is not None:
        assert cause in out, f"the failure does not name the cause ({cause!r}):\n{out[-3000:]}"
    block = verdict_block(out)
    assert block is not None and f"FAILED suites/{suite}/" in block and check in block, \
        f"the verdict does not name {check}: {block or out[-3000:]}"


def derive_served(reference: Path, variant: str, out: Path, fixtures: Path = FIXTURES / "letterbox" / "served",
                  model: str = "yolo_e2e") -> Path:
    """fixtures/letterbox/served/derive.py: the reference repository with `model`'s model.py replaced by the
    variant's (from `fixtures`, default fixtures/letterbox/served)."""
    derive = load_module(FIXTURES / "letterbox" / "served" / "derive.py")
    return derive.derive_repository(reference, variant, out, fixtures=fixtures, model=model)


def load_module(path: Path):
    """A script of the project that is no package module (a fixture's build.py, a suite file) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"yts_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
