"""Rehearse the resilience runs (faults, bad requests, soak, scaling) on a CPU machine, engines faked.

The real Ray, Serve and Ray Serve LLM app the stack renders (`build_pd_openai_app` of its args, the
colocated baseline beside it); only the vLLM engines are `lab.fake_engine`. All the kinds run on
one deployment, as on the GPU host. Checks the fault
injection, observation and measurement, the bad-request list, the soak's sampling and the scaling
ramp before GPU time is spent. Numbers from it are about fake engines on a CPU: not results. From
the repository root:
    python -m lab.rehearse_resilience_cpu OUT_DIR [faults,bad-requests,soak,scaling] [--soak-s N]
        [--set KEY=VALUE ...] [--cache-dir DIR]
With `scaling` among the kinds the stack is rendered with the GPU run's keys (`lab.scaling`
STACK_OVERRIDES: decode and prefill autoscaled from 1 to 2, short delays) unless --set is given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab import apps, faults, scaling
from lab.probe import compile_cache_env, prepare_caches
from lab.resilience import KINDS, RunOptions, run_resilience
from lab.stack import rendered_pd_serving_args
from offline.overrides import parse_overrides

# Fake engines start in seconds: shorter windows than on the GPU host.
CPU_TIMES = faults.FaultTimes(before_s=4.0, recover_s=90.0, after_s=6.0)
CPU_LOAD = faults.LoadSpec(concurrency=3, short_prompt_tokens=32, long_prompt_tokens=512, output_tokens=16)
# Serve's own windows (metrics pushed every 10 s, averaged over 30 s) still apply on a CPU.
CPU_RAMP = scaling.Ramp(high_concurrency=8, output_tokens=64, low_s=15.0, up_timeout_s=120.0, hold_s=10.0,
                        down_timeout_s=120.0, after_s=5.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("kinds", nargs="?", default="bad-requests,faults,soak",
                        help=f"comma-separated, in order, of {', '.join(KINDS)} (bench-compare: the tiny model)")
    parser.add_argument("--soak-s", type=float, default=60.0)
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="a serving stack key over dev's")
    parser.add_argument("--cache-dir", default="", help="one compile-cache folder for every engine (as on the GPU)")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    overrides = args.set if args.set is not None else list(scaling.STACK_OVERRIDES) if "scaling" in kinds else []
    rendered, source = rendered_pd_serving_args("dev", overrides=parse_overrides(overrides))
    model = apps.LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500))
    options = RunOptions(load=CPU_LOAD, times=CPU_TIMES, duration_s=args.soak_s, sample_every_s=2.0,
                         warmup_s=min(20.0, args.soak_s / 3), burst_size=64, ramp=CPU_RAMP,
                         bench_requests=32, bench_rounds=2)  # both orders once; fake engines time nothing
    caches = prepare_caches(args.cache_dir, None) if args.cache_dir else None
    env = compile_cache_env(args.cache_dir) if args.cache_dir else None
    documents = run_resilience(kinds, rendered_args=rendered, source=source + " [CPU rehearsal, fake engines]",
                               model=model, out_dir=Path(args.out), fake_engines=True, options=options,
                               ready_timeout_s=180, compile_caches=caches, extra_env=env)
    verdicts = {kind: documents.get(kind, {}).get("verdict") for kind in kinds}
    print(json.dumps(verdicts, indent=1))
    if "scaling" in documents and "scaling" in documents["scaling"]:
        result = documents["scaling"]["scaling"]
        shown = ("scale_up", "new_replica_start", "failed_requests", "scale_down", "replicas", "requests", "timeline")
        print(json.dumps({k: result[k] for k in shown},
                         indent=1))
    return 0 if all((v or {}).get("passed") for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
