#!/usr/bin/env bash
# Makes the files benchmarks/gpu_env.sh needs on a GPU host without network (Python 3.12) in .gpu/
# (ignored by .gitignore), from the local .venv (nvidia-pytriton 0.7.0 installed) and the package index:
# what the suites import (tritonclient's HTTP and gRPC clients, testcontainers, ...) and the benchmarks.
# ~55 MB in all; with the tracked tree it stays under the device tool's 64 MiB.
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
SP=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p .gpu/whl
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
for spec in numpy==1.26.4 ml_dtypes==0.5.4 tritonclient==2.73.0 python-rapidjson==1.25 pycocotools==2.0.11 \
            onnxslim==0.1.98 grpcio==1.85.3 protobuf==6.33.6 torchvision==0.26.0 \
            pytest==9.0.1 pluggy==1.6.0 iniconfig==2.3.0 packaging==25.0 nvidia-cudnn-frontend==1.32.0 \
            geventhttpclient==2.6.1 gevent==26.9.0 greenlet==3.3.2 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 \
            docker==7.2.0 testcontainers==4.15.0 python-dotenv==1.2.4; do
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d .gpu/whl "$spec"
done
STAGE=$(mktemp -d)
mkdir -p "$STAGE/main" "$STAGE/fallback" "$STAGE/pt/pytriton"
for w in .gpu/whl/{numpy,ml_dtypes,tritonclient,python_rapidjson,pycocotools,onnxslim,pytest,pluggy,iniconfig,packaging}-*.whl \
         .gpu/whl/{geventhttpclient,gevent,greenlet,zope_event,zope_interface,brotli,docker,testcontainers,python_dotenv}-*.whl; do
  unzip -q -o "$w" -d "$STAGE/main"
done
# torchvision 0.26.0 is the build for the machine's torch 2.11 (cu130; it bundles nvJPEG): unpacked only
# when the machine has no torchvision of its own
mkdir -p "$STAGE/tv" && unzip -q -o .gpu/whl/torchvision-0.26.0-*.whl -d "$STAGE/tv"
# cudnn-frontend (benchmarks/probes/fusion.py: the cuDNN graph API) without its C++ headers: the machine's torch brings libcudnn
mkdir -p "$STAGE/cfe" && unzip -q -o .gpu/whl/nvidia_cudnn_frontend-1.32.0-*.whl 'cudnn/*' -d "$STAGE/cfe"
for w in .gpu/whl/{grpcio,protobuf}-*.whl; do unzip -q -o "$w" -d "$STAGE/fallback"; done
find "$STAGE" -type d -name tests -prune -exec rm -rf {} +
tar -C "$STAGE/main" -c . | xz -9e -T2 > .gpu/site.tar.xz
tar -C "$STAGE/fallback" -c . | xz -9e -T2 > .gpu/fallback.tar.xz
tar -C "$STAGE/tv" -c . | xz -9e -T2 > .gpu/torchvision.tar.xz
tar -C "$STAGE/cfe" -c . | xz -9e -T2 > .gpu/cudnn_fe.tar.xz
: > "$STAGE/pt/pytriton/__init__.py"  # find_spec("pytriton") is all serverfiles.locate() needs
tar -C "$SP" -c --exclude=__pycache__ --exclude='libpython3*' pytriton/tritonserver/bin pytriton/tritonserver/backends \
    pytriton/tritonserver/python_backend_stubs/3.12 nvidia_pytriton.libs -C "$STAGE/pt" pytriton/__init__.py \
  | xz -9 -T2 > .gpu/server.tar.xz
# wrk (apt: wrk) for the fidelity stage: the binary and its libluajit; needs GLIBC 2.34 at most. Optional:
# without it the generator-fidelity check is "not tested here" and does not block certification.
if command -v wrk >/dev/null; then
  mkdir -p "$STAGE/wrk/bin" "$STAGE/wrk/lib" && cp "$(command -v wrk)" "$STAGE/wrk/bin/" \
    && cp -L /usr/lib/x86_64-linux-gnu/libluajit-5.1.so.2 "$STAGE/wrk/lib/" && tar -C "$STAGE/wrk" -cJf .gpu/wrk.tar.xz .
else
  echo "no wrk here (apt-get install wrk): .gpu/wrk.tar.xz not made"
fi
rm -rf "$STAGE"
ls -la .gpu
