#!/bin/sh
# Programs started side by side whose --out folders share a parent that does not exist yet (as CTest runs
# the example tests): the check that --out is writable must neither fail nor disturb the other programs'
# folders. Each of the two loops below asks the program for a run under W/shared/ that it then refuses at a
# flag checked after --out (exit 2, nothing made), while a third loop makes and removes W/shared/busy.
# Before the fix the check made the missing folders and removed them again: it failed with "Directory not
# empty" (exit 1) whenever W/shared/busy appeared in between, or removed the folder a neighbour had made.
#
#   concurrent_out.sh ROUNDS -- COMMAND [ARG...]   (COMMAND's --out is appended: W/shared/<loop>/run)
set -u
rounds=$1
shift 2
unset OPENBLAS_CORETYPE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
busy() {
  i=0
  while [ ! -e "$work/stop" ]; do
    mkdir -p "$work/shared/busy" 2>/dev/null
    rmdir "$work/shared/busy" "$work/shared" 2>/dev/null
    i=$((i + 1))
  done
}
refusals() {
  n=0
  while [ "$n" -lt "$rounds" ]; do
    "$@" --out "$work/shared/$loop/run" >/dev/null 2>"$work/err.$loop"
    rc=$?
    if [ "$rc" != 2 ]; then
      echo "FAIL: loop $loop, round $n: exit code $rc, expected 2: $(cat "$work/err.$loop")"
      return 1
    fi
    n=$((n + 1))
  done
}
busy &
b=$!
loop=a refusals "$@" &
a=$!
loop=b refusals "$@"
rc_b=$?
wait $a
rc_a=$?
touch "$work/stop"
wait $b
[ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] || exit 1
echo "ok: 2 x $rounds refusals beside a folder made and removed"
