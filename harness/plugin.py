"""The pytest plugin: every option in one group, and session-scoped fixtures for the repository under
test, the server and its clients. Suites ask for fixtures; they never start servers themselves."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from harness.servers import cleanup
from harness.session import COLLECTOR, coverage, manifest_for, source_repository

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
    group.addoption("--report-dir", type=Path, default=None,
                    help="write report.json, report.html and pictures here")
    group.addoption("--certify-profile", default=None,
                    help="with --report-dir: judge the run against this certification profile "
                         "(name in harness/report/profiles or a .toml path); the exit status follows the verdict")
    group.addoption("--certify-strict", action="store_true", default=None,
                    help="with --certify-profile: a model this host cannot serve (GPU, backend, a module its Python "
                         "lacks) makes the run PARTIAL even under a profile that accepts partial coverage")
    group.addoption("--manifest", type=Path, default=None,
                    help="TOML declaring model roles, imgsz, nc (harness/repository/manifest.py documents it); "
                         "default: yts.toml at the repository root, if any")
    group.addoption("--model", action="append", default=[], metavar="NAME=ROLE",
                    help="declare a model's role: raw, e2e or skip (repeatable; wins over the manifest)")
    group.addoption("--imgsz", type=int, default=None, help="the models' input size (wins over the manifest)")
    group.addoption("--nc", type=int, default=None, help="the models' class count (wins over the manifest)")
    group.addoption("--precision", action="append", default=[], metavar="NAME=PRECISION",
                    help="declare what a served model computes in: fp32, fp16 or int8 (repeatable; wins over the "
                         "manifest's [precision] and the config's precision parameter); the accuracy gates follow it")
    group.addoption("--device", default=os.environ.get("YTS_DEVICE", "auto"), choices=("auto", "cpu", "gpu"),
                    help="which reference build to serve when --repo is not given: gpu (KIND_GPU, PyTorch FP16), cpu "
                         "(ONNX Runtime), auto (default: gpu where an NVIDIA GPU and a CUDA torch are here)")
    group.addoption("--no-adapter", action="store_true", default=False,
                    help="on the embedded server, do not serve onnxruntime_onnx models through the harness's ONNX "
                         "Runtime adapter (harness.adapters): they are then not tested on this host")
    group.addoption("--onnx-for", action="append", default=[], metavar="MODEL=FILE",
                    help="a tensorrt_plan model the server cannot run, served through the ONNX Runtime adapter from "
                         "the ONNX it was built from, at that ONNX's precision (repeatable)")
    group.addoption("--keep-scratch", action="store_true", default=False,
                    help="keep the run's scratch copies of the repository (= YTS_KEEP_SCRATCH=1; paths printed)")
    group.addoption("--load-engine", default=os.environ.get("YTS_LOAD_ENGINE", "native"), choices=("native", "locust"),
                    help="load generator of the batching suite: native (default) or locust (a Locust master and "
                         "--load-workers local worker processes, measured the same way)")
    group.addoption("--load-workers", type=int, default=2, help="with --load-engine locust: local Locust worker processes")
    group.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")
    from harness.load.options import add_options as add_batching_options

    add_batching_options(parser)
    from harness.operations.options import add_options as add_operations_options

    add_operations_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--keep-scratch"):
        os.environ["YTS_KEEP_SCRATCH"] = "1"
    cleanup.install_handlers(interrupt=True)  # SIGTERM/SIGHUP interrupt the run as Ctrl-C does
    config.stash[SUITE_SERVERS] = _suite_servers()
    swept = cleanup.sweep()
    if swept:
        config.stash[_SWEPT] = swept
    if config.getoption("--repo") is not None or any(
            config.getoption(o) for o in ("--manifest", "--model", "--imgsz", "--nc", "--precision")):
        manifest_for(config)  # a wrong declaration is a usage error before anything runs
    if config.getoption("--onnx-for"):
        from harness.availability import onnx_for

        onnx_for(config)
    report_dir = config.getoption("--report-dir")
    if report_dir is not None:
        from harness.report import gate, html  # noqa: F401  (now: an interrupted run has no time to import at its end)
        from harness.report.collector import ReportCollector

        collector = ReportCollector(report_dir, coverage(config))
        config.stash[COLLECTOR] = collector
        config.pluginmanager.register(collector, "yts-report")
        config.stash[_DEADLINE_REPORT] = lambda: _deadline_report(config)
        cleanup.on_deadline(config.stash[_DEADLINE_REPORT])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _DEADLINE_REPORT in config.stash:  # (in-process pytester runs configure many times)
        cleanup.forget_deadline(config.stash[_DEADLINE_REPORT])


_SWEPT = pytest.StashKey[list]()
SUITE_SERVERS = pytest.StashKey["SuiteServers"]()
_VERDICT = pytest.StashKey[str]()
_DEADLINE_REPORT = pytest.StashKey[object]()


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo) -> None:
    """However the run was interrupted, it now has a deadline (cleanup.DEADLINE_S) and its servers a
    short grace; the collector records which test was cut off. A collection error or pytest.exit() comes
    through this hook too (pytest's Interrupted is a KeyboardInterrupt): no signal, no deadline."""
    if excinfo.errisinstance((pytest.Session.Interrupted, pytest.exit.Exception)):
        return
    cleanup.note_interrupt("KeyboardInterrupt")


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """Around the session's teardown (and junitxml's writing), inside the terminal reporter's summary:
    then write report.json, judge it, render the HTML, and let the verdict decide the exit status when a
    certification profile was asked for (an interrupted run keeps pytest's 2). After an interrupt a
    fixture's teardown may fail (its server is gone): said in one line, it does not cost the report."""
    config = session.config
    try:
        return (yield)
    except Exception as error:
        if not cleanup.interrupted():
            raise
        say(config, f"[yts] teardown after the interrupt failed (ignored): {type(error).__name__}: {error}")
        return None
    finally:
        if COLLECTOR in config.stash:
            census = cleanup.census()
            report_environment(config, servers_started=census["started"], servers_at_once=census["at_once"],
                               gpu_left_over_mib={suite: round(extra / (1 << 20)) for suite, extra
                                                  in config.stash[SUITE_SERVERS].left_over.items()} or None)
            config.stash[COLLECTOR].finish(session.exitstatus)
            verdict = _judge_and_render(config)
            if config.getoption("--certify-profile") and session.exitstatus in (pytest.ExitCode.OK,
                                                                                 pytest.ExitCode.TESTS_FAILED):
                # the gate's status (0, 1, or gate.EXIT_PARTIAL), as the verdict printed: a failing check the
                # profile does not require (a harness self-check such as test_generator_fidelity) does not count
                session.exitstatus = verdict.exit_status


def _judge_and_render(config: pytest.Config):
    from harness.report import gate, html

    report_dir = config.stash[COLLECTOR].report_dir
    profile_name = config.getoption("--certify-profile")
    verdict = gate.judge(report_dir / "report.json", gate.load_profile(profile_name or "certified"),
                         strict=config.getoption("--certify-strict"))
    line = verdict.line() if profile_name else f"(no --certify-profile) {verdict.line()}"
    html.render(report_dir, line)
    config.stash[_VERDICT] = "\n".join([line, "per model (verdicts by suite):", *verdict.model_rows()])
    return verdict


def _deadline_report(config: pytest.Config) -> None:
    """The interrupted run is about to be ended by the watchdog: leave the partial report it has."""
    collector = config.stash[COLLECTOR]
    collector.mark_interrupted(cleanup.interrupted() or "KeyboardInterrupt")
    collector.write(complete=False, exitstatus=int(pytest.ExitCode.INTERRUPTED))
    _judge_and_render(config)
    try:  # --junitxml: what pytest's own writer would have written at session finish
        from _pytest.junitxml import xml_key

        if xml_key in config.stash:
            config.stash[xml_key].pytest_sessionfinish()
    except Exception:
        pass


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _VERDICT in config.stash:
        terminalreporter.write_sep("=", "certification")
        terminalreporter.write_line(config.stash[_VERDICT])
        html_path = config.stash[COLLECTOR].report_dir / "report.html"
        if html_path.is_file():
            terminalreporter.write_line(f"report: {html_path}")


def report_environment(config: pytest.Config, **values) -> None:
    """Suites and fixtures add what they learn (Triton version, GPU) to the report, if one is written."""
    if COLLECTOR in config.stash:
        config.stash[COLLECTOR].add_environment(**values)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from harness.servers.choose import resolve_kind

    lines = [f"triton launcher: {resolve_kind(config.getoption('--triton'))} (--triton={config.getoption('--triton')})"]
    if config.getoption("--repo") is None:
        from harness.hostinfo import reference_device

        device, why = reference_device(config.getoption("--device"))
        lines.append(f"repository: the reference build for {device} ({why}; --device={config.getoption('--device')})")
    if config.stash.get(_SWEPT, None):
        lines.append(f"swept leftovers of an earlier run: {', '.join(config.stash[_SWEPT])}")
    return lines


def _suite_servers():
    from harness import hostinfo
    from harness.servers.turns import SuiteServers

    if not hostinfo.has_gpu():
        return SuiteServers()
    from harness.reference.gpu_sizing import card

    return SuiteServers(gpu_used=lambda: card()[2])


def stop_at_suite_end(config: pytest.Config, suite: str, stop) -> None:
    """A suite's own server is stopped once its last test is done (harness.servers.turns)."""
    config.stash[SUITE_SERVERS].register(suite, stop)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    suite = _suite_of(item)
    if suite and (nextitem is None or _suite_of(nextitem) != suite):
        left = item.config.stash[SUITE_SERVERS].close(suite)
        if left:
            say(item.config, f"\n[yts] WARNING: {left}")
    return result


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness import hostinfo
    from harness.servers.turns import suite_rank
    from harness.verdicts import NOT_SERVABLE_HERE

    items.sort(key=lambda item: suite_rank(_suite_of(item)))  # one server at a time (harness.servers.turns)

    skip_slow = pytest.mark.skip(reason="slow: opt in with --run-slow")
    skip_gpu = pytest.mark.skip(reason=NOT_SERVABLE_HERE + "this check needs an NVIDIA GPU (none found: "
                                       "nvidia-smi/CUDA unavailable); run on a GPU host")
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
    if any(_suite_of(item) for item in items):
        from harness.availability import mark_unservable

        mark_unservable(config, [item for item in items if _suite_of(item)])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """After a check's fixtures (which may have started a server and learnt that a model fails to load):
    a check of such a model is skipped under that one cause (harness.availability.skip_if_load_failed),
    whatever its setup did, except the config suite's offline checks and test_live, which reports it."""
    try:
        result = yield
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:
        _skip_if_load_failed(item)
        raise
    _skip_if_load_failed(item)
    return result


def _skip_if_load_failed(item: pytest.Item) -> None:
    from harness.availability import load_failures, model_of, offline_check, skip_if_load_failed

    suite = _suite_of(item)
    if not suite or offline_check(item) or suite == "config" and item.originalname == "test_live":
        return

    if load_failures(item.config):
        skip_if_load_failed(item.config, model_of(item, load_failures(item.config)))


SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"


def _suite_of(item: pytest.Item) -> str | None:
    try:
        relative = Path(item.path).resolve().relative_to(SUITES_DIR)
    except ValueError:
        return None
    return relative.parts[0] if len(relative.parts) > 1 else None


@pytest.fixture(scope="session")
def repository_source(pytestconfig: pytest.Config) -> Path:
    return source_repository(pytestconfig)


@pytest.fixture(scope="session")
def manifest(pytestconfig: pytest.Config):
    return manifest_for(pytestconfig)


@pytest.fixture(scope="session")
def repository(request: pytest.FixtureRequest, repository_source: Path) -> Path:
    """A scratch copy: the only repository any server or check ever touches."""
    from harness.repository.scratch import fingerprint

    if COLLECTOR in request.config.stash:
        request.config.stash[COLLECTOR].add_artifacts(
            {path: value.rsplit(":", 1)[-1] for path, value in fingerprint(repository_source).items() if value.startswith("file:")})
    return serving_copy(request.config, repository_source)


def serving_copy(config: pytest.Config, source: Path) -> Path:
    """A scratch copy of `source` for a server of this run: the models the ONNX Runtime adapter serves
    on this server (harness.availability.adapter_plan) rewritten to it there, never in `source`."""
    from harness.adapters.onnx_runtime import adapt
    from harness.availability import adapter_plan
    from harness.repository.scratch import scratch_copy

    copy = scratch_copy(source)
    adapt(copy, adapter_plan(config))
    return copy


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
    """Start a server of the configured kind; the caller stops it (fixtures do). Models of its load list
    that fail to load are recorded once (harness.availability.record_load_failures) and the server starts
    again without them, so the rest of the repository is still tested; a model known to fail is not
    loaded again."""
    from harness.availability import load_failures, not_servable, record_load_failures
    from harness.checks import list_models
    from harness.servers import create_server
    from harness.servers.base import ModelsFailedToLoad

    while True:
        load = overrides.get("load_models")
        if load and load != ("*",):  # nor one this host cannot serve (an EXECUTION_ENV_PATH it lacks, say)
            left_out = set(load_failures(pytestconfig)) | set(not_servable(pytestconfig))
            overrides["load_models"] = tuple(m for m in load if m not in left_out)
        server = create_server(
            pytestconfig.getoption("--triton"),
            server_settings(pytestconfig, repository, **overrides),
            image=pytestconfig.getoption("--triton-image"),
            url=pytestconfig.getoption("--triton-url"),
        )
        try:
            return server.start()
        except ModelsFailedToLoad as error:
            known = set(load_failures(pytestconfig))
            record_load_failures(pytestconfig, repository, error.errors)
            if set(load_failures(pytestconfig)) == known or server.kind == "url":
                raise
            if load is None or load == ("*",):
                overrides["load_models"] = tuple(list_models(repository))


@pytest.fixture(scope="session")
def triton_server(pytestconfig: pytest.Config, repository: Path):
    from harness.availability import server_facts
    from harness.reference import loadable_models

    # Models this host cannot serve (a backend the server lacks: yolo_onnx/yolo_trt on the embedded
    # server; a GPU it lacks) stay in the repository for the config suite but out of the load list:
    # their checks are "not tested on this host" (harness.availability).
    server = start_server(pytestconfig, repository, load_models=loadable_models(repository, *server_facts(pytestconfig)))
    _describe_server(pytestconfig, server)
    from harness.checks import list_models
    from harness.servers import wait

    # whether its checks of the whole server are about the repository at all
    coverage(pytestconfig).served = {e["name"] for e in wait.repository_index(server.endpoints.http_url)
                                     if e.get("state") == "READY"} & set(list_models(repository))
    from harness.protocol.untrusted import warn_if_host_executes

    notice = warn_if_host_executes(server)
    say(pytestconfig, f"\n[yts] {server.describe()}", *([f"[yts] WARNING: {notice}"] if notice else []))
    yield server
    server.stop()


def say(config: pytest.Config, *lines: str) -> None:
    """Write to the terminal even from inside a fixture (output capture would swallow it otherwise)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if terminal is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        for line in lines:
            terminal.write_line(line)


def _describe_server(config: pytest.Config, server) -> None:
    import requests

    from harness import hostinfo

    try:
        metadata = requests.get(f"{server.endpoints.http_url}/v2", timeout=10).json()
    except (requests.RequestException, ValueError):
        metadata = {}
    report_environment(config, triton_launcher=server.kind, triton_version=metadata.get("version"),
                       triton_extensions=" ".join(metadata.get("extensions", [])) or None,
                       triton_image=getattr(server, "image", None), **hostinfo.gpu_description())


@contextlib.contextmanager
def http_client_for(server, network_timeout: float = 60.0):
    """`network_timeout` bounds every call, loads included (tritonclient's default is 60 s)."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.endpoints.http, concurrency=4, network_timeout=network_timeout)
    try:
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def grpc_client_for(server):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.endpoints.grpc)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def http_client(triton_server):
    with http_client_for(triton_server) as client:
        yield client


@pytest.fixture(scope="session")
def grpc_client(triton_server):
    with grpc_client_for(triton_server) as client:
        yield client
