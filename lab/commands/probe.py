"""`probe-memory`: the stack's engine started on a GPU's memory budget, one variant at a time (lab/probe.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.commands.common import RESULTS_HELP, SET_HELP, caches_from, make_model, render_args
from lab.probe import DEFAULT_VARIANTS, variant_parts
from serve_app.errors import ConfigError


def cmd_probe_memory(args) -> int:
    from lab.probe import probe_memory

    rendered, source = render_args(args.stack, args.set)
    kv_plan = None
    kv_bytes = args.kv_cache_bytes
    if kv_bytes == "plan":
        from lab.probe import planned_kv_cache_bytes
        from lab.stack import stack_app
        from offline.overrides import parse_overrides

        kv_plan = planned_kv_cache_bytes(stack_app(args.stack, overrides=parse_overrides(args.set or [])))
        kv_bytes = kv_plan["kv_cache_bytes"]
        print(f"kv_cache_memory_bytes from the plan: {kv_plan}", flush=True)
    elif kv_bytes is not None:
        if not kv_bytes.isdigit():
            raise ConfigError("--kv-cache-bytes", kv_bytes, "a byte count, or plan")
        kv_bytes = int(kv_bytes)
    variants = tuple(v for v in args.variants.split(",") if v)
    for name in variants:
        variant_parts(name, kv_bytes)
    caches_from(args.caches_from)
    card = make_model("qwen35-9b", Path(args.model_dir) / "qwen35-9b", 0)
    load = None
    if args.concurrent_sequences:
        load = {"sequences": args.concurrent_sequences, "prompt_tokens": args.sequence_tokens - args.output_tokens,
                "output_tokens": args.output_tokens}
    data = probe_memory(rendered, source, model_path=card["path"], budget_mib=args.budget_mib, out_dir=Path(args.out),
                        cache_dir=args.cache_dir, variants=variants,
                        kv_cache_bytes=kv_bytes, kv_cache_plan=kv_plan, flashinfer_dir=args.flashinfer_dir,
                        caches_from=args.caches_from, load=load)
    return 0 if data["probes"] and data["probes"][0]["started"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    probe = sub.add_parser("probe-memory", help="the stack's engine on a GPU's memory budget, one start at a time")
    probe.add_argument("--stack", default="dev")
    probe.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    probe.add_argument("--budget-mib", type=int, default=22_888,
                       help="the deployment GPU's memory (default: g6.8xlarge's L4, facts/instances.py)")
    probe.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                       help="engine starts in order; a name's parts say what it changes: eager, vision, fp8 (FP8 "
                            "weights), kv-bytes (the KV cache fixed at --kv-cache-bytes), warm (same caches again)")
    probe.add_argument("--kv-cache-bytes", metavar="BYTES|plan",
                       help="vLLM's kv_cache_memory_bytes for the kv-bytes variants; plan: the product's restart KV "
                            "bytes for the stack's decode engine on g6.8xlarge, less the plan's margin (what "
                            "kvCacheFromPlan renders)")
    probe.add_argument("--model-dir", default="/tmp/lab-models")
    probe.add_argument("--cache-dir", default="/tmp/lab-compile-cache", help="compile caches: empty = a cold start")
    probe.add_argument("--flashinfer-dir", help="FlashInfer's JIT builds (default: in --cache-dir)")
    probe.add_argument("--caches-from", metavar="DIR",
                       help="another process's compile caches: copied into --cache-dir first, then DIR is removed; "
                            "DIR = --cache-dir restores them at the path they were written at (the sidecar's case)")
    probe.add_argument("--concurrent-sequences", type=int, default=0,
                       help="after each start, this many sequences at once, each --sequence-tokens long (0: none)")
    probe.add_argument("--sequence-tokens", type=int, default=4096, help="prompt + output tokens of each sequence")
    probe.add_argument("--output-tokens", type=int, default=256, help="generated tokens of each sequence")
    probe.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    probe.set_defaults(func=cmd_probe_memory)
