#!/usr/bin/env bash
# The XR1 twin stack test (tests/ros/test_xr1_twin_stack.py: `captain bringup xr1_twin`, the
# XR1 driver with the real arm's limits, 100 ms joint state and 0.5 s wrench, drives the MuJoCo
# twin over ROS 2) RUNS times in a row while LOAD busy processes compete for the CPU.
#
#   scripts/twin_loop.sh                  # 20 runs, 1 busy process
#   RUNS=5 LOAD=2 scripts/twin_loop.sh
#   TESTS="tests/ros/test_xr1_real_stack.py tests/ros/test_xr1_twin_stack.py" scripts/twin_loop.sh
#
# Prints one line per run and a summary; exits 0 only when every run passed. Logs of the
# runs go to $LOGS (default /tmp/twin_loop).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# shellcheck disable=SC1091
set +u
source scripts/env.sh
set -u
RUNS=${RUNS:-20}
LOAD=${LOAD:-1}
LOGS=${LOGS:-/tmp/twin_loop}
TESTS=${TESTS:-tests/ros/test_xr1_twin_stack.py}
mkdir -p "$LOGS"

load_pids=()
stop_load() { for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null; done; }
trap stop_load EXIT
for _ in $(seq "$LOAD"); do
  python -c "while True: pass" &
  load_pids+=($!)
done

passed=0
started=$(date +%s)
for i in $(seq "$RUNS"); do
  log="$LOGS/run_$i.txt"
  t0=$(date +%s)
  if python -m pytest $TESTS -q -p no:cacheprovider > "$log" 2>&1; then
    passed=$((passed + 1))
    echo "run $i/$RUNS: passed ($(( $(date +%s) - t0 )) s)"
  else
    echo "run $i/$RUNS: FAILED ($(( $(date +%s) - t0 )) s), log $log:"
    grep -E "^E " "$log" | head -5
  fi
done
echo "twin loop: $passed/$RUNS passed under a load of $LOAD busy process(es) in $(( $(date +%s) - started )) s"
[ "$passed" -eq "$RUNS" ]
