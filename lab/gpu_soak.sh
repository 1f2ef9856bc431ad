#!/usr/bin/env bash
# Issue 18's soak on the one-GPU host: 10 minutes of steady mixed load on the stack's PD app (tiny
# model); zero failed requests, and the replicas' (with their engines') and the GPU's memory sampled
# every 5 s without growth. Same bundle as gpu_run.sh (lab/README.md).
#
# Start-up plus 600 s of load outlasts one 10-minute device call, so the soak runs detached (its own
# process session survives the call; the machine stays while calls follow within its warm time):
#   call 1:  bash lab/gpu_soak.sh start      # unpacks, starts the soak detached, follows it ~9 min
#   call 2:  bash lab/gpu_soak.sh collect    # waits for it to end, copies the results to $OUT
# `run` does both in one call, for a host without that limit.
set -uo pipefail
OUT=${OUT:-.lab/out}
SOAK_DIR=${SOAK_DIR:-/tmp/lab-soak}
FOLLOW_S=${FOLLOW_S:-540}
here="$(dirname "$0")"
mkdir -p "$OUT" "$SOAK_DIR"
case "${1:-run}" in
  start)
    shift
    OUT="$SOAK_DIR" LAB_COMMAND="soak --stack dev" setsid nohup bash "$here/gpu_run.sh" "$@" \
      > "$SOAK_DIR/nohup.log" 2>&1 < /dev/null &
    echo "soak started (pid $!); following it for ${FOLLOW_S} s"
    timeout "$FOLLOW_S" tail -n +1 -F "$SOAK_DIR/nohup.log" || true
    ;;
  collect)
    while ! grep -q "lab exit status" "$SOAK_DIR/nohup.log" 2>/dev/null; do sleep 5; done
    cp "$SOAK_DIR"/soak-result.json "$SOAK_DIR"/run.log "$SOAK_DIR"/*ray-log-excerpt.txt "$SOAK_DIR"/gpu.txt "$OUT"/ 2>/dev/null
    tail -n 30 "$SOAK_DIR/run.log"
    grep -q "lab exit status: 0" "$SOAK_DIR/nohup.log"
    ;;
  run)
    shift || true
    LAB_COMMAND="soak --stack dev" exec bash "$here/gpu_run.sh" "$@"
    ;;
  *)
    echo "usage: bash lab/gpu_soak.sh start|collect|run [soak options]" >&2; exit 2 ;;
esac
