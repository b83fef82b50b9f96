#!/usr/bin/env bash
# The GPU machine's side of benchmarks/gpu_run.py: benchmarks/gpu_env.sh (the venv, the carried wheels
# and server files; its header says what .gpu/ must hold), then the driver. Run from the repository root:
#   bash benchmarks/gpu_run.sh OUTDIR [gpu_run.py options]
set -u
OUT=${1:?usage: gpu_run.sh OUTDIR [options]}
shift
mkdir -p "$OUT"
YTS_GPU_SETUP_LOG="$OUT/setup.log" exec bash "$(dirname "$0")/gpu_env.sh" python benchmarks/gpu_run.py --out "$OUT" "$@"
