"""--triton=auto|process|container|url → a launcher. auto: container when a Docker daemon answers."""

from __future__ import annotations

from harness.servers.base import ServerSettings, TritonServer

KINDS = ("auto", "process", "container", "url")


def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


def resolve_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"--triton must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == "auto":
        return "container" if docker_available() else "process"
    return kind


def create_server(kind: str, settings: ServerSettings, *, image: str | None = None, url: str | None = None) -> TritonServer:
    kind = resolve_kind(kind)
    if kind == "process":
        from harness.servers.process import ProcessServer

        return ProcessServer(settings)
    if kind == "container":
        from harness.servers.container import ContainerServer

        return ContainerServer(settings, image=image)
    if not url:
        raise ValueError("--triton=url needs --triton-url HOST:HTTP_PORT[,GRPC_PORT]")
    from harness.servers.url import UrlServer

    http, _, grpc = url.partition(",")
    http = http.removeprefix("http://")
    host = http.rsplit(":", 1)[0]
    return UrlServer(settings, http=http, grpc=grpc if ":" in grpc else f"{host}:{grpc or 8001}")
