"""The config suite runs every check once per model of the repository under test (`--repo`, else
the reference repository), so a failure names the model in its test id.

The live checks get their own server: started with no model loaded, each model then loaded by its
own test through the repository API. A model Triton refuses fails only its own test (with Triton's
reason), and a model whose backend the server lacks is skipped, instead of one bad model keeping the
whole server from becoming ready."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checks import NotApplicable, format_findings, list_models, load_entry
from harness.verdicts import not_applicable

ADDITIONS = pytest.StashKey[dict]()
COMPLETED = pytest.StashKey[dict]()


def _models(config: pytest.Config) -> list:
    repo = config.getoption("--repo")
    if repo is None:
        try:
            from harness.session import source_repository

            repo = source_repository(config)
        except Exception as error:  # the reference repository cannot be built on this machine (yet)
            return [pytest.param(None, id="no-repository", marks=pytest.mark.skip(
                reason=f"no repository under test: the reference repository could not be built ({error}); pass --repo"))]
    repo = Path(repo)
    if not repo.is_dir():
        raise pytest.UsageError(f"--repo {repo}: not a directory")
    models = list_models(repo)
    if not models:
        raise pytest.UsageError(f"--repo {repo}: no model directories in it")
    return models


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model" in metafunc.fixturenames:
        if ADDITIONS not in metafunc.config.stash:
            metafunc.config.stash[ADDITIONS] = {}
        metafunc.parametrize("model", _models(metafunc.config))


@pytest.fixture
def entry(pytestconfig: pytest.Config, repository_source: Path, model: str):
    """The model in the repository as given (read only): a relative symlink is judged where it
    really points, not where it would point from the scratch copy the server gets. Its config is the
    one Triton will complete; what completion fills in is kept for the end-of-run summary."""
    found = load_entry(repository_source, model)
    if found.completion is not None and (found.completion.filled or found.completion.notes):
        pytestconfig.stash.setdefault(COMPLETED, {})[model] = found.completion
    return found


def _judge(check, *args):
    try:
        findings = check(*args)
    except NotApplicable as reason:
        if str(reason).startswith("not tested"):
            pytest.skip(str(reason))
        not_applicable(str(reason))
    if findings:
        pytest.fail(format_findings(findings), pytrace=False)


@pytest.fixture
def judge():
    """Run a check: skip when it has nothing to judge, fail with every finding in plain words."""
    return _judge


@pytest.fixture(scope="module")
def live_server(pytestconfig: pytest.Config, repository: Path):
    """Not the plugin's triton_server: nothing loaded at start (see the module docstring), and a name of
    its own, so neither this server nor the session's clients leak into other suites of the same run.
    Stopped once the live checks' module is done: on an 80 GB GPU its eight yolo_e2e instances (1.5 GiB
    each) beside the next suite's server, whose instances peak at 7.4 GiB each while they compile, ran the
    H100 out of memory."""
    from harness.plugin import say, start_server

    server = start_server(pytestconfig, repository, load_models=())
    say(pytestconfig, f"\n[yts] {server.describe()} (config suite: models load one by one)")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def live_clients(pytestconfig: pytest.Config, live_server):
    """(HTTP, gRPC) clients of the live server. Loads go through the HTTP client, and a model can take
    as long to load as the server to start (the GPU build compiles eight instances: over a minute on the
    H200), so its timeout is the startup timeout, not tritonclient's 60 s."""
    from harness.plugin import grpc_client_for, http_client_for

    timeout = pytestconfig.getoption("--triton-startup-timeout")
    with http_client_for(live_server, network_timeout=timeout) as http, grpc_client_for(live_server) as grpc:
        yield http, grpc


@pytest.fixture
def record_additions(pytestconfig: pytest.Config, model: str):
    """Keep Triton's auto-complete additions for the end-of-run summary."""
    def record(additions: dict) -> None:
        pytestconfig.stash.setdefault(ADDITIONS, {})[model] = additions
    return record


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Triton's auto-complete: what the offline checks completed as Triton will, and the fields the
    server added to each config, reported apart from failures."""
    completed = config.stash.get(COMPLETED, {})
    if completed:
        terminalreporter.section("Completed as Triton will complete it (judged as completed; not failures)")
        for model, completion in sorted(completed.items()):
            filled = ", ".join(f"{key}={value!r}" for key, value in sorted(completion.filled.items()))
            terminalreporter.write_line(f"{model}: {filled or 'nothing'}"
                                        + "".join(f"\n  not completed offline: {note}" for note in completion.notes))
    additions = config.stash.get(ADDITIONS, {})
    if not any(additions.values()):
        return
    terminalreporter.section("Triton auto-complete additions (not failures)")
    for model, fields in sorted(additions.items()):
        shown = ", ".join(f"{path}={value!r}" for path, value in sorted(fields.items()))
        terminalreporter.write_line(f"{model}: {shown}")
