#!/usr/bin/env bash
# The whole lab run on a one-GPU host with no package index (run from the repository root).
#   1. bundle parts (lab/build-bundle.sh → .bundle/part.NN, SHA256) copied to $PARTS on the host
#   2. bash lab/gpu_run.sh [extra `python -m lab run` options]
# Results (lab-result.json, lab-report.md, run.log, ray-log-excerpt.txt, run-ray-logs.tar.xz) go to $OUT
# (default .lab/out/, git-ignored).
# LAB_COMMAND picks another lab command (default `run --stack dev`): lab/gpu_detached.sh runs a
# chain of them (`loadtime`, `resilience --runs ...`) through it, detached, across device calls.
set -uo pipefail
OUT=${OUT:-.lab/out}
PARTS=${PARTS:-/tmp/parts}
SITE=${SITE:-/tmp/site}
mkdir -p "$OUT"
if [ ! -f "$SITE/.unpacked" ]; then
  cat "$PARTS"/part.* > /tmp/bundle.tar || exit 3
  echo "$(cat "$PARTS/SHA256")  /tmp/bundle.tar" | sha256sum -c - || exit 3
  mkdir -p "$SITE"
  # xz or gzip (lab/build-bundle.sh BUNDLE_COMPRESS): tar finds which; Python's tarfile where xz is missing.
  if command -v xz >/dev/null; then
    tar -xf /tmp/bundle.tar -C "$SITE" || exit 3
  else
    python3 -c "import tarfile;tarfile.open('/tmp/bundle.tar').extractall('$SITE')" || exit 3
  fi
  touch "$SITE/.unpacked"
fi
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m lab ${LAB_COMMAND:-run --stack dev} --out "$OUT" "$@" 2>&1 | tee "$OUT/${RUN_LOG:-run.log}"
status=${PIPESTATUS[0]}
# Serve's log files and the workers' stderr and stdout (vLLM, NIXL and UCX print there), for
# `python -m lab pd-hop` and for reading afterwards.
logs=/tmp/ray/session_latest/logs
[ -d "$logs" ] && (cd "$logs" && tar -cJf "$OUT/$(basename "${RUN_LOG:-run.log}" .log)-ray-logs.tar.xz" serve worker-*.err worker-*.out 2>/dev/null)
echo "lab exit status: $status"
exit "$status"
