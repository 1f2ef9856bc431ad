"""`render`: the lab configs the overlay makes from the stack's render, and the keys it changed."""

from __future__ import annotations

import argparse
import json

from lab.commands.common import SET_HELP, VARIANTS_HELP, render_args


def cmd_render(args) -> int:
    from lab.apps import LabModel, lab_apps
    from lab.overlay import GiB, changed_paths
    from lab.variants import parse_variants

    rendered, source = render_args(args.stack, args.set)
    model = LabModel(key="model", path=args.model_path, dummy_weights=False, compare_outputs=False,
                     prompt_token_range=(4, 100))
    apps = lab_apps(rendered, [model], gpus=args.gpus, kv_cache_memory_bytes=None if args.gpus > 1 else 4 * GiB,
                    variants=parse_variants(args.variants))
    print(f"# source: {source}")
    print(json.dumps({"rendered": rendered, "lab_apps": {a.name: a.args for a in apps}}, indent=2))
    for app in apps:
        if app.mode != "pd":
            continue
        for role in ("prefill_config", "decode_config"):
            print(f"# {app.name} {role}: keys the variant and overlay changed: "
                  f"{sorted(changed_paths(rendered[role], app.args[role]))}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    render = sub.add_parser("render", help="show the lab configs the overlay makes from the stack's render")
    render.add_argument("--stack", default="dev", help="stack file Pulumi.<stack>.yaml ('' = PDAppConfig defaults)")
    render.add_argument("--model-path", default="/tmp/lab-models/tiny")
    render.add_argument("--gpus", type=int, default=1, help="1: shared GPU; 2: a whole GPU per engine")
    render.add_argument("--variants", default="", help=VARIANTS_HELP)
    render.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    render.set_defaults(func=cmd_render)
