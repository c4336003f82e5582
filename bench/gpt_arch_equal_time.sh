#!/bin/sh
# Issue 40's architecture table: examples/gpt's `gpt train` with the gpt2 block and with the llama block
# (rotary positions, RMSNorm, SwiGLU, grouped-query attention), one after the other, each for the same
# budget of training seconds at 2 threads (scoring off the clock), same seed, data and schedule; then each run's
# parameter count, steps, final validation bits/byte and KV-cache bytes per token. Take the benchmark lock
# around it, on a quiet machine:
#   flock -x /tmp/saccade-cpu.lock bench/gpt_arch_equal_time.sh [build dir: build] [out: out/gpt_arch] \
#       [seconds: 600] [llama key/value heads: 2]
set -eu
build=${1:-build}
out=${2:-out/gpt_arch}
secs=${3:-600}
kv=${4:-2}
common="--threads 2 --time-limit $secs --steps 1000000 --eval-every 250 --sample-tokens 0"
mkdir -p "$out"
for arch in gpt2 llama; do
  rm -rf "${out:?}/$arch"  # a fresh run, never a resume
  extra=""
  [ "$arch" = llama ] && extra="--arch llama --n-kv-head $kv"
  echo "$(date -u +%H:%M:%S) load before $arch: $(cat /proc/loadavg)"
  # shellcheck disable=SC2086
  "$build/examples/gpt/gpt" train $common $extra --out "$out/$arch" >"$out/$arch.log" 2>&1
  echo "$(date -u +%H:%M:%S) load after $arch: $(cat /proc/loadavg)"
  grep -E 'parameters|^trained|best model' "$out/$arch.log"
done
