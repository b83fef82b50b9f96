"""The default CPU image, built locally because no registry is reachable (PLATFORM.md): a Debian
rootfs from debootstrap, `docker import`ed, then the nvidia-pytriton server files laid out like an NGC
image (`tritonserver` on PATH, backends in /opt/tritonserver/backends) so the launcher drives both
with the same flags and the same /models mount. Wheels are downloaded on the host: no network in the
build. The tag carries a hash of everything that goes in, so a change rebuilds and nothing else does."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from harness.paths import PROJECT_ROOT, cache_dir

BASE_TAG = "yts/debian-bookworm-python:1"
IMAGE_REPOSITORY = "yts/tritonserver-cpu"
# What the models' Python inside the image needs: the reference models import these.
MODEL_RUNTIME = ("numpy", "onnx", "onnxruntime", "pillow", "opencv-python-headless")
DEBIAN_PACKAGES = ("python3", "libpython3.11", "python3-pip", "ca-certificates")

DOCKERFILE = """\
FROM {base}
COPY wheels /tmp/wheels
RUN python3 -m pip install --no-index --no-deps --no-compile --target /opt/pytriton /tmp/wheels/nvidia_pytriton-*.whl \\
 && python3 -m pip install --no-index --find-links /tmp/wheels --break-system-packages --no-compile {requirements} \\
 && mkdir -p /opt/tritonserver/backends \\
 && cp -r /opt/pytriton/pytriton/tritonserver/backends/python /opt/tritonserver/backends/python \\
 && cp /opt/pytriton/pytriton/tritonserver/python_backend_stubs/3.11/triton_python_backend_stub /opt/tritonserver/backends/python/ \\
 && ln -s /opt/pytriton/pytriton/tritonserver/bin/tritonserver /usr/local/bin/tritonserver \\
 && rm -rf /tmp/wheels /root/.cache
ENV LD_LIBRARY_PATH=/opt/pytriton/nvidia_pytriton.libs
WORKDIR /opt/tritonserver
"""


def _pins() -> dict[str, str]:
    """Exact pins from pyproject.toml, so the image runs the versions the harness was tested with."""
    deps = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        name, _, version = dep.partition("==")
        pins[name.split("[")[0].strip().lower()] = version.strip()
    return pins


def requirements() -> list[str]:
    pins = _pins()
    return [f"{name}=={pins[name]}" if name in pins else name for name in MODEL_RUNTIME]


def default_tag() -> str:
    digest = hashlib.sha256()
    digest.update(DOCKERFILE.encode())
    digest.update(" ".join(requirements() + [pinned("nvidia-pytriton"), *DEBIAN_PACKAGES]).encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def pinned(name: str) -> str:
    return f"{name}=={_pins()[name]}"


def _progress(message: str) -> None:
    print(f"[yts image] {message}", file=sys.stderr, flush=True)


def _have(client, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _base_image(client) -> None:
    if _have(client, BASE_TAG):
        return
    if shutil.which("debootstrap") is None:
        raise RuntimeError("building the default CPU image needs debootstrap (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(dir=cache_dir("image-build")) as tmp:
        rootfs = Path(tmp) / "rootfs"
        _progress(f"debootstrap bookworm → {rootfs} (about a minute)")
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", "bookworm", str(rootfs)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        _progress(f"docker import → {BASE_TAG}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "-", BASE_TAG], stdin=tar.stdout, check=True, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise RuntimeError("tar of the debootstrap rootfs failed")


def _download_wheels(target: Path) -> None:
    """The image's Python is Debian bookworm's 3.11 on x86-64, as is this host's: plain host wheels fit."""
    if sys.version_info[:2] != (3, 11):
        raise RuntimeError("building the default image downloads cp311 wheels: run the harness on Python 3.11")
    pip = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(target)]
    subprocess.run([*pip, "--no-deps", pinned("nvidia-pytriton")], check=True)
    subprocess.run([*pip, *requirements()], check=True)


def ensure_image(tag: str | None = None) -> str:
    """Return a tag that exists locally, building the default CPU image when it is missing."""
    import docker

    client = docker.from_env()
    tag = tag or default_tag()
    if _have(client, tag):
        return tag
    if not tag.startswith(IMAGE_REPOSITORY + ":"):
        raise RuntimeError(f"image {tag!r} is not present locally and no registry is reachable: `docker load` it first")
    _base_image(client)
    context = cache_dir("image-build", "context")
    shutil.rmtree(context, ignore_errors=True)
    (context / "wheels").mkdir(parents=True)
    _progress("downloading wheels for the image on the host")
    _download_wheels(context / "wheels")
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=BASE_TAG, requirements=" ".join(requirements())))
    _progress(f"docker build → {tag}")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(context, ignore_errors=True)
    return tag
