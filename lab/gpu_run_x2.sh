#!/usr/bin/env bash
# PD across two GPUs of one host (the lent nvidia-h200-x2): prefill and decode on separate whole GPUs
# (KV over NIXL/UCX between them), the colocated baseline on one GPU, one stage after the other.
# Same bundle, steps and outputs as gpu_run.sh (lab/README.md); this only picks the two-GPU run and
# its workload: Llama-3-8B shape timed at 2,048 prompt tokens (concurrency 1, 8, 32) plus the
# interference load; the tiny model proves the path (NIXL, greedy PD == colocated), untimed.
#   bash lab/gpu_run_x2.sh [--deadline-s N ...more `python -m lab run` options]
# Each stage start took 130-175 s on the H200s (lab/results/2026-11-29-h200x2-report.md), so
# the three stages need about 10 min. Within shorter device calls, split the run:
#   bash lab/gpu_run_x2.sh --modes pd --deadline-s 415     # then, while the machine is warm:
#   bash lab/gpu_run_x2.sh --modes colocated --deadline-s 290
# and compare the tiny model's greedy outputs of the two results files afterwards (no GPU needed):
#   python -m lab compare-greedy COLOCATED/lab-result.json PD/lab-result.json --model tiny
# CPU rehearsal of all three: python -m lab.rehearse_cpu_x2 OUT [pd|colocated].
exec bash "$(dirname "$0")/gpu_run.sh" --gpus 2 --models llama3-8b-shape,tiny --untimed tiny \
  --prompt-tokens 2048 --output-tokens 128 --concurrencies 1,8,32 \
  --requests-per-slot 2 --min-requests 4 --max-requests 32 --interference "$@"
