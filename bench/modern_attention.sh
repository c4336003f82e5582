#!/usr/bin/env bash
# Issue 40's CPU benchmark goals in one run, ours against PyTorch 2.x at 2 threads:
#   - build/bench/attention --gqa: grouped-query attention forward + backward (H 32, H_kv 8, D 64, causal,
#     B·T = 8192, T = 512 / 2048 / 4096) in float32 and bfloat16 against torch SDPA(enable_gqa=True) and our
#     MHA kernel at H_kv = 32 (GFLOP/s), then the peak memory of each (bench/attention_gqa.cpp);
#   - build/bench/llama_ops: RMSNorm, RoPE (half) and SwiGLU forward + backward on (8192, 1024) in float32 and
#     bfloat16 against PyTorch eager and a copy of the same bytes (GB/s; bench/llama_ops.cpp).
# Each program alternates ours and PyTorch run by run and prints per cell the median and min-max of its runs.
# First both agreement checks (outputs and gradients against PyTorch on small float32 cases; the run stops if
# they disagree). Then everything twice: with OpenBLAS as the environment pins it (OPENBLAS_CORETYPE,
# OPENBLAS_L2_SIZE) and with both unset (OpenBLAS's own choice of core). Beside the tables: the CPU model,
# the load average before and after each program, and the OpenBLAS core each pass ran (openblas_get_corename(),
# read from the programs' BLAS line). About 8-10 minutes at the issue's sizes on a quiet 2-core Zen 5
# (estimated from this VM's flash_window figures: the T = 4096 cell is ~2-3 s a run per side); `quick` is a
# smoke run at tiny sizes (B·T = 512, T = 512; (256, 128); 2 runs), a minute or two.
#
# Usage (on a quiet machine, under the benchmark lock):
#   flock -x /tmp/saccade-cpu.lock env SACCADE_PYTHON=/work/.venv-bench/bin/python \
#       bench/modern_attention.sh [build dir: build/release] [quick]
# RUNS=N and OPS_RUNS=N override the runs per cell (default 5 for attention, 20 for llama_ops).
set -euo pipefail
build=${1:-build/release}
quick=${2:-}
if [ -n "$quick" ] && [ "$quick" != quick ]; then
  echo "usage: bench/modern_attention.sh [build dir] [quick]" >&2
  exit 2
fi
for prog in attention llama_ops; do
  if [ ! -x "$build/bench/$prog" ]; then
    echo "bench/modern_attention.sh: no $build/bench/$prog (cmake --build $build --target bench_attention" \
      "bench_llama_ops)" >&2
    exit 2
  fi
done
if [ -n "$quick" ]; then
  gqa_args=(--gqa "${RUNS:-2}" 512 both 2 512)
  ops_args=("${OPS_RUNS:-2}" both 2 256 128)
else
  gqa_args=(--gqa "${RUNS:-5}" 4096 both 2 8192)
  ops_args=("${OPS_RUNS:-20}" both 2 8192 1024)
fi
export SACCADE_PYTHON=${SACCADE_PYTHON:-/usr/bin/python3}
if ! $SACCADE_PYTHON -c 'import torch' 2>/dev/null; then
  echo "bench/modern_attention.sh: $SACCADE_PYTHON cannot import torch: set SACCADE_PYTHON to a PyTorch 2.x" \
    "python (2.5 or later for enable_gqa)" >&2
  exit 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT

cpu_field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
start=$(date +%s)
echo "bench/modern_attention.sh ${quick:-full}, $(date -u '+%F %H:%M') UTC, build $build, python $SACCADE_PYTHON"
echo "CPU: $(cpu_field 'model name') (family $(cpu_field 'cpu family'), model $(cpu_field model)), $(nproc) CPUs," \
  "load average $(loadavg)"

# prog args...: runs one program (with the pass's environment), its output shown and kept in $log.
run() {
  echo "--- $* (load average $(loadavg))"
  "${prefix[@]}" "$@" 2>&1 | tee "$log"
}

echo
echo "=== agreement with PyTorch (float32, small cases)"
prefix=(env)
run "$build/bench/attention" --gqa-check
run "$build/bench/llama_ops" --check

for pass in pinned unset; do
  if [ $pass = pinned ]; then
    prefix=(env)
    what="as the environment pins it: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-(unset)}"
  else
    prefix=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
    what="with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
  fi
  echo
  echo "=== pass $pass: OpenBLAS $what"
  pass_start=$(date +%s)
  cores=()
  run "$build/bench/attention" "${gqa_args[@]}"
  cores+=("$(grep -o 'core [A-Za-z0-9]*' "$log" | head -1 | cut -d' ' -f2)")
  run "$build/bench/llama_ops" "${ops_args[@]}"
  cores+=("$(grep -o 'core [A-Za-z0-9]*' "$log" | head -1 | cut -d' ' -f2)")
  echo "=== pass $pass: openblas_get_corename() ${cores[0]} (attention), ${cores[1]} (llama_ops);" \
    "$(($(date +%s) - pass_start)) s; load average $(loadavg)"
done
echo
echo "done in $(($(date +%s) - start)) s, load average $(loadavg)"
