"""python -m lab {render,make-model,run,report} — the single-host GPU lab.

  render      print the stack's rendered PD args, the lab configs and the keys the overlay changed
  make-model  write the tiny random Llama, the Llama-3-8B-shaped model or Qwen3.5-9B's architecture
  probe-memory  start the stack's engine on a GPU's memory budget, one variant at a time (lab/probe.py)
  replica-start  a replica's start under Ray Serve LLM, stock and single-process, alternately (lab/replica_start.py)
  run         deploy PD + colocated for each model on this host's GPU(s), check, time, write JSON
              (--gpus 2: prefill and decode on separate whole GPUs, apps in stages; see lab/gpu_run_x2.sh)
  compare-greedy  greedy PD == colocated across a split run's two results files
  bench-compare  `pdctl bench` beside `vllm bench serve` against one running endpoint (within 5%?)
  report      the results JSON as a markdown table
  loadtime    weight-load time of the 8B-shaped checkpoint, default loader vs Run:ai streamer
  resilience  several of faults, soak, bad-requests, bench-compare on one deployment (--runs)
  faults      kill replicas, engine processes and the Serve controller under load (lab/faults.py)
  soak        a long steady load, memory sampled (lab/soak.py)
  bad-requests  the requests clients get wrong, a burst, then a normal one (lab/bad_requests.py)
  scaling     decode scaled 1 → 2 → 1 by the stack's autoscaling config under a load ramp (lab/scaling.py)
  update      a serve-config change under an open-loop load: in place, blue/green, or an eviction (lab/update.py)
  door        the front door's added latency and its 401/429 under load, on the stack's PD app (lab/door.py)
  door-cost   the front door's own work per request, in-process on the CPU (lab/door_cost.py)
  pd-hop      a run's TTFT at concurrency 1 split into Serve's hops, prefill and the rest (lab/pd_hop.py)
  validation-predict  the SLO model's TTFT/TPOT p90 for the open-loop validation run, before it runs
  validation-table    that run's results against the predictions (lab/validation.py)

`--set KEY=VALUE` (render, resilience, faults, soak, bad-requests, scaling; repeatable) sets a serving
stack key over Pulumi.<stack>.yaml, validated like the stack file (lab/stack.py).
"""

from __future__ import annotations

import argparse
import sys

from lab.commands import (
    compare,
    door,
    loadtime,
    models,
    probe,
    render,
    resilience,
    results,
    run,
    starts,
    update,
    validation,
)
from serve_app.errors import ConfigError

# In the order `--help` lists the commands.
GROUPS = (render, models, run, probe, starts, compare, resilience, update, loadtime, door, results, validation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
