#!/usr/bin/env bash
# Runs a command while every core is kept busy, the way a loaded CI machine or a laptop running
# other builds is: one busy loop per core (`nproc`), at normal priority, competing with the
# command for the CPU. The suites must pass like this (issue 27): no test may decide on how long
# something took.
#
#   bash scripts/with-cpu-hog.sh npx vitest run [files...]
#   HOGS=4 bash scripts/with-cpu-hog.sh npm test      # more (or fewer) loops than cores
#
# The loops are stopped by their PIDs when the command ends, fails, or this script is signalled
# (INT, TERM, HUP); the script exits with the command's status (128 + N after signal N).
set -u

if [ "$#" -eq 0 ]; then
  echo "usage: bash scripts/with-cpu-hog.sh command [args...]" >&2
  exit 2
fi

hogs="${HOGS:-$(nproc)}"
pids=()
child=""

stop_hogs() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

on_signal() {
  local sig="$1" code="$2"
  trap - INT TERM HUP
  # Pass the signal on to the command's whole process group (npx, vitest, its workers and the
  # servers they started): a job runner may signal this script alone, and npx does not pass a
  # signal on. SIGTERM as well, for a program that ignores the signal it was sent.
  if [ -n "$child" ]; then
    kill "-$sig" -- "-$child" 2>/dev/null || true
    [ "$sig" = TERM ] || kill -TERM -- "-$child" 2>/dev/null || true
    wait "$child" 2>/dev/null
  fi
  stop_hogs
  exit "$code"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
trap stop_hogs EXIT

# A busy loop of pure user CPU at normal priority; every 200k turns (well under a second) it
# checks that this script is still there, so a loop outlives a SIGKILLed script by moments only.
# shellcheck disable=SC2016
loop='i=0; while :; do i=$((i + 1)); if [ "$i" -ge 200000 ]; then i=0; kill -0 "$1" || exit 0; fi
done'
for _ in $(seq 1 "$hogs"); do
  sh -c "$loop" hog "$$" </dev/null >/dev/null 2>&1 &
  pids+=("$!")
done
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "with-cpu-hog: $hogs busy loop(s) (PIDs ${pids[*]}) on $(nproc) core(s); load $(load)" >&2

# In the background so that a signal to this script runs its trap at once (bash runs traps only
# between commands, and `wait` is interruptible where a foreground command is not), in a process
# group of its own (job control on for that one start) so the trap can signal all of it; stdin is
# passed on explicitly, as a background command's would otherwise be /dev/null.
set -m
"$@" <&0 &
child=$!
set +m
status=0
wait "$child" || status=$?
child=""

echo "with-cpu-hog: command exited $status; load $(load)" >&2
stop_hogs
exit "$status"
