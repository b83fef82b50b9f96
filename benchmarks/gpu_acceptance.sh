#!/usr/bin/env bash
# Issue 31's acceptance on a GPU machine, each within one 10-minute command, from a checkout carrying only
# .gpu/site.tar.xz and .gpu/server.tar.xz (made here by benchmarks/pack_gpu.sh):
#   bash benchmarks/gpu_acceptance.sh certify OUT     # yts certify of this card's GPU reference build  (YTS_CERTIFY_ARGS: more certify options)
#   bash benchmarks/gpu_acceptance.sh benchmark OUT   # pytest suites --benchmark-only on it (CUDA MPS if present),
#                                                     # then benchmarks/probes/saturation.py against it
# OUT gets log.txt, gpu.csv (the card, then its used memory and utilisation every 2 s) and results.tgz
# (report.json/html, junit.xml, benchmark JSON, the build's reference.json with its GPU sizing); benchmark also
# leaves benchmark.json and saturation.json in OUT: yolo_e2e's saturated throughput as the suite measured it and
# as an independent client measures it at the same concurrency (and twice it), their ratio, and whether they
# agree within 10 % (the probe's exit status: 1 when not). Time caps: YTS_BENCHMARK_S (pytest, 400 s) and
# YTS_PROBE_S (the probe, 150 s), within the GPU machine's 10-minute command with the ~40 s setup.
set -u
WHAT=${1:?usage: gpu_acceptance.sh certify|benchmark OUT}
OUT=${2:?usage: gpu_acceptance.sh certify|benchmark OUT}
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 2 >> "$OUT/gpu.csv" &
SAMPLER=$!
finish() {
  kill "$SAMPLER" 2>/dev/null
  cp -r "${YTS_CACHE:-/tmp/yts-cache}"/reference/*/reference.json "$WORK/" 2>/dev/null
  cp "$WORK"/benchmark.json "$WORK"/saturation.json "$OUT/" 2>/dev/null
  tar -C "$WORK" -czf "$OUT/results.tgz" .
}
trap finish EXIT
export YTS_CACHE=${YTS_CACHE:-/tmp/yts-cache} YTS_GPU_SETUP_LOG="$WORK/setup.log"
case $WHAT in
  certify)
    timeout -s INT -k 20 "${YTS_ACCEPTANCE_S:-560}" bash benchmarks/gpu_env.sh bash -c "time yts certify --report-dir $WORK/report ${YTS_CERTIFY_ARGS:-} -- --durations=40 --triton-log-dir $WORK/logs" \
      2>&1 | tee "$OUT/log.txt"; rc=${PIPESTATUS[0]} ;;
  benchmark)
    MPS=(); command -v nvidia-cuda-mps-control >/dev/null && MPS=(bash benchmarks/mps.sh)
    "${MPS[@]}" bash benchmarks/gpu_env.sh bash -c "time timeout -s INT -k 20 ${YTS_BENCHMARK_S:-400} python -m pytest suites \
      --benchmark-only -q -p no:randomly --benchmark-json $WORK/benchmark.json --report-dir $WORK/report; suite=\$?
      time timeout -s INT -k 10 ${YTS_PROBE_S:-150} python -m benchmarks.probes.saturation --suite-json $WORK/benchmark.json \
        --out $WORK/saturation.json --log-dir $WORK/probe-logs; probe=\$?
      exit \$(( suite ? suite : probe ))" 2>&1 | tee "$OUT/log.txt"; rc=${PIPESTATUS[0]} ;;
  *) echo "usage: gpu_acceptance.sh certify|benchmark OUT"; exit 2 ;;
esac
exit "$rc"
