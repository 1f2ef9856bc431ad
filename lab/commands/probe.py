"""`probe-memory`: the stack's engine started on a GPU's memory budget, one variant at a time (lab/probe.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.commands.common import RESULTS_HELP, SET_HELP, make_model, render_args


def cmd_probe_memory(args) -> int:
    from lab.probe import probe_memory

    rendered, source = render_args(args.stack, args.set)
    card = make_model("qwen35-9b", Path(args.model_dir) / "qwen35-9b", 0)
    data = probe_memory(rendered, source, model_path=card["path"], budget_mib=args.budget_mib, out_dir=Path(args.out),
                        cache_dir=args.cache_dir, variants=tuple(v for v in args.variants.split(",") if v))
    return 0 if data["probes"] and data["probes"][0]["started"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    probe = sub.add_parser("probe-memory", help="the stack's engine on a GPU's memory budget, one start at a time")
    probe.add_argument("--stack", default="dev")
    probe.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    probe.add_argument("--budget-mib", type=int, default=22_888,
                       help="the deployment GPU's memory (default: g6.8xlarge's L4, facts/instances.py)")
    probe.add_argument("--variants", default="as-rendered,eager,vision,vision-eager,as-rendered-warm")
    probe.add_argument("--model-dir", default="/tmp/lab-models")
    probe.add_argument("--cache-dir", default="/tmp/lab-compile-cache", help="compile caches: empty = a cold start")
    probe.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    probe.set_defaults(func=cmd_probe_memory)
