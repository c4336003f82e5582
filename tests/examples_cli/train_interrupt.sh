#!/bin/sh
# A training run holds its --out folder, and Ctrl-C stops it cleanly (issue 49, items 6 and 20):
#   1. a long run A starts in W/run, as a terminal starts it (SIGINT not ignored, which a non-interactive
#      shell does for a command it puts in the background: env --default-signal undoes that);
#   2. once A's log shows a step line, a second run B on the same --out is refused at once: exit 2 and one
#      line on stderr naming the folder and A's process id;
#   3. SIGINT to A: it stops after its step with exit code 130 and says which steps it saved; nothing
#      partial (*.tmp) is left in the folder, last.safetensors, log.csv and loss.png are there, the lock
#      file is gone;
#   4. --resume continues from the step A saved.
# No sleeps to guess timings: each stage waits for what the previous one printed.
#
#   train_interrupt.sh GPT [TRAIN ARGS...]   (tiny sizes; --steps and --out are added)
set -u
gpt=$1
shift
unset OPENBLAS_CORETYPE
work=$(mktemp -d)
a=""
trap '[ -n "$a" ] && kill -KILL "$a" 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in a.out a.err b.out b.err c.out; do
    [ -f "$work/$f" ] && { echo "--- $f:"; cat "$work/$f"; }
  done
  exit 1
}
if ! env --default-signal=INT true 2>/dev/null; then
  echo "skipped: env --default-signal (GNU coreutils 8.31) is missing"
  exit 77
fi
cd "$work" || exit 1

env --default-signal=INT "$gpt" train "$@" --steps 100000000 --out run >a.out 2>a.err &
a=$!
i=0
until grep -Eq "^step [0-9]+/100000000 " a.out 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -gt 1200 ] && fail "run A printed no step line in 120 s"
  kill -0 "$a" 2>/dev/null || fail "run A ended before its first step line"
  sleep 0.1
done

"$gpt" train "$@" --steps 3 --out run >b.out 2>b.err
rc=$?
[ "$rc" = 2 ] || fail "run B: exit code $rc, expected 2"
[ "$(wc -l <b.err)" = 1 ] || fail "run B: stderr is not one line"
grep -Eq "^gpt: --out: 'run' is in use by another training run \(process $a\)" b.err || fail "run B: stderr"

kill -INT "$a"
wait "$a"
rc=$?
a=""
[ "$rc" = 130 ] || fail "run A: exit code $rc after SIGINT, expected 130"
n=$(sed -n 's/^interrupted: trained steps 1-\([0-9]*\) in .*/\1/p' a.out)
[ -n "$n" ] || fail "run A did not say which steps it saved"
left=$(find run -name '*.tmp*')
[ -z "$left" ] || fail "left behind: $left"
grep -q "^outputs in run: last.safetensors" a.out || fail "run A did not say where its outputs went"
pictures=""
grep -q "^outputs in run: .*loss.png" a.out && pictures=loss.png  # a build with PLplot draws it
for f in last.safetensors log.csv $pictures; do
  [ -s "run/$f" ] || fail "no run/$f"
done
[ ! -e run/train.lock ] || fail "the lock file is left"
[ "$(($(wc -l <run/log.csv) - 1))" = "$n" ] || fail "run/log.csv does not hold the $n steps"

"$gpt" train "$@" --steps $((n + 1)) --out run --resume >c.out 2>&1 || fail "the resume failed"
grep -q "^resumed from run/last.safetensors at step $n$" c.out || fail "the resume did not continue from step $n"
echo "ok: run B refused while A ran; A stopped by SIGINT after step $n, saved; the resume went on from it"
