"""Which models of a repository a given server can load: by each config's platform/backend against
the backends the server has, and its instance groups against the host's GPUs. Our embedded server has
the Python backend only (PLATFORM.md), so the reference repository's yolo_onnx/yolo_trt stay in the
repository (the config suite judges them) but out of the load list, and the server still starts
strict-ready. What a model needs that this host lacks is a fact of the host, never the model's fault
(harness.availability turns it into "not tested" verdicts)."""

from __future__ import annotations

from pathlib import Path

from harness.repository.config import CONFIG_NAME, ConfigError, ModelConfig

# platform -> the backend that serves it (Triton's platform names; "ensemble" is built in).
PLATFORM_BACKENDS = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
    "openvino": "openvino",
}
BUILT_IN = {"ensemble"}


def required_backend(config) -> str:
    if config.platform == "ensemble":
        return "ensemble"
    if config.backend:
        return config.backend
    return PLATFORM_BACKENDS.get(config.platform, config.platform or "<none>")


GPU_ONLY_BACKENDS = {"tensorrt"}  # a plan runs on a GPU whatever its instance group says
HOST = "host"  # `gpus` default: this host's GPUs (harness.hostinfo), for a server the harness starts here


def _resolve(gpus) -> frozenset[int] | None:
    if gpus == HOST:
        from harness import hostinfo

        return hostinfo.gpu_ids() or frozenset()
    return gpus


def _configs(repository: Path) -> dict[str, ModelConfig]:
    """Every config that parses, as Triton completes it (a `metadata`-only config beside a model.onnx
    needs the onnxruntime backend); one that does not parse is the config suite's finding, not a host fact."""
    from harness.checks.model import completed_config

    configs = {}
    for directory in sorted(Path(repository).iterdir()):
        if (directory / CONFIG_NAME).is_file():
            try:
                configs[directory.name] = completed_config(directory)
            except ConfigError:
                pass
    return configs


def _gpus_wanted(config: ModelConfig) -> set[int] | None:
    """GPU ids the instance groups ask for (empty: any GPU), or None where it runs on a CPU."""
    wanted = None
    for group in config.instance_group:
        if group.kind == group.KIND_GPU or (group.kind == group.KIND_AUTO and group.gpus):
            wanted = (wanted or set()) | set(group.gpus)
    if wanted is None and required_backend(config) in GPU_ONLY_BACKENDS:
        wanted = set()
    return wanted


def host_needs(repository: Path, backends: set[str] | None, gpus: frozenset[int] | None | str = HOST,
               adapted: frozenset[str] = frozenset(), local: bool = False) -> dict[str, str]:
    """Model name -> what this host lacks to serve it ("a GPU", "the tensorrt backend", "its step 'x',
    which needs a GPU"), from its config alone. `backends` None: the server's are unknown; `gpus` None:
    the server's GPUs are unknown (a running server elsewhere), empty: none; default: this host's.
    `adapted`: models the harness serves through its Python backend on CPU (harness.adapters), which need
    neither their own backend nor a GPU. `local`: the server runs on this host, so an EXECUTION_ENV_PATH
    this host lacks is a need too (harness.environment; in an image, the image may have it)."""
    from harness.environment import absent_env_path, lacking_env_path

    configs, gpus = _configs(repository), _resolve(gpus)
    needs = {}
    for name, config in configs.items():
        if name in adapted:
            continue
        lacks = []
        wanted = _gpus_wanted(config)
        if wanted is not None and gpus is not None:
            if not gpus:
                lacks.append("a GPU")
            elif wanted - gpus:
                lacks.append(f"GPU {sorted(wanted - gpus)} (this host has {sorted(gpus)})")
        backend = required_backend(config)
        if backends is not None and backend not in set(backends) | BUILT_IN:
            lacks.append(f"the {backend} backend (this server has {', '.join(sorted(backends))})")
        absent = absent_env_path(Path(repository) / name) if local else None
        if absent is not None:
            lacks.append(lacking_env_path(absent))
        if lacks:
            needs[name] = " and ".join(lacks)
    through_ensembles(configs, needs, lambda blocked: f"its step {blocked[0]!r}, which needs {needs[blocked[0]]}")
    return needs


def through_ensembles(configs: dict, reasons: dict[str, str], reason, missing_steps_block: bool = False) -> None:
    """An ensemble is only as servable as its steps: each ensemble with a step in `reasons` (or, with
    `missing_steps_block`, a step the repository lacks) gets `reason(blocked steps)`, until nothing changes."""
    changed = True
    while changed:
        changed = False
        for name, config in configs.items():
            if name in reasons or config.platform != "ensemble":
                continue
            blocked = [s.model_name for s in config.ensemble_scheduling.step
                       if s.model_name in reasons or (missing_steps_block and s.model_name not in configs)]
            if blocked:
                reasons[name] = reason(blocked)
                changed = True


def unloadable_models(repository: Path, backends: set[str], gpus: frozenset[int] | None | str = HOST) -> dict[str, str]:
    """Model name -> why this server cannot load it (a backend or GPU it lacks, or an ensemble step that
    is missing or unloadable)."""
    configs = _configs(repository)
    reasons = {name: f"needs {needs}" for name, needs in host_needs(repository, backends, gpus).items()}
    through_ensembles(configs, reasons, lambda blocked: f"ensemble step(s) {blocked} cannot load", missing_steps_block=True)
    return reasons


def loadable_models(repository: Path, backends_available: set[str] | None,
                    gpus: frozenset[int] | None | str = HOST) -> tuple[str, ...]:
    """The --load-model list: every model whose backend and GPUs (this host's by default; None:
    unknown) the server has; ("*",) when the server's backends are unknown (an NGC image, a running server)."""
    if backends_available is None:
        return ("*",)
    unloadable = unloadable_models(repository, backends_available, gpus)
    return tuple(d.name for d in sorted(Path(repository).iterdir())
                 if (d / CONFIG_NAME).is_file() and d.name not in unloadable)


def server_backends(kind: str, image: str | None = None) -> set[str] | None:
    """Backends of the server the launcher will start: the embedded server's backends folder; the
    locally built CPU image has the same (Python only); anything else is unknown (None)."""
    from harness.servers.choose import resolve_kind

    kind = resolve_kind(kind)
    if kind == "process" or (kind == "container" and not image):
        from harness.servers import serverfiles

        root = serverfiles.locate().root / "backends"
        return {d.name for d in root.iterdir() if d.is_dir()}
    return None
