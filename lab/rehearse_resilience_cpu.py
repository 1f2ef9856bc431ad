"""Rehearse the resilience runs (faults, bad requests, soak) on a CPU machine, engines faked.

The real Ray, Serve and Ray Serve LLM app the stack renders (`build_pd_openai_app` of its args, the
colocated baseline beside it); only the vLLM engines are `lab.fake_engine`. All the kinds run on
one deployment, as on the GPU host. Checks the fault
injection, observation and measurement, the bad-request list and the soak's sampling before GPU
time is spent. Numbers from it are about fake engines on a CPU: not results. From the repository root:
    python -m lab.rehearse_resilience_cpu OUT_DIR [faults,bad-requests,soak] [--soak-s N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab import faults, runner
from lab.resilience import KINDS, RunOptions, run_resilience
from lab.stack import rendered_pd_serving_args

# Fake engines start in seconds: shorter windows than on the GPU host.
CPU_TIMES = faults.FaultTimes(before_s=4.0, recover_s=90.0, after_s=6.0)
CPU_LOAD = faults.LoadSpec(concurrency=3, short_prompt_tokens=32, long_prompt_tokens=512, output_tokens=16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("kinds", nargs="?", default="bad-requests,faults,soak",
                        help=f"comma-separated, in order, of {', '.join(KINDS)} (bench-compare: the tiny model)")
    parser.add_argument("--soak-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    rendered, source = rendered_pd_serving_args("dev")
    model = runner.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    kinds = args.kinds.split(",")
    options = RunOptions(load=CPU_LOAD, times=CPU_TIMES, duration_s=args.soak_s, sample_every_s=2.0,
                         warmup_s=min(20.0, args.soak_s / 3), burst_size=64)
    documents = run_resilience(kinds, rendered_args=rendered, source=source + " [CPU rehearsal, fake engines]",
                               model=model, out_dir=Path(args.out), fake_engines=True, options=options,
                               ready_timeout_s=180)
    verdicts = {kind: documents.get(kind, {}).get("verdict") for kind in kinds}
    print(json.dumps(verdicts, indent=1))
    return 0 if all((v or {}).get("passed") for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
