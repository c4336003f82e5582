#!/usr/bin/env bash
# Scaling of data-parallel training: the captioner at -np 1 and -np 2 (one thread each), same global batch.
# Usage: bench/ddp.sh [build dir (default build)] [steps (default 30)]
# Efficiency = (steps/s with 2 ranks) / (2 x steps/s with 1 rank); on 2 cores the ideal is 1.
set -euo pipefail
build=${1:-build}
steps=${2:-30}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
one=$(mpirun --oversubscribe -np 1 "$build/bench/ddp" --steps "$steps")
two=$(mpirun --oversubscribe -np 2 "$build/bench/ddp" --steps "$steps")
echo "$one"
echo "$two"
awk -v a="$one" -v b="$two" 'BEGIN {
  split(a, x, " "); split(b, y, " ");
  printf "speedup %.2f  scaling efficiency %.2f\n", y[8] / x[8], y[8] / (2 * x[8]) }'
