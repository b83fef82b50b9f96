"""The pytest plugin: every option in one group, and session-scoped fixtures for the repository under
test, the server and its clients. Suites ask for fixtures; they never start servers themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.servers import cleanup

GROUP = "yolo-triton-suite"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "YOLO on Triton conformance")
    group.addoption("--triton", default=os.environ.get("YTS_TRITON", "process"),
                    choices=("auto", "process", "container", "url"),
                    help="server launcher: process (embedded default, no Docker), container (testcontainers), "
                         "url (an existing server), auto (container when Docker answers, else process)")
    group.addoption("--triton-image", default=os.environ.get("YTS_TRITON_IMAGE"),
                    help="container image, e.g. nvcr.io/nvidia/tritonserver:24.10-py3 (already pulled/loaded); "
                         "default: a CPU image built locally")
    group.addoption("--triton-url", default=os.environ.get("YTS_TRITON_URL"),
                    help="with --triton=url: HOST:HTTP_PORT[,GRPC_PORT] of a running server")
    group.addoption("--repo", default=os.environ.get("YTS_REPO"), type=Path,
                    help="model repository under test (never modified: the suite works on a scratch copy); "
                         "default: the bundled reference repository, built for this machine")
    group.addoption("--triton-startup-timeout", type=float, default=180.0,
                    help="seconds to wait for the server to become ready")
    group.addoption("--triton-log-dir", type=Path, default=None,
                    help="where server logs are kept (default: .cache/logs)")
    group.addoption("--profile", default=os.environ.get("YTS_PROFILE", "default"),
                    help="thresholds profile name or path to a profile file")
    group.addoption("--report-dir", type=Path, default=None, help="write reports and pictures here")
    group.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")


def pytest_configure(config: pytest.Config) -> None:
    cleanup.install_handlers()
    swept = cleanup.sweep()
    if swept:
        config.stash[_SWEPT] = swept


_SWEPT = pytest.StashKey[list]()


def pytest_report_header(config: pytest.Config) -> list[str]:
    from harness.servers.choose import resolve_kind

    lines = [f"triton launcher: {resolve_kind(config.getoption('--triton'))} (--triton={config.getoption('--triton')})"]
    if config.stash.get(_SWEPT, None):
        lines.append(f"swept leftovers of an earlier run: {', '.join(config.stash[_SWEPT])}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness import hostinfo

    skip_slow = pytest.mark.skip(reason="slow: opt in with --run-slow")
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (none found: nvidia-smi/CUDA unavailable)")
    has_gpu = None
    for item in items:
        suite = _suite_of(item)
        if suite:
            item.add_marker(suite)  # `pytest -m accuracy` selects a suite wherever it is run from
        if "slow" in item.keywords and not config.getoption("--run-slow"):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords:
            has_gpu = hostinfo.has_gpu() if has_gpu is None else has_gpu
            if not has_gpu:
                item.add_marker(skip_gpu)


SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"


def _suite_of(item: pytest.Item) -> str | None:
    try:
        relative = Path(item.path).resolve().relative_to(SUITES_DIR)
    except ValueError:
        return None
    return relative.parts[0] if len(relative.parts) > 1 else None


@pytest.fixture(scope="session")
def repository_source(pytestconfig: pytest.Config) -> Path:
    """The repository the user pointed at, or the reference one built for this machine."""
    repo = pytestconfig.getoption("--repo")
    if repo is not None:
        return Path(repo).resolve()
    from harness.reference import build_reference_repository

    return build_reference_repository()


@pytest.fixture(scope="session")
def repository(repository_source: Path) -> Path:
    """A scratch copy: the only repository any server or check ever touches."""
    from harness.repository.scratch import scratch_copy

    return scratch_copy(repository_source)


def server_settings(pytestconfig: pytest.Config, repository: Path, **overrides):
    from harness import hostinfo
    from harness.servers import ServerSettings

    settings = ServerSettings(
        repository=repository,
        startup_timeout=pytestconfig.getoption("--triton-startup-timeout"),
        log_dir=pytestconfig.getoption("--triton-log-dir"),
        gpus=hostinfo.has_gpu(),
    )
    for key, value in overrides.items():
        setattr(settings, key, value)
    return settings


def start_server(pytestconfig: pytest.Config, repository: Path, **overrides):
    """Start a server of the configured kind; the caller stops it (fixtures do)."""
    from harness.servers import create_server

    server = create_server(
        pytestconfig.getoption("--triton"),
        server_settings(pytestconfig, repository, **overrides),
        image=pytestconfig.getoption("--triton-image"),
        url=pytestconfig.getoption("--triton-url"),
    )
    return server.start()


@pytest.fixture(scope="session")
def triton_server(pytestconfig: pytest.Config, repository: Path):
    server = start_server(pytestconfig, repository)
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(f"\n[yts] {server.describe()}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def http_client(triton_server):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(triton_server.endpoints.http, concurrency=4)
    yield client
    client.close()


@pytest.fixture(scope="session")
def grpc_client(triton_server):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(triton_server.endpoints.grpc)
    yield client
    client.close()
