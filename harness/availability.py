"""Which models of the repository under test this host can serve, decided from facts (each config, the
server's backends, the host's GPUs: harness.reference.loadable.host_needs), so that every check of a
model that cannot load HERE is "not tested on this host, because <model> needs <...>; <the way out>" —
once per model, never a traceback per test — while a model that fails to load for its own fault still
fails, quoting Triton. The server's load list leaves these models out (harness.plugin.triton_server).

What only loading tells is recorded as it is learnt (record_load_failures, from every server the run
starts and from the config suite's live load): a model that fails for the host's environment (a module the
server's Python lacks: harness.environment) joins the models this host cannot serve, once, with its way
out; one that fails for its own fault is reported once where it failed; the server starts again without
either, and every other check of that model is skipped under that one cause (skip_if_load_failed), never
repeated per check as an error."""

from __future__ import annotations

import graphlib
from pathlib import Path

import pytest

from harness import paths
from harness.session import coverage, manifest_for, source_repository
from harness.verdicts import NOT_SERVABLE_HERE, not_servable_here

_NEEDS = pytest.StashKey[dict]()
_ADAPTER = pytest.StashKey["Plan"]()  # the adapter's Plan; what it means for each model is in the coverage record
_LOAD_FAILURES = pytest.StashKey[dict]()  # model -> (reason, the host's: True | the model's own: False)
NGC_IMAGE = "nvcr.io/nvidia/tritonserver:<yy.mm>-py3"


def server_facts(config: pytest.Config) -> tuple[set[str] | None, frozenset[int] | None]:
    """(the server's backends, its GPUs): None where unknown (a running server elsewhere, an NGC image's
    backends); the host's GPUs for a server this run starts (empty without an NVIDIA driver)."""
    from harness import hostinfo
    from harness.reference import server_backends
    from harness.servers.choose import resolve_kind

    kind = config.getoption("--triton")
    if resolve_kind(kind) == "url":
        return None, None
    return server_backends(kind, config.getoption("--triton-image")), hostinfo.gpu_ids() or frozenset()


def host_needs(config: pytest.Config) -> dict[str, str]:
    """Model -> what this host lacks to serve it, for the repository under test (models declared `skip`
    are the manifest's business, not listed); computed once per run."""
    if _NEEDS not in config.stash:
        from harness.reference.loadable import host_needs as needs_of
        from harness.servers.choose import resolve_kind

        try:
            repository = source_repository(config)
        except Exception:  # the reference cannot be built here: the suites say so themselves
            repository = None
        adapter = adapter_plan(config)
        local = resolve_kind(config.getoption("--triton")) == "process"
        needs = needs_of(repository, *server_facts(config), adapted=frozenset(adapter.served) | set(adapter.refused),
                         local=local) if repository is not None else {}
        manifest = manifest_for(config) if repository is not None else None
        config.stash[_NEEDS] = {m: n for m, n in needs.items() if manifest is None or not manifest.skipped(m)}
        _record(config)
    return config.stash[_NEEDS]


def adapter_plan(config: pytest.Config):
    """What the ONNX Runtime adapter does on this run (harness.adapters.onnx_runtime): nothing with
    --no-adapter, or for a server other than the embedded one (an image or a running server has its own
    backends); else the repository's onnxruntime_onnx models, served or refused."""
    if _ADAPTER not in config.stash:
        from harness.adapters.onnx_runtime import Plan, plan
        from harness.servers.choose import resolve_kind

        found = Plan()
        if not config.getoption("--no-adapter", default=False) and resolve_kind(config.getoption("--triton")) == "process":
            named = onnx_for(config)
            try:
                found = plan(source_repository(config), server_facts(config)[0], named)
            except Exception:  # the reference cannot be built here: the suites say so themselves
                pass
        refused, labels = _adapter_verdicts(config, found)
        config.stash[_ADAPTER] = found
        record = coverage(config)
        record.adapter_refused, record.adapter_served = dict(sorted(refused.items())), dict(sorted(labels.items()))
    return config.stash[_ADAPTER]


def _adapter_verdicts(config: pytest.Config, found) -> tuple[dict[str, str], dict[str, str]]:
    """(model -> why its checks are not tested: Triton's onnxruntime backend would refuse it or a step
    of it; model -> the label every check of it carries: adapted, or an ensemble over an adapted step)."""
    from harness.reference.loadable import _configs, through_ensembles

    if not found.served and not found.refused:
        return {}, {}
    configs = _configs(source_repository(config))
    refused = {m: f"not tested: {why}" for m, why in found.refused.items()}
    through_ensembles(configs, refused, lambda blocked: f"not tested: its step {blocked[0]!r} is not served: "
                                                        + refused[blocked[0]].removeprefix("not tested: "))
    labels = dict(found.served)
    through_ensembles(configs, labels, lambda steps: f"{labels[steps[0]]} (its step {steps[0]!r})")
    return refused, labels


