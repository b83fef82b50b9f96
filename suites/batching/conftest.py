"""suites/batching measures for minutes, so it runs only under `pytest --benchmark-only`; in a plain
conformance run its tests are skipped with that reason. One scratch repository per session holds the
models under test, their `NAME__unbatched` twins and the null model, behind one server. Its options (--batching-*) live in harness.load.options, registered by the
plugin, so they work with a bare `pytest --benchmark-only` too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.load import ClientSpec, LoadResult, LoadSettings, payload_from_config, run_load
from harness.load.batching import (TWIN_SUFFIX, config_verdicts, is_ensemble, repository_batches,
                                   sweep_point, write_unbatched_twin)
from harness.load.null_model import NAME as NULL_MODEL, write_null_model
from harness.load.payload import Payload
from harness.load.results import load_result, read_raw, write_raw
from harness.load.server_stats import StatisticsProbe
from harness.checks.model import completed_config
from harness.plugin import stop_at_suite_end

SHM_MIN_BYTES = 1 << 20  # below this the wire's copy costs little next to an inference
MAX_PROCESSES = max(1, min(8, (os.cpu_count() or 2) // 2))  # load processes a sweep may grow to
from harness.repository.config import CONFIG_NAME, read_config
from harness.repository.sizing import read_configs
from harness.verdicts import NOT_BATCHING

HERE = Path(__file__).parent


def measuring(config: pytest.Config) -> bool:
    """`--benchmark-only`, or a certification run: its verdict needs the batching checks and the audit."""
    return bool(config.getoption("benchmark_only") or config.getoption("--certify-profile"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if measuring(config):
        return
    skip = pytest.mark.skip(reason="batching benchmarks run with `pytest --benchmark-only` or a certification run "
                                   "(they measure for minutes)")
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(skip)


def batching_targets(config: pytest.Config) -> tuple[list[str], dict[str, str]]:
    """The models measured, and every other model with why not. Ensembles batch inside their steps; a
    step without dynamic_batching is pipeline glue (pre/post-processing) reached through its ensemble;
    a step that batches is measured like any model; `skip` models never are."""
    if config.getoption("--batching-models"):
        return [m.strip() for m in config.getoption("--batching-models").split(",") if m.strip()], {}
    source = _source(config)
    configs = {p.name: completed_config(p) for p in sorted(source.iterdir()) if (p / CONFIG_NAME).is_file()}
    steps = {step.model_name: name for name, c in configs.items() if is_ensemble(c)
             for step in c.ensemble_scheduling.step}
    from harness.session import manifest_for

    manifest = manifest_for(config)
    reasons = {}
    for name, c in configs.items():
        if manifest.skipped(name):
            reasons[name] = f"{manifest.source} marks it skip"
        elif is_ensemble(c):
            reasons[name] = "an ensemble (it batches inside its steps)"
        elif name in steps and not c.HasField("dynamic_batching"):
            reasons[name] = f"a step of ensemble {steps[name]!r} without dynamic_batching (reached through it)"
    return [name for name in configs if name not in reasons], reasons


def _source(config: pytest.Config) -> Path:
    from harness.session import source_repository

    return source_repository(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model" in metafunc.fixturenames:
        if not measuring(metafunc.config):
            metafunc.parametrize("model", ["all"])
            return
        models, reasons = batching_targets(metafunc.config)
        from harness.session import manifest_for

        configs = {name: c for name, c in read_configs(_source(metafunc.config)).items()
                   if not manifest_for(metafunc.config).skipped(name)}
        if configs and not metafunc.config.getoption("--batching-models") and not repository_batches(configs):
            why = "; ".join(reason for c in configs.values() if not is_ensemble(c) for reason in config_verdicts(c))
            models = [pytest.param(None, id="none", marks=pytest.mark.skip(reason=f"{NOT_BATCHING}: {why}"))]
        elif not models:  # one test saying why, not pytest's empty-parameter-set skip
            why = "; ".join(f"{name}: {reason}" for name, reason in reasons.items()) or "it has no models"
            models = [pytest.param(None, id="none", marks=pytest.mark.skip(
                reason=f"not tested, because no model of the repository can be driven: {why}"))]
        metafunc.parametrize("model", models)


class BatchingBench:
    """The session's measurements: started lazily (a config verdict needs no server), cached per
    (model, concurrency, protocol), each written raw to disk before it is read back and judged."""

    def __init__(self, pytestconfig: pytest.Config, source: Path):
        from harness.plugin import serving_copy

        self.pytestconfig = pytestconfig
        self.option = pytestconfig.getoption
        self.repository = serving_copy(pytestconfig, source)
        self.configs = {}
        for model in batching_targets(pytestconfig)[0]:
            if not (self.repository / model / CONFIG_NAME).is_file():
                raise pytest.UsageError(f"--batching-models: {model} is not a model in {source}")
            self.configs[model] = completed_config(self.repository / model)
            if not config_verdicts(self.configs[model]):
                self.configs[model + TWIN_SUFFIX] = completed_config(self.repository / write_unbatched_twin(self.repository, model))
        write_null_model(self.repository)
        self.configs[NULL_MODEL] = read_config(self.repository / NULL_MODEL)
        report = self.option("--report-dir")
        from harness.paths import cache_dir

        self.report_dir = Path(report) / "batching" if report else cache_dir("reports", "batching")
        self.report_dir.mkdir(parents=True, exist_ok=True)
        self.server = None
        self._sizer = None
        self._cache: dict[tuple, tuple[LoadResult, Path]] = {}
        self._capacities: dict = {}
        # --load-engine native|locust (harness.plugin); getoption's default keeps this working without it
        self.engine = pytestconfig.getoption("--load-engine", default="native") or "native"
        self.load_workers = int(pytestconfig.getoption("--load-workers", default=2) or 2)

    def start(self):
        if self.server is None:
            from harness.plugin import start_server

            # Only the echo model at start: each model loads when first measured, so one that this
            # server cannot load (a backend it lacks) is skipped with Triton's reason, not fatal to all.
            self.server = start_server(self.pytestconfig, self.repository, load_models=(NULL_MODEL,))
        return self.server

    def run(self, spec: ClientSpec, settings: LoadSettings, probe=None) -> LoadResult:
        """One measurement on the session's engine: the native generator, or Locust's master with
        --load-workers local workers (harness.load.locust_engine), both measured the same way."""
        if self.engine == "locust":
            from harness.load.locust_engine import run_locust

            workers = min(self.load_workers, settings.concurrency) if settings.mode == "concurrency" else self.load_workers
            return run_locust(spec, settings, probe, workers=workers)
        return run_load(spec, settings, probe)

    def settings(self, concurrency: int, rate: float = 0.0, processes: int | None = None) -> LoadSettings:
        """Closed loop at `concurrency`, or (rate > 0) Poisson arrivals at `rate` requests/s (seeded), from
        `processes` load processes (default --batching-processes)."""
        common = dict(window_s=self.option("--batching-window"), warmup_s=self.option("--batching-warmup"),
                      max_windows=self.option("--batching-max-windows"))
        processes = processes or self.option("--batching-processes")
        if rate > 0:
            return LoadSettings(mode="poisson", rate=rate, processes=processes, seed=1, **common)
        return LoadSettings(concurrency=concurrency, processes=min(processes, concurrency), **common)

    def payload(self, model: str) -> Payload:
        """Sized from the repository (ONNX graphs, the ensemble step that feeds a -1 dim), within the
        request byte bound (harness.repository.sizing); inputs declared in [inputs.NAME] hold the values of
        the payload's image."""
        from harness.session import manifest_for
        from harness.repository.layouts import read_layout

        manifest = manifest_for(self.pytestconfig)
        if self._sizer is None:
            from harness.repository.sizing import Sizer

            self._sizer = Sizer({**read_configs(self.repository), **self.configs}, self.repository, manifest.imgsz)
        config = self.configs[model]
        return payload_from_config(config, sizer=self._sizer, layout=read_layout(config, manifest.layout(model), model))

    def shared_memory(self, model: str, protocol: str) -> bool:
        """Whether this model's requests go through system shared memory (--batching-shared-memory): gRPC,
        the native engine, a server on this host (the process launcher), tensors only, >= SHM_MIN_BYTES."""
        choice = self.option("--batching-shared-memory")
        if choice == "none" or protocol != "grpc" or self.engine != "native":
            return False
        payload = self.payload(model)
        local = self.start().kind == "process"
        if choice == "system" and not local:
            raise pytest.UsageError(f"--batching-shared-memory system: the {self.server.kind} server does not share "
                                    "this host's /dev/shm (use the process launcher)")
        tensors = all(t.datatype != "BYTES" for t in payload.tensors)
        return local and tensors and (choice == "system" or payload.nbytes >= SHM_MIN_BYTES)

    def transport(self, model: str) -> str:
        protocol = self.option("--batching-protocol")
        return "system shared memory" if self.shared_memory(model, protocol) else f"{protocol} over the wire"

    def url(self, protocol: str) -> str:
        server = self.start()
        return server.endpoints.grpc if protocol == "grpc" else server.endpoints.http

    def require_ready(self, model: str) -> None:
        """A model this server cannot load (e.g. a backend the CPU process server lacks) is skipped: one known
        not to be servable here (or refused by the ONNX Runtime adapter) under that known cause, never loaded
        to learn it again as if the model were at fault."""
        import tritonclient.http as httpclient

        from tritonclient.utils import InferenceServerException

        from harness.availability import skip_if_unavailable

        skip_if_unavailable(self.pytestconfig, model)
        client = httpclient.InferenceServerClient(self.start().endpoints.http, network_timeout=300)
        try:
            if not client.is_model_ready(model) and self.server.controls_repository:
                try:
                    client.load_model(model)
                except InferenceServerException as error:
                    from harness.availability import record_load_failures, skip_if_load_failed

                    record_load_failures(self.pytestconfig, self.repository, {model: str(error)})
                    skip_if_load_failed(self.pytestconfig, model)
            if not client.is_model_ready(model):
                index = {m["name"]: m for m in client.get_model_repository_index()}
                pytest.skip(f"{model} is not loaded on this server: {index.get(model, {}).get('reason', 'not ready')}")
        finally:
            client.close()

    def measure(self, model: str, concurrency: int, protocol: str | None = None, repeat: int = 0,
                rate: float = 0.0, processes: int | None = None) -> tuple[LoadResult, Path]:
        """`repeat` > 0 measures the same point again (interleaved comparisons), kept apart in the cache;
        `rate` > 0 measures open loop (Poisson arrivals) instead of at `concurrency`. The GPU's utilisation
        through the run comes with the result where the server reports GPU metrics."""
        from harness.load.gpu_usage import GpuSampler

        protocol = protocol or self.option("--batching-protocol")
        key = (model, concurrency, protocol, repeat, self.engine, rate, processes)
        if key not in self._cache:
            self.require_ready(model)
            spec = ClientSpec(protocol, self.url(protocol), self.payload(model),
                              shared_memory=self.shared_memory(model, protocol))
            probe = StatisticsProbe(self.start().endpoints.grpc, model)
            settings = self.settings(concurrency, rate, processes)
            try:
                with GpuSampler(self.start().endpoints.metrics) as gpu:
                    result = self.run(spec, settings, probe)
            finally:
                probe.close()
            result.gpu = gpu.summary(skip_s=settings.warmup_s)
            knob = f"poisson{rate:g}" if rate else f"c{concurrency}"
            path = write_raw(self.report_dir, f"{model}-{protocol}-{knob}" + (f"-r{repeat}" if repeat else "")
                             + ("-locust" if self.engine == "locust" else ""),
                             result.to_dict())
            self._cache[key] = (load_result(read_raw(path)), path)
        return self._cache[key]

    def capacity(self, model: str):
        """The closed-loop sweep up to saturation (harness.load.capacity), once per model."""
        from harness.load.capacity import Point, find_capacity

        if model not in self._capacities:
            def point(concurrency: int, processes: int) -> Point:
                result, raw = self.measure(model, concurrency, processes=processes)
                return Point(concurrency, processes, result.throughput, result.latency_ms["p99"], result.client_cpu,
                             {**sweep_point(result, model), "raw": str(raw)})

            self._capacities[model] = find_capacity(point, self.option("--latency-budget-ms"),
                                                    self.option("--batching-max-sweep-concurrency"),
                                                    max_processes=max(self.option("--batching-processes"), MAX_PROCESSES),
                                                    start=1)
        return self._capacities[model]

    def measured(self) -> list[LoadResult]:
        return [result for result, _ in self._cache.values()]

    def stop(self):
        if self.server is not None:
            self.server.stop()


@pytest.fixture(scope="session")
def bench(pytestconfig, repository_source):
    bench = BatchingBench(pytestconfig, repository_source)
    stop_at_suite_end(pytestconfig, "batching", bench.stop)
    yield bench
    bench.stop()
