#!/bin/sh
# Runs one command line of an example program as a new user would, and checks what the user sees.
#
#   run_cli.sh [options] RC SECONDS -- COMMAND [ARG...]
#
# The command runs in a fresh empty folder. The test fails unless
#   - its exit code is RC;
#   - it took less than SECONDS (wall clock);
#   - with RC != 0: stderr is exactly one line (a refusal or an error says one thing);
#   - the folder is empty afterwards (no output folder or file left behind), unless --keep.
# Options:
#   --err REGEX    the stderr line matches REGEX (grep -E)
#   --out REGEX    some line of stdout matches REGEX (repeatable: each must match)
#   --no-out REGEX no line of stdout matches REGEX
#   --count REGEX N exactly N lines of stdout match REGEX
#   --first REGEX  with stdout and stderr in one file (`> log 2>&1`), its first line matches REGEX
#   --stdin FILE   the command's standard input (default: /dev/null)
#   --keep         the command may leave files in its folder
set -u
err_re="" first_re="" keep=0 stdin=/dev/null
out_res="" no_out_res="" counts=""
nl='
'
while [ $# -gt 0 ]; do
  case "$1" in
    --err) err_re=$2; shift 2 ;;
    --out) out_res="$out_res$2$nl"; shift 2 ;;
    --no-out) no_out_res="$no_out_res$2$nl"; shift 2 ;;
    --count) counts="$counts$3 $2$nl"; shift 3 ;;
    --first) first_re=$2; shift 2 ;;
    --stdin) stdin=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) break ;;
  esac
done
want_rc=$1 limit=$2
shift 2
[ "$1" = "--" ] && shift

fail() {
  echo "FAIL: $*"
  echo "--- command: $cmd"
  echo "--- stdout:"; cat "$log/stdout"
  echo "--- stderr:"; cat "$log/stderr"
  rm -rf "$work" "$log"
  exit 1
}

cmd="$*"
# as a user runs them: the programs pick their OpenBLAS core themselves (a core set here makes them warn on
# stderr)
unset OPENBLAS_CORETYPE
work=$(mktemp -d) log=$(mktemp -d)
start=$(date +%s.%N)
(cd "$work" && "$@" <"$stdin" >"$log/stdout" 2>"$log/stderr")
rc=$?
end=$(date +%s.%N)
secs=$(awk "BEGIN { printf \"%.3f\", $end - $start }")
echo "rc $rc in $secs s: $cmd"

[ "$rc" = "$want_rc" ] || fail "exit code $rc, expected $want_rc"
awk "BEGIN { exit !($secs < $limit) }" || fail "took $secs s, the limit is $limit s"
if [ "$want_rc" != 0 ]; then
  lines=$(wc -l <"$log/stderr")
  [ "$lines" = 1 ] || fail "stderr has $lines lines, expected one"
fi
if [ -n "$err_re" ]; then
  grep -Eq -- "$err_re" "$log/stderr" || fail "stderr does not match: $err_re"
fi
printf '%s' "$out_res" | while IFS= read -r re; do
  grep -Eq -- "$re" "$log/stdout" || { echo "stdout does not match: $re"; exit 1; }
done || fail "stdout"
printf '%s' "$no_out_res" | while IFS= read -r re; do
  if grep -Eq -- "$re" "$log/stdout"; then echo "stdout matches: $re"; exit 1; fi
done || fail "stdout"
printf '%s' "$counts" | while read -r n re; do
  got=$(grep -Ec -- "$re" "$log/stdout")
  [ "$got" = "$n" ] || { echo "$got lines of stdout match $re, expected $n"; exit 1; }
done || fail "stdout"
if [ "$keep" = 0 ] && [ -n "$(ls -A "$work")" ]; then
  fail "left behind: $(ls -A "$work")"
fi
if [ -n "$first_re" ]; then
  rm -rf "$work" && mkdir "$work"
  (cd "$work" && "$@" <"$stdin" >"$log/merged" 2>&1)
  head -n 1 "$log/merged" | grep -Eq -- "$first_re" || fail "merged output begins: $(head -n 1 "$log/merged")"
fi
rm -rf "$work" "$log"
echo "ok"
