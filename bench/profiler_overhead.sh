#!/usr/bin/env bash
# The profiler's cost when no profile is active: bench/overhead (ns per recorded op) of a build without the
# profiler (main's) against this build's, alternated run by run, `rounds` rounds of each. Prints the median
# and min-max of each figure per binary and the ratio of the medians (new / old: 1.00 = no cost).
#
# Usage: flock -x /tmp/saccade-cpu.lock bench/profiler_overhead.sh OLD_OVERHEAD NEW_OVERHEAD [rounds] [iters]
set -euo pipefail
old=$1 new=$2 rounds=${3:-10} iters=${4:-200000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$new" 1000 | head -1  # the BLAS line: library, core, CPU width, threads
for ((r = 0; r < rounds; ++r)); do
  "$old" "$iters" >>"$out/old"
  "$new" "$iters" >>"$out/new"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/old" "$out/new" <<'PY'
import re, statistics, sys
keys = {"ops::add (Tensor": "ops::add on Tensors", "under NoGradGuard": "Variable add, NoGradGuard",
        "forward: c = a + b": "forward op (recorded)", "forward+backward": "forward + backward"}
def read(path):
    got = {k: [] for k in keys}
    for line in open(path):
        for k in keys:
            if k in line:
                got[k].append(float(re.findall(r"([0-9.]+) ns", line)[0]))
    return got
old, new = read(sys.argv[1]), read(sys.argv[2])
print(f"{'ns per iteration':28} {'old median [min-max]':>24} {'new median [min-max]':>24} {'new/old':>8}")
for k, name in keys.items():
    o, n = old[k], new[k]
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"{name:28} {mo:10.1f} [{min(o):.0f}-{max(o):.0f}]{'':>5} {mn:10.1f} [{min(n):.0f}-{max(n):.0f}]{'':>5} {mn/mo:8.3f}")
PY