def onnx_for(config: pytest.Config) -> dict[str, Path]:
    """--onnx-for MODEL=FILE: the ONNX a TensorRT plan was built from, for the adapter to serve instead."""
    named = {}
    for declaration in config.getoption("--onnx-for", default=None) or ():
        model, _, file = declaration.partition("=")
        if not model or not file or not Path(file).is_file():
            raise pytest.UsageError(f"--onnx-for {declaration!r}: expected MODEL=FILE with FILE an ONNX file")
        named[model] = Path(file).resolve()
    return named


def adapter_refused(config: pytest.Config) -> dict[str, str]:
    """Model -> why its checks are not tested: Triton's onnxruntime backend would refuse it (or a step)."""
    adapter_plan(config)
    return coverage(config).adapter_refused


def adapter_labels(config: pytest.Config) -> dict[str, str]:
    """Model -> what every check of it says: served through the adapter (itself or a step of it)."""
    adapter_plan(config)
    return coverage(config).adapter_served


def way_out(needs: str) -> str:
    from harness.environment import ENV_PATH, IMAGE

    gpu, backend, env_file = "GPU" in needs, "backend" in needs, ENV_PATH in needs
    ways = []
    if gpu:
        ways.append("run on a GPU host" + (f" with --triton=container --triton-image {NGC_IMAGE}" if backend else ""))
    elif backend or not env_file:
        ways.append(f"run with --triton=container --triton-image {NGC_IMAGE}")
    if env_file:
        ways.append(f"provide the {ENV_PATH} file there, or run with {IMAGE}")
    return "; ".join(ways)


def reason(model: str, needs: str) -> str:
    return f"{model} needs {needs}; {way_out(needs)}"


def not_servable(config: pytest.Config) -> dict[str, str]:
    """Model -> why this host cannot serve it, with the way out: from its config (host_needs) or from its
    load failing for the host's environment (record_load_failures)."""
    host_needs(config)
    return coverage(config).not_servable


def load_failures(config: pytest.Config) -> dict[str, tuple[str, bool]]:
    return config.stash.setdefault(_LOAD_FAILURES, {})


def record_load_failures(config: pytest.Config, repository: Path, errors: dict[str, str]) -> None:
    """Models that failed to load (model -> Triton's reason): each environment cause (harness.environment)
    becomes the host's, any other stays the model's own; a model this host was already known not to serve
    (host_needs: a suite that loads a model by name, such as the batching bench, tried it anyway) is the
    host's under that known need, so the verdict states the cause once, in its words; an ensemble over a
    step that failed for the host is the host's too, so steps are judged before the ensembles over them
    (never in name order). Recorded once: the first reason learnt stands."""
    from harness.environment import environment_cause

    failures = load_failures(config)
    known_needs = config.stash.get(_NEEDS, {})  # computed at collection in a run
    steps = {model: _steps(Path(repository) / model) for model in errors}
    for model in _steps_first(steps):
        if model in failures:
            continue
        cause = reason(model, known_needs[model]) if model in known_needs else \
            environment_cause(Path(repository) / model, errors[model])
        host_steps = [step for step in steps[model] if failures.get(step, ("", False))[1]]
        if cause is None and host_steps:
            cause = f"{model} needs its step {host_steps[0]!r}, which cannot load here: {failures[host_steps[0]][0]}"
        failures[model] = (cause, True) if cause else (_first_line(errors[model]), False)
    _record(config)


def _steps(model_dir: Path) -> list[str]:
    """The models an ensemble's steps name, as Triton completes its config (none for any other model)."""
    from harness.checks.model import completed_config
    from harness.repository.config import ConfigError

    try:
        return [s.model_name for s in completed_config(model_dir).ensemble_scheduling.step]
    except (ConfigError, OSError):
        return []


def _steps_first(steps: dict[str, list[str]]) -> list[str]:
    """The failed models in an order where each comes after the failed steps it runs (a cycle, which
    Triton refuses anyway, in name order)."""
    graph = {model: sorted(s for s in model_steps if s in steps) for model, model_steps in sorted(steps.items())}
    try:
        return list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        return sorted(steps)


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "no reason given")


