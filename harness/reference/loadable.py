"""Which models of a repository a given server can load: by each config's platform/backend against
the backends the server has. Our embedded server has the Python backend only (PLATFORM.md), so the
reference repository's yolo_onnx/yolo_trt stay in the repository (the config suite judges them) but
out of the load list, and the server still starts strict-ready."""

from __future__ import annotations

from pathlib import Path

from harness.repository.config import CONFIG_NAME, read_config

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


def unloadable_models(repository: Path, backends: set[str]) -> dict[str, str]:
    """Model name -> why this server cannot load it (missing backend, or an ensemble step that is)."""
    configs = {d.name: read_config(d) for d in sorted(Path(repository).iterdir()) if (d / CONFIG_NAME).is_file()}
    available = set(backends) | BUILT_IN
    reasons = {name: f"needs the {required_backend(c)!r} backend (server has {sorted(backends)})"
               for name, c in configs.items() if required_backend(c) not in available}
    changed = True
    while changed:  # an ensemble is only as loadable as its steps
        changed = False
        for name, config in configs.items():
            if name in reasons or config.platform != "ensemble":
                continue
            blocked = [s.model_name for s in config.ensemble_scheduling.step
                       if s.model_name in reasons or s.model_name not in configs]
            if blocked:
                reasons[name] = f"ensemble step(s) {blocked} cannot load"
                changed = True
    return reasons


def loadable_models(repository: Path, backends_available: set[str] | None) -> tuple[str, ...]:
    """The --load-model list: every model whose backend the server has; ("*",) when the server's
    backends are unknown (an NGC image, a running server)."""
    if backends_available is None:
        return ("*",)
    unloadable = unloadable_models(repository, backends_available)
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
