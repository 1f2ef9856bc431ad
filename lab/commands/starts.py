"""`replica-start`: one replica of the stack's decode engine started under Ray Serve LLM, as Ray Serve LLM
starts it and with the stack's single-process engine, alternately (lab/replica_start.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.commands.common import RESULTS_HELP, SET_HELP, make_model, render_args
from lab.replica_start import ENGINES
from serve_app.errors import ConfigError


def kv_cache_bytes(stack: str, overrides: list[str], value: str) -> tuple[int | None, dict | None]:
    """--kv-cache-bytes: plan (what kvCacheFromPlan renders), a byte count, or none (vLLM's profiling)."""
    if value == "none":
        return None, None
    if value == "plan":
        from lab.probe import planned_kv_cache_bytes
        from lab.stack import stack_app
        from offline.overrides import parse_overrides

        plan = planned_kv_cache_bytes(stack_app(stack, overrides=parse_overrides(overrides)))
        return plan["kv_cache_bytes"], plan
    if not value.isdigit():
        raise ConfigError("--kv-cache-bytes", value, "plan, none or a byte count")
    return int(value), None


def cmd_replica_start(args) -> int:
    from lab.probe import MIB, budget_utilization
    from lab.provenance import gpu
    from lab.replica_start import replica_config, replica_starts

    engines = [e for e in args.engines.split(",") if e]
    for engine in engines:
        if engine not in ENGINES:
            raise ConfigError("--engines", engine, f"a comma-separated list of {sorted(ENGINES)}")
    rendered, source = render_args(args.stack, args.set)
    decode = rendered["decode_config"]
    kv_bytes, plan = kv_cache_bytes(args.stack, args.set or [], args.kv_cache_bytes)
    card_bytes = int(gpu()["memory_total"].split()[0]) * MIB
    utilization = budget_utilization(float(decode["engine_kwargs"]["gpu_memory_utilization"]), args.budget_mib,
                                     card_bytes)
    card = make_model("qwen35-9b", Path(args.model_dir) / "qwen35-9b", 0)
    config = replica_config(decode, model_path=card["path"], utilization=utilization, kv_cache_bytes=kv_bytes)
    facts = {"source": source, "budget_mib": args.budget_mib, "utilization": utilization,
             "kv_cache_bytes": kv_bytes, "kv_cache_plan": plan, "cache_dir": args.cache_dir}
    data = replica_starts(config, engines=engines, starts=args.starts, cache_dir=args.cache_dir,
                          out_dir=Path(args.out), deadline_s=args.deadline_s, min_start_s=args.min_start_s,
                          timeout_s=args.timeout_s, facts=facts)
    return 0 if data["starts"] and all("error" not in start for start in data["starts"]) else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    starts = sub.add_parser("replica-start", help="a replica's start under Ray Serve LLM, stock and single-process")
    starts.add_argument("--stack", default="dev")
    starts.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    starts.add_argument("--engines", default="single-process,stock",
                        help=f"engines to alternate, in order (of {sorted(ENGINES)})")
    starts.add_argument("--starts", type=int, default=4, help="starts in all, alternating --engines")
    starts.add_argument("--budget-mib", type=int, default=22_888,
                        help="the deployment GPU's memory (default: g6.8xlarge's L4, facts/instances.py)")
    starts.add_argument("--kv-cache-bytes", default="plan", metavar="plan|none|BYTES",
                        help="vLLM's kv_cache_memory_bytes: plan = what kvCacheFromPlan renders")
    starts.add_argument("--model-dir", default="/tmp/lab-models")
    starts.add_argument("--cache-dir", default="/tmp/lab-cc/shared", help="compile caches, shared by every start")
    starts.add_argument("--deadline-s", type=float, default=420, help="no start begins later than this")
    starts.add_argument("--min-start-s", type=float, default=150, help="a start needs this much time left")
    starts.add_argument("--timeout-s", type=float, default=360, help="a start not serving by then has failed")
    starts.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    starts.set_defaults(func=cmd_replica_start)
