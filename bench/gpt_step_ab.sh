#!/usr/bin/env bash
# Two builds' bench/gpt_step (examples/gpt's default float32 step and KV-cache generation, 1 and 2 threads),
# alternated run by run (the order swapped every round), first with OPENBLAS_CORETYPE=Haswell (this
# workplace's pin), then with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset. Prints, per setting, the median and
# min-max of the runs' medians for each binary, new / old of those medians, and the median and min-max of the
# round-by-round ratios (train: time; generate: tokens/s).
#
# Usage: bench/gpt_step_ab.sh OLD/gpt_step NEW/gpt_step [rounds] [samples]   (on a machine where nothing
# else runs: on a shared one, under a lock the other jobs take too, e.g. `flock -x /tmp/saccade-cpu.lock ...`)
set -euo pipefail
old=$1 new=$2 rounds=${3:-6} samples=${4:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for envmode in pin unset; do
  for ((r = 1; r <= rounds; ++r)); do
    order="old new"
    ((r % 2 == 0)) && order="new old"
    for which in $order; do
      bin=$old
      [ "$which" = new ] && bin=$new
      if [ $envmode = pin ]; then
        text=$(OPENBLAS_CORETYPE=Haswell "$bin" "$samples" notorch 2>&1)
      else
        text=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin" "$samples" notorch 2>&1)
      fi
      core=$(echo "$text" | grep -o "OpenBLAS core [A-Za-z0-9]*" | head -1 | cut -d' ' -f3)
      echo "$text" | grep -E "^(train step|generate)" | sed "s/^/$envmode $core $r $which /" >>"$out"
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import re, statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) (\w+) (\d+) (\w+) (train step \(ms\)|generate \(tokens/s\))\s+(\d)\s+([\d.]+) \[", line)
    if m:
        env, core, r, which, what, threads, median = m.groups()
        runs.setdefault((env, core, what, threads), {}).setdefault(which, {})[int(r)] = float(median)
for (env, core, what, threads), d in runs.items():
    o, n = d["old"], d["new"]
    ratios = [n[r] / o[r] for r in o if r in n]
    fmt = lambda v: f"{st.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
    print(f"{env:5} core {core:10} {what:20} {threads} threads: old {fmt(list(o.values()))}, "
          f"new {fmt(list(n.values()))}, new/old {st.median(n.values()) / st.median(o.values()):.3f}, "
          f"rounds {st.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
PY
