#!/bin/sh
# Issue 22's quality at equal time: examples/gpt's `gpt train` and its PyTorch twin (bench/gpt_twin.py), one
# after the other, each for the same budget of training seconds at 2 threads (scoring off the clock), the twin
# from gpt train's initial weights; then both validation curves in one PNG (gpt curves). Take the benchmark
# lock around it, on a quiet machine:
#   flock -x /tmp/saccade-cpu.lock env SACCADE_PYTHON=/work/.venv-bench/bin/python \
#       bench/gpt_equal_time.sh [build dir: build] [out dir: out/gpt_equal_time] [seconds: 600]
set -eu
build=${1:-build}
out=${2:-out/gpt_equal_time}
secs=${3:-600}
py=${SACCADE_PYTHON:-/usr/bin/python3}
common="--threads 2 --time-limit $secs --steps 1000000 --eval-every 100"
mkdir -p "$out"
rm -f "$out/saccade/last.safetensors"  # a fresh run, never a resume
echo "$(date -u +%H:%M:%S) load before saccade: $(cat /proc/loadavg)"
"$build/examples/gpt/gpt" train $common --sample-tokens 0 --out "$out/saccade"
echo "$(date -u +%H:%M:%S) load after saccade: $(cat /proc/loadavg)"
"$py" bench/gpt_twin.py $common --init "$out/saccade/init.safetensors" --log "$out/torch_log.csv"
echo "$(date -u +%H:%M:%S) load after torch: $(cat /proc/loadavg)"
"$build/examples/gpt/gpt" curves "$out/saccade/log.csv" "$out/torch_log.csv" --label saccade \
  --label "PyTorch $("$py" -c 'import torch; print(torch.__version__)')" --png "$out/curves.png"
