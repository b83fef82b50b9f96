"""The lifecycle suite runs its own server, in explicit model-control mode, on its own scratch copy
of the repository (it adds, breaks and removes versions), with every model this host can load, and
reloads one model (harness.lifecycle.target): `--lifecycle-model`, else of the models it can drive
(never a `skip` one, an ensemble, or a step fed by other steps) the one with `latest { num_versions: 2 }`,
else the first Python-backend model, else the first; none → "not tested, because…" naming each model's
reason. The ensembles that use it get traffic too.

`--lifecycle-driver MODULE:ATTR` swaps the promotion driver (harness.lifecycle.driver.Driver) for a
wrapper under test, e.g. fixtures/lifecycle/unload_before_load.py:UnloadBeforeLoad — that is how
tests/ proves the checks catch a non-conforming promotion. Pass options together with this folder."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from harness.plugin import say, serving_copy, start_server, stop_at_suite_end

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("yts-lifecycle", "yolo-triton-suite lifecycle suite")
    group.addoption("--lifecycle-model", default=None, help="model to reload (default: latest{2} model, "
                    "else the first Python-backend model)")
    group.addoption("--lifecycle-driver", default=None, metavar="MODULE:ATTR",
                    help="promotion driver class under test (default harness.lifecycle.driver:Driver)")
    group.addoption("--lifecycle-clients", type=int, default=16, help="concurrent clients (default 16)")
    group.addoption("--lifecycle-lead-s", type=float, default=1.0,
                    help="seconds of traffic before each load (default 1.0)")
    group.addoption("--lifecycle-tail-s", type=float, default=1.5,
                    help="seconds of traffic after each load returns (default 1.5)")
    group.addoption("--lifecycle-switch-bound-s", type=float, default=5.0,
                    help="latest a request answered by the old version may be sent after the new one's load returned "
                         "(cut-over bound; default 5.0)")
    group.addoption("--lifecycle-cycles", type=int, default=12,
                    help="unload/load stress cycles (default 12: the first half warms the server up)")
    group.addoption("--lifecycle-stress-s", type=float, default=40.0,
                    help="time bound of the stress test; fewer cycles run when it is reached (default 40: 12 cycles "
                         "take ~30 s on 2 CPU cores; on an H100 a cycle of the GPU reference build takes ~4.7 s, its "
                         "stubs starting CUDA, so ~8 run there)")
    group.addoption("--lifecycle-rss-growth-mb", type=float, default=64.0,
                    help="largest rise of the server memory floor across stress cycles (default 64 MB)")


@dataclass(frozen=True)
class Settings:
    clients: int
    lead_s: float
    tail_s: float
    switch_bound_s: float
    cycles: int
    stress_s: float
    rss_growth_mb: float


@pytest.fixture(scope="session")
def lifecycle_settings(pytestconfig) -> Settings:
    get = pytestconfig.getoption
    return Settings(get("--lifecycle-clients"), get("--lifecycle-lead-s"), get("--lifecycle-tail-s"),
                    get("--lifecycle-switch-bound-s"), get("--lifecycle-cycles"), get("--lifecycle-stress-s"),
                    get("--lifecycle-rss-growth-mb"))


# The stress test judges the server's memory floor across unload/load cycles. With glibc's default of 8 malloc
# arenas a core, tritonserver's anonymous memory climbs for ~17 cycles under traffic as thread after thread's arena
# keeps its high-water mark of request buffers (2 cores: 160 -> ~350 MB, then flat through cycle 24), and the second
# half of 12 cycles read +96 MB of a 142 MB bound in CI, with nothing leaked. Two arenas: flat from the start (140-200
# MB, floor growth +0.1 MB over 24 cycles), so what rises is what the server keeps.
BOUNDED_ARENAS = {"MALLOC_ARENA_MAX": "2"}


@pytest.fixture(scope="session")
def deployment(pytestconfig, repository_source, manifest):
    from harness.availability import load_failures, skip_if_load_failed, skip_if_only_the_host_blocks
    from harness.lifecycle.deployment import Deployment
    from harness.lifecycle.driver import load_driver
    from harness.lifecycle.target import NoTarget, choose_model, dependent_ensembles, models_to_load
    from harness.reference.loadable import loadable_models, server_backends, unloadable_models
    from harness.repository.sizing import read_configs

    if pytestconfig.getoption("--triton") == "url":
        pytest.skip("the lifecycle suite mutates the repository: it needs a server it starts (not --triton=url)")
    try:
        driver_class = load_driver(pytestconfig.getoption("--lifecycle-driver"))
    except (ValueError, ImportError, AttributeError) as error:
        raise pytest.UsageError(f"--lifecycle-driver: {error}") from error
    scratch = serving_copy(pytestconfig, repository_source)
    backends = server_backends(pytestconfig.getoption("--triton"), pytestconfig.getoption("--triton-image"))
    load = loadable_models(scratch, backends)
    for attempt in range(2):  # a model that fails to load at the first start is recorded once: choose again
        unloadable = unloadable_models(scratch, backends) if backends is not None else {}
        unloadable.update({m: f"failed to load: {why}" for m, (why, _) in load_failures(pytestconfig).items()})
        try:
            model = choose_model(scratch, pytestconfig.getoption("--lifecycle-model"), manifest, unloadable)
        except NoTarget as error:
            skip_if_only_the_host_blocks(pytestconfig, lambda: choose_model(scratch, None, manifest, {}))
            pytest.skip(str(error))
        # The model, the ensembles built on it and their steps: a reload also reloads those ensembles, and their
        # traffic runs alongside (a pinned step version the policy retires is caught there)
        configs = read_configs(scratch)
        dependents = tuple(e for e in dependent_ensembles(configs, model) if e not in unloadable and not manifest.skipped(e))
        needed = models_to_load(configs, model, dependents)
        serve = tuple(m for m in load if m in needed) if load != ("*",) else needed
        deployment = Deployment(
            lambda: start_server(pytestconfig, scratch, model_control="explicit", load_models=serve,
                                 environment=BOUNDED_ARENAS),
            scratch, model, driver_class, dependents, manifest)
        if model not in load_failures(pytestconfig) and not set(dependents) & set(load_failures(pytestconfig)):
            break
        deployment.stop()
        if attempt:
            skip_if_load_failed(pytestconfig, model)
            pytest.skip(f"not tested, because ensembles using {model} failed to load: "
                        f"{sorted(set(dependents) & set(load_failures(pytestconfig)))}")
    say(pytestconfig, f"\n[yts lifecycle] model {model!r} with {driver_class.__name__}"
        f"{f', ensembles using it driven too: {list(dependents)}' if dependents else ''}; {deployment.server.describe()}")
    stop_at_suite_end(pytestconfig, "lifecycle", deployment.stop)
    yield deployment
    deployment.stop()


@pytest.fixture(autouse=True)
def baseline(request):
    """Every test starts from the repository as copied, loaded and ready, and leaves it so."""
    yield
    from harness.servers import cleanup

    if "deployment" in request.fixturenames and not cleanup.interrupted():  # an interrupted run just stops
        request.getfixturevalue("deployment").restore()


@pytest.fixture
def report(record_property):
    """report(record, **numbers): the counts (sent, failed, per version) and measurements of a test,
    into its user_properties (junit XML, --report-dir) and the summary table."""

    def report_(record=None, **numbers):
        entry = dict(record.counts()) if record is not None else {}
        entry.update({k: round(v, 3) if isinstance(v, float) else v for k, v in numbers.items()})
        record_property("lifecycle", entry)
        return entry

    return report_


def pytest_configure(config) -> None:
    config.pluginmanager.register(LifecycleTable(config), "yts-lifecycle-table")


class LifecycleTable:
    """Collects each test's `lifecycle` user property and prints one table at the end (and writes
    lifecycle.json under --report-dir): the counts the issue asks to see, per test and in total."""

    def __init__(self, config):
        self.config = config
        self.rows: list[tuple[str, str, dict]] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call":
            self.rows += [(report.nodeid.split("::", 1)[-1], report.outcome, value)
                          for key, value in report.user_properties if key == "lifecycle"]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.rows:
            return
        terminalreporter.section("lifecycle: requests per test")
        terminalreporter.write_line(f"{'test':52} {'outcome':8} {'sent':>7} {'failed':>7}  per version, numbers")
        total = failed = 0
        for name, outcome, entry in self.rows:
            sent, bad = entry.get("sent", 0), entry.get("failed", 0)
            total, failed = total + sent, failed + bad
            rest = ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ("sent", "failed"))
            terminalreporter.write_line(f"{name[:52]:52} {outcome:8} {sent:>7} {bad:>7}  {rest}")
        terminalreporter.write_line(f"{'total':52} {'':8} {total:>7} {failed:>7}")
        report_dir = self.config.getoption("--report-dir")
        if report_dir is not None:
            report_dir.mkdir(parents=True, exist_ok=True)
            (report_dir / "lifecycle.json").write_text(json.dumps(
                [{"test": n, "outcome": o, **e} for n, o, e in self.rows], indent=2))
