#!/usr/bin/env bash
# Runs a command with CUDA MPS (Multi-Process Service) on. Triton's Python backend runs every model
# instance in a process of its own; without MPS the GPU time-slices between those processes' contexts,
# so no kernel of one instance runs beside another's. MPS funnels them through one server context.
# Its pipe and log folders live under /tmp/yts-mps (not the default /tmp/nvidia-mps, where a daemon of
# someone else's may answer); the daemon is quit when the command ends. The GPU's settings (compute
# mode included) are not touched.
#   bash benchmarks/mps.sh COMMAND [ARGS...]
set -u
command -v nvidia-cuda-mps-control >/dev/null || { echo "mps.sh: nvidia-cuda-mps-control not found: no MPS here"; exit 3; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/yts-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/yts-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d || { echo "mps.sh: the MPS control daemon did not start"; exit 3; }
trap 'echo quit | nvidia-cuda-mps-control; echo "== MPS control log"; tail -n 8 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null' EXIT
echo "mps.sh: MPS control daemon up (pipe $CUDA_MPS_PIPE_DIRECTORY)"
"$@"
