#!/usr/bin/env bash
# Issue 18 on the one-GPU host: the stack's PD app (tiny model) and a colocated baseline under a
# steady load of short and long prompts; each fault in turn (prefill/decode replica, prefill/decode
# vLLM engine process, Serve controller), then the bad-request list. Same bundle, steps and $OUT as
# gpu_run.sh (lab/README.md). Outputs: faults-result.json, bad-requests-result.json, faults.log,
# bad-requests.log, *-ray-log-excerpt.txt, gpu.txt.
#   bash lab/gpu_faults.sh [--faults prefill-replica,decode-engine ...] [--recover-s N]
# One engine restart takes about as long as the app's first start (model load, no CUDA graphs with
# enforce_eager); five faults with their windows may not fit one 10-minute device call: pass
# --faults to split them over calls. Rehearse first: python -m lab.rehearse_resilience_cpu OUT.
set -uo pipefail
here="$(dirname "$0")"
RUN_LOG=faults.log LAB_COMMAND="faults --stack dev" bash "$here/gpu_run.sh" "$@"
status=$?
RUN_LOG=bad-requests.log LAB_COMMAND="bad-requests --stack dev" bash "$here/gpu_run.sh"
exit $(( status || $? ))
