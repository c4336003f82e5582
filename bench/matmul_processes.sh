#!/usr/bin/env bash
# The bf16 GEMM's figure over several processes: runs `bench/matmul --dtype bf16 THREADS` N times one after
# another (a fresh process each: where the OS or a VM's host places the threads can change between processes,
# bench/RESULTS.md "the bf16 GEMM's two speeds explained") and prints, per square size, the min-max over the
# processes of each process's median bf16 and sgemm GFLOP/s, then each process's cache-line round trip and
# register-only limits. Run it on a quiet machine; OpenBLAS's core is as the environment sets it (give both:
# as set, and with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`).
#
# Usage: bench/matmul_processes.sh BUILD/bench/matmul [processes, default 5] [threads, default 2]
set -euo pipefail
bin=$1 n=${2:-5} threads=${3:-2}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$n"); do
  "$bin" --dtype bf16 "$threads" 2>>"$err" | sed "s/^/$i /" >>"$out"
done
head -1 "$out" | cut -d' ' -f2-
sort -u "$err"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
# square rows: "<proc> square  n n n NN | bf16 MED (min- max) | sgemm MED (...) GFLOP/s"
awk -v n="$n" '
  $2 == "square" { size = $3; bf = $9; sg = $0; sub(/.*sgemm +/, "", sg); split(sg, a, " "); sg = a[1]
    if (!(size in lo)) { order[++k] = size; lo[size] = hi[size] = bf; slo[size] = shi[size] = sg }
    if (bf < lo[size]) lo[size] = bf; if (bf > hi[size]) hi[size] = bf
    if (sg < slo[size]) slo[size] = sg; if (sg > shi[size]) shi[size] = sg }
  /cache-line round trip/ { trip[$1] = $(NF - 1) }
  /register-only limit/ { lim[$1] = $0; sub(/^[0-9]+ register-only limit at [0-9]+ threads?: /, "", lim[$1]) }
  END {
    printf "square n: bf16 GFLOP/s min-max | sgemm min-max, over %d processes\n", n
    for (i = 1; i <= k; ++i) { s = order[i]; printf "%5d: %7.1f-%7.1f | %6.1f-%6.1f\n", s, lo[s], hi[s], slo[s], shi[s] }
    for (p = 1; p <= n; ++p) printf "process %d: round trip %s ns; %s\n", p, trip[p], lim[p]
  }' "$out"
