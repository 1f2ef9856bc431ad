"""`resilience`, `faults`, `soak`, `bad-requests` and `scaling`: one deployment of the stack's PD app under
faults, a long load, bad requests or a load ramp (lab/resilience.py runs several in order)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.commands.common import (
    DEFAULT_PROBE,
    KV_CACHE_FROM_HELP,
    MODEL_KINDS,
    RESULTS_HELP,
    SET_HELP,
    bench_rounds,
    caches_from,
    engine_env,
    kv_cache_from_probe,
    lab_models,
    render_args,
)
from lab.faults import FAULTS
from lab.scaling import Ramp
from serve_app.errors import ConfigError

# Each command and its help; `resilience` runs several of the others (--runs).
COMMANDS = (("resilience", "several of the runs below, in order, on one deployment (--runs)"),
            ("faults", "kill replicas, engine processes and the Serve controller under a steady load"),
            ("soak", "a long steady mixed load; failed requests and memory over time"),
            ("bad-requests", "bad requests, a burst and a normal request against the PD app"),
            ("scaling", "decode 1 → 2 → 1 replicas by the stack's autoscaling config under a load ramp"))


def cmd_resilience(args) -> int:
    from lab import faults, resilience, scaling

    kinds = [args.command] if args.command != "resilience" else [k for k in args.runs.split(",") if k]
    if not kinds or set(kinds) - set(resilience.KINDS):
        raise ConfigError("--runs", args.runs, f"a comma-separated list of {', '.join(resilience.KINDS)}")
    names = tuple(f for f in args.faults.split(",") if f)
    if not names or set(names) - set(faults.FAULTS):
        raise ConfigError("--faults", args.faults, f"a comma-separated subset of {', '.join(faults.FAULTS)}")
    bench_rounds(args.bench_rounds)
    rendered, source = render_args(args.stack, args.set)
    ramp = scaling.Ramp(low_concurrency=args.low_concurrency, high_concurrency=args.high_concurrency,
                        low_s=args.low_s, up_timeout_s=args.up_timeout_s, hold_s=args.hold_s,
                        down_timeout_s=args.down_timeout_s, after_s=args.after_s, seed=args.seed)
    if "scaling" in kinds:  # before the models are written and Ray starts
        scaling.check_ramp(ramp, rendered["decode_config"])
    if args.caches_from and not args.cache_dir:
        raise ConfigError("--caches-from", args.caches_from, "given with --cache-dir, the folder it is copied into")
    caches_from(args.caches_from)
    kv_cache, budget = kv_cache_from_probe(args.kv_cache_from) if args.kv_cache_from else (None, None)
    [model] = lab_models([args.model], Path(args.model_dir), args.seed, [])
    compile_caches, extra_env = None, {}
    if args.cache_dir:  # every engine of the run reads and writes one folder: a new replica finds it warm
        from lab.probe import compile_cache_env, prepare_caches

        compile_caches, extra_env = prepare_caches(args.cache_dir, args.caches_from), compile_cache_env(args.cache_dir)
    extra_env = {**extra_env, **engine_env(args.stack, args.set)}
    options = resilience.RunOptions(
        fault_names=names,
        load=faults.LoadSpec(concurrency=args.concurrency, long_prompt_tokens=args.long_prompt_tokens, seed=args.seed),
        times=faults.FaultTimes(recover_s=args.recover_s), duration_s=args.duration_s,
        sample_every_s=args.sample_every_s, ramp=ramp,
        bench_requests=args.bench_requests, bench_concurrency=args.bench_concurrency,
        bench_rounds=args.bench_rounds)
    documents = resilience.run_resilience(kinds, rendered_args=rendered, source=source, model=model,
                                          out_dir=Path(args.out), options=options, ready_timeout_s=args.ready_timeout_s,
                                          compile_caches=compile_caches, extra_env=extra_env,
                                          kv_cache_memory_bytes=kv_cache, budget_utilization=budget)
    verdicts = {kind: documents.get(kind, {}).get("verdict") for kind in kinds}
    print(json.dumps(verdicts, indent=2))
    return 0 if all((v or {}).get("passed") for v in verdicts.values()) else 1


def _add_load_options(parser: argparse.ArgumentParser, kind: str) -> None:
    """The deployment, the steady load, the faults, the soak and the side-by-side bench. The scale-out
    times a new replica's start, so it deploys the stack's own engine on its GPU budget; the other runs
    judge Serve's and the PD hop's behaviour and keep the tiny stand-in."""
    stack_engine = kind == "scaling"
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--model", default="qwen35-9b" if stack_engine else "tiny", choices=MODEL_KINDS)
    parser.add_argument("--kv-cache-from", default=DEFAULT_PROBE if stack_engine else "",
                        help=f"{KV_CACHE_FROM_HELP} (empty: a fixed 4 GiB KV cache)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    parser.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    parser.add_argument("--model-dir", default="/tmp/lab-models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4, help="clients of the steady load")
    parser.add_argument("--long-prompt-tokens", type=int, default=2048, help="every 4th request's prompt")
    parser.add_argument("--faults", default=",".join(FAULTS), help="faults to inject, in order")
    parser.add_argument("--recover-s", type=float, default=240.0, help="longest wait for a fault to heal")
    parser.add_argument("--duration-s", type=float, default=600.0, help="soak: how long the load runs")
    parser.add_argument("--sample-every-s", type=float, default=5.0, help="soak: memory sampling interval")
    parser.add_argument("--bench-requests", type=int, default=128,
                        help="bench-compare: timed requests per tool and round")
    parser.add_argument("--bench-concurrency", type=int, default=8, help="bench-compare: requests in flight")
    parser.add_argument("--cache-dir", default="",
                        help="compile caches (vLLM, Triton, FlashInfer) every engine shares, a replica Serve adds "
                             "included (default: each library's own)")
    parser.add_argument("--caches-from", metavar="DIR",
                        help="another start's compile caches: copied into --cache-dir first, then DIR is removed")
    parser.add_argument("--bench-rounds", type=int, default=3,
                        help="bench-compare: rounds of both tools, order alternating; medians judged")


def _add_ramp_options(parser: argparse.ArgumentParser) -> None:
    """The scaling run's load ramp, its defaults those of lab.scaling.Ramp."""
    ramp = Ramp()
    parser.add_argument("--low-concurrency", type=int, default=ramp.low_concurrency,
                        help="scaling: clients before the step and after the drop (≤ the decode target)")
    parser.add_argument("--high-concurrency", type=int, default=ramp.high_concurrency,
                        help="scaling: clients from the step to the drop (> the decode target)")
    parser.add_argument("--low-s", type=float, default=ramp.low_s, help="scaling: low load before the step")
    parser.add_argument("--up-timeout-s", type=float, default=ramp.up_timeout_s,
                        help="scaling: longest wait from the step for the 2nd decode replica to serve")
    parser.add_argument("--hold-s", type=float, default=ramp.hold_s,
                        help="scaling: high load kept after the new replica served")
    parser.add_argument("--down-timeout-s", type=float, default=ramp.down_timeout_s,
                        help="scaling: longest wait from the drop for decode to be back at 1 replica "
                             "(0: no wait, the scale-down not judged)")
    parser.add_argument("--after-s", type=float, default=ramp.after_s,
                        help="scaling: low load kept after decode is back at 1 (or after the drop)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    for kind, text in COMMANDS:
        parser = sub.add_parser(kind, help=text)
        if kind == "resilience":
            parser.add_argument("--runs", default="bench-compare,bad-requests,faults,soak",
                                help="comma-separated, in order: bench-compare, bad-requests, faults, soak, "
                                     "scaling (needs --set decodeMaxReplicas=2)")
        _add_load_options(parser, kind)
        _add_ramp_options(parser)
        parser.add_argument("--ready-timeout-s", type=float, default=420)
        parser.set_defaults(func=cmd_resilience)
