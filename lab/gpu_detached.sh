#!/usr/bin/env bash
# Lab commands that together outlast one 10-minute device call (the soak alone is 10 minutes), run
# one after another in a detached process session: it survives the call, and the machine stays
# while calls follow within its warm time (about 30 s). Same bundle steps as gpu_run.sh (README.md).
#   call 1:  bash lab/gpu_detached.sh start 'loadtime' 'resilience --stack dev' ...
#            (each argument is one `python -m lab` command; starts them, then follows like `follow`)
#   call N:  bash lab/gpu_detached.sh follow
#            (prints progress until the chain ends or FOLLOW_S seconds pass, then packs every result
#             so far into $OUT/detached.tgz: a machine lost later still leaves what was collected)
set -uo pipefail
OUT=${OUT:-.lab/out}
DIR=${DETACHED_DIR:-/tmp/lab-detached}
FOLLOW_S=${FOLLOW_S:-540}
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT" "$DIR"

follow() {
  local until=$((SECONDS + FOLLOW_S)) shown=0
  while [ "$SECONDS" -lt "$until" ] && ! grep -q "^chain exit status" "$DIR/steps" 2>/dev/null; do
    sleep 15
    local lines; lines=$(wc -l < "$DIR/chain.log" 2>/dev/null || echo 0)
    if [ "$lines" -gt "$shown" ]; then sed -n "$((shown + 1)),${lines}p" "$DIR/chain.log" | cut -c1-300 | tail -n 40; shown=$lines; fi
  done
  cat "$DIR/steps" 2>/dev/null
  tar -czf "$OUT/detached.tgz" -C "$DIR" --exclude='*.safetensors' . && ls -la "$OUT"
}

case "${1:-}" in
  start)
    shift
    [ "$#" -gt 0 ] || { echo "usage: bash lab/gpu_detached.sh start 'LAB COMMAND' ..." >&2; exit 2; }
    : > "$DIR/steps"
    setsid nohup bash "$here/gpu_detached.sh" chain "$@" > "$DIR/chain.log" 2>&1 < /dev/null &
    echo "chain started (pid $!): $*"
    follow
    ;;
  chain)  # what `start` runs detached
    shift
    status=0
    declare -A seen=()
    for command in "$@"; do
      name=${command%% *} out=$DIR
      seen[$name]=$(( ${seen[$name]:-0} + 1 ))
      # A command's second run (two `run`s) gets its own folder: same result file names otherwise.
      if [ "${seen[$name]}" -gt 1 ]; then name="$name-${seen[$name]}" out="$DIR/$name"; mkdir -p "$out"; fi
      echo "step start $(date -u +%FT%TZ): $command" >> "$DIR/steps"
      OUT="$out" LAB_COMMAND="$command" RUN_LOG="$name.log" bash "$here/gpu_run.sh" || status=1
      echo "step end $(date -u +%FT%TZ): $command" >> "$DIR/steps"
    done
    echo "chain exit status: $status" >> "$DIR/steps"
    ;;
  follow)
    follow
    grep -q "^chain exit status: 0" "$DIR/steps"
    ;;
  *)
    echo "usage: bash lab/gpu_detached.sh start 'LAB COMMAND' ... | follow" >&2; exit 2 ;;
esac