def skip_if_load_failed(config: pytest.Config, model: str | None) -> None:
    """A check of a model whose load failed, after that failure was reported once: skipped under that one
    cause — the host's ("not tested on this host, because ...") or the model's ("not tested, because MODEL
    failed to load: <Triton's reason>") — so the verdict lists it by count under it."""
    if model is None or model not in load_failures(config):
        return
    why, host = load_failures(config)[model]
    if host:
        not_servable_here(why)
    pytest.skip(f"not tested, because {model} failed to load: {why}")


def skip_if_unavailable(config: pytest.Config, *models: str) -> None:
    """For the suites' model-selecting fixtures: a model this host cannot serve is not tested."""
    reasons = not_servable(config)
    for model in models:
        if model in reasons:
            not_servable_here(reasons[model])
        if model in adapter_refused(config):
            pytest.skip(adapter_refused(config)[model])


def skip_if_only_the_host_blocks(config: pytest.Config, choose) -> None:
    """For a suite that picks one model to drive and found none: when `choose()` (the same choice with
    the host's limits ignored) finds one, this host is what stops it — not tested on this host, with
    that model's need and way out."""
    try:
        model = choose()
    except LookupError:
        return
    skip_if_unavailable(config, model)


def engine_absent_here(config: pytest.Config, entry, findings: list) -> list:
    """For the layout check: a model that needs a GPU this host lacks, whose engine file is absent (an
    engine is built on the GPU host that serves it, so it cannot be made here): those findings are not
    judged, and with none other left the check is not tested on this host, saying so."""
    needs = host_needs(config).get(entry.name)
    if not needs or "GPU" not in needs or not entry.model_filename:
        return findings
    from harness.checks.model import MODEL_SUFFIXES

    def nothing_there(finding) -> bool:  # no engine under any name (a misnamed one stays a finding)
        version = entry.path / Path(finding.file).parent.name
        return not any(p.name.endswith(MODEL_SUFFIXES) for p in version.iterdir()) if version.is_dir() else False

    rest = [f for f in findings if not (f.file.endswith("/" + entry.model_filename) and nothing_there(f))]
    if len(rest) < len(findings) and not rest:
        not_servable_here(f"{reason(entry.name, needs)} (its engine {entry.model_filename} is absent: it is built on "
                          "the GPU host that serves it)")
    return rest


def skip_if_nothing_servable(config: pytest.Config, served: list) -> None:
    """A suite that drives what the server serves (`served`: the models it can drive): with none, while
    models of the repository cannot be served here, every check is not tested on this host, naming them
    (not "the server serves no model"); where the ONNX Runtime adapter refused them (Triton's backend would,
    or the ONNX --onnx-for names does not fit), not tested, naming them the same way."""
    if served:
        return
    needs, refused = not_servable(config), adapter_refused(config)
    if needs:
        not_servable_here(f"nothing it can drive is served: {', '.join(sorted(needs))} cannot be served on this host "
                          "(each one's need and way out is listed once in the verdict)")
    if refused:
        pytest.skip(f"not tested, because nothing it can drive is served: {', '.join(sorted(refused))} not served "
                    "through the ONNX Runtime adapter (each one's cause is listed once in the verdict)")


def model_of(item: pytest.Item, models) -> str | None:
    """The model a parametrized check is about, where a parameter names one."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        for name in (value, *(getattr(value, a, None) for a in ("model", "name", "target"))):
            if isinstance(name, str) and name in models:
                return name
    return None


def offline_check(item: pytest.Item) -> bool:
    """One of the config suite's offline checks: it reads the files, which any host can, so neither what this
    host cannot serve nor what failed to load here stops it."""
    return Path(item.path).resolve().parent == paths.PROJECT_ROOT / "suites" / "config" and "live_server" not in item.fixturenames


def mark_unservable(config: pytest.Config, items: list[pytest.Item]) -> None:
    """At collection: a check parametrized by a model this host cannot serve is not tested, with the
    reason, except the config suite's offline checks."""
    needs, refused = host_needs(config), adapter_refused(config)
    if not needs and not refused:
        return
    for item in items:
        if offline_check(item):
            continue
        model = model_of(item, needs)
        if model is not None:
            item.add_marker(pytest.mark.skip(reason=NOT_SERVABLE_HERE + reason(model, needs[model])))
        elif (model := model_of(item, refused)) is not None:
            item.add_marker(pytest.mark.skip(reason=refused[model]))


def _record(config: pytest.Config) -> None:
    """The models this host cannot serve, as known now (host_needs, load failures), into the run's one coverage
    record (harness.session.Coverage), which these functions, the report and the verdict all read."""
    reasons = {model: reason(model, needs) for model, needs in config.stash.get(_NEEDS, {}).items()}
    reasons.update({model: why for model, (why, host) in load_failures(config).items() if host})
    coverage(config).not_servable = dict(sorted(reasons.items()))
