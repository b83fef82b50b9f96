#!/usr/bin/env bash
# The suite on a GPU host without network (the H200 machine: Python 3.12 with torch, numpy 2): a venv
# with numpy 1.26 over the machine's torch Python, the carried wheels and Triton server files (.gpu/,
# made by benchmarks/pack_gpu.sh), `yts` on PATH; then the command. Run from the repository root:
#   bash benchmarks/gpu_env.sh yts certify --repo /tmp/gpu-ref --report-dir $OUT/report
#   bash benchmarks/gpu_env.sh python -m pytest suites --benchmark-only
# Needs (carried, ignored paths):
#   .gpu/site.tar.xz      cp312 wheels unpacked: numpy==1.26.4 ml_dtypes==0.5.4 (the machine's is built for
#                         numpy 2 only) tritonclient==2.73.0 (+ geventhttpclient, gevent, greenlet, zope.*,
#                         brotli for its HTTP client) python-rapidjson pycocotools onnxslim pytest docker
#                         testcontainers python-dotenv
#   .gpu/server.tar.xz    from nvidia-pytriton 0.7.0: pytriton/tritonserver/{bin,backends},
#                         python_backend_stubs/3.12, nvidia_pytriton.libs minus libpython3*, an empty
#                         pytriton/__init__.py
#   optional: .gpu/torchvision.tar.xz (used when the machine has no torchvision), .gpu/cudnn_fe.tar.xz
#   (benchmarks/probes/fusion.py), .gpu/wrk.tar.xz (wrk for the generator-fidelity check), .gpu/fallback.tar.xz
#   (grpcio and protobuf, unpacked only when the machine's are too old for tritonclient's generated code)
# Why a venv: the Python backend stub returns empty tensors under numpy 2 (shared/PLATFORM.md) and embeds
# the first python3 on PATH; ProcessServer puts sys.executable's folder first. The machine's python is
# itself a venv: a venv made from it sees only the base interpreter's site-packages, so a .pth adds the
# torch venv's site-packages after ours (ours win). Setup runs once per venv ($YTS_GPU_VENV, default /tmp/v).
set -u
BASE=${YTS_BASE_PYTHON:-/opt/torch/.venv/bin/python3}
V=${YTS_GPU_VENV:-/tmp/v}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if [ ! -f "$V/.yts-ready" ]; then
  {
    echo "== setup $(date -u +%FT%TZ)"
    "$BASE" -m venv --without-pip --system-site-packages "$V" || exit 1
    SP=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$BASE" -c 'import site; print("\n".join(site.getsitepackages()))' > "$SP/zz_base_site.pth"
    echo "$ROOT" > "$SP/yts_checkout.pth"  # the harness package and its pytest plugin (root conftest.py)
    # The wheels, unpacked (a wheel is a zip of site-packages; xz packs them 40 % smaller than pip's zips)
    tar -xJf .gpu/site.tar.xz -C "$SP" || exit 1
    if ! "$V/bin/python" -c 'import tritonclient.grpc, tritonclient.grpc.aio' 2>/dev/null; then
      "$V/bin/python" -c 'import tritonclient.grpc' 2>&1 | tail -1
      echo "tritonclient.grpc does not import with this machine's grpcio/protobuf: unpacking the carried ones"
      tar -xJf .gpu/fallback.tar.xz -C "$SP" || exit 1
    fi
    if ! "$V/bin/python" -c 'import torchvision.io' 2>/dev/null && [ -f .gpu/torchvision.tar.xz ]; then
      echo "no importable torchvision here: unpacking the carried torchvision 0.26.0 (nvJPEG decode)"
      tar -xJf .gpu/torchvision.tar.xz -C "$SP" || exit 1
    fi
    if ! "$V/bin/python" -c 'import cv2' 2>/dev/null; then
      echo "this machine's cv2 does not import beside numpy 1.26: installing benchmarks/cv2_fallback"
      cp -r benchmarks/cv2_fallback/cv2 "$SP/cv2"
    fi
    tar -xJf .gpu/server.tar.xz -C "$SP" || exit 1
    if [ -f .gpu/cudnn_fe.tar.xz ]; then tar -xJf .gpu/cudnn_fe.tar.xz -C "$SP" || exit 1; fi
    if [ -f .gpu/wrk.tar.xz ]; then mkdir -p "$V/wrk" && tar -xJf .gpu/wrk.tar.xz -C "$V/wrk"; fi
    printf '#!/bin/sh\nexec "%s/bin/python" -m harness.cli "$@"\n' "$V" > "$V/bin/yts" && chmod +x "$V/bin/yts"
    "$V/bin/python" - <<'PY'
import importlib
for name in ("numpy", "torch", "torchvision", "pytest", "cv2", "onnx", "onnxruntime", "tritonclient.grpc",
             "tritonclient.http", "testcontainers", "pycocotools", "google.protobuf", "grpc", "harness.plugin"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', 'ok')} {getattr(module, '__file__', '')}")
    except Exception as error:
        print(f"{name} NOT IMPORTABLE: {type(error).__name__}: {error}")
PY
    touch "$V/.yts-ready"
    echo "== ready $(date -u +%FT%TZ)"
  } 2>&1 | tee "${YTS_GPU_SETUP_LOG:-/dev/null}" >&2
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
fi
# The stub needs the base interpreter's libpython; sysconfig's LIBDIR is what ServerFiles adds, this is a
# second guess beside the real executable, harmless when LIBDIR is right.
REAL=$(readlink -f "$("$BASE" -c 'import sys; print(sys._base_executable)')")
export LD_LIBRARY_PATH="$(dirname "$(dirname "$REAL")")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$V/bin:$PATH"
[ -d "$V/wrk" ] && export PATH="$V/wrk/bin:$PATH" LD_LIBRARY_PATH="$V/wrk/lib:$LD_LIBRARY_PATH"
export PYTHONUNBUFFERED=1 YTS_CACHE=${YTS_CACHE:-/tmp/yts-cache}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec "$@"
