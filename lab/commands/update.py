"""`update`: a serve-config change (engine args, model) reaching the served PD app under an open-loop load, in
place or blue/green, or a decode replica evicted (lab/update.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from lab.commands.common import (
    DEFAULT_PROBE,
    KV_CACHE_FROM_HELP,
    MODEL_KINDS,
    RESULTS_HELP,
    SET_HELP,
    kv_cache_from_probe,
    lab_models,
    make_model,
    render_args,
)
from serve_app.errors import ConfigError


def cmd_update(args) -> int:
    from lab import faults, update

    paths = [p for p in args.path.split(",") if p]
    try:
        update.check_steps(args.change, paths)
    except ValueError as error:
        raise ConfigError("--path", args.path, str(error)) from None
    rendered, source = render_args(args.stack, args.set)
    kv_cache, budget = kv_cache_from_probe(args.kv_cache_from) if args.kv_cache_from else (None, None)
    model_dir = Path(args.model_dir)
    [model] = lab_models([args.model], model_dir, args.seed, [])
    next_model = None
    if args.change == "model":  # the same architecture, another seed and folder: a new checkpoint
        card = make_model(args.model, model_dir / f"{args.model}-next", args.seed + 1)
        next_model = dataclasses.replace(model, key=f"{args.model}-next", path=card["path"], card=card)
    extra_env = {}
    if args.cache_dir:
        from lab.probe import compile_cache_env

        extra_env = compile_cache_env(args.cache_dir)
    load = faults.LoadSpec(short_prompt_tokens=args.prompt_tokens, long_prompt_tokens=args.long_prompt_tokens,
                           output_tokens=args.output_tokens, rate_per_s=args.rate, seed=args.seed)
    times = update.UpdateTimes(before_s=args.before_s, new_version_timeout_s=args.new_version_timeout_s,
                               deletion_delay_s=args.deletion_delay_s, after_s=args.after_s,
                               silence_limit_s=args.silence_limit_s)
    data = update.run_update(args.change, paths, rendered_args=rendered, source=source, model=model,
                             next_model=next_model, out_dir=Path(args.out), load=load, times=times,
                             ready_timeout_s=args.ready_timeout_s, extra_env=extra_env,
                             kv_cache_memory_bytes=kv_cache, budget_utilization=budget)
    shown = [{k: v for k, v in step.items() if k != "samples"} for step in data.get("steps", [])]
    print(json.dumps({"steps": shown, "verdict": data.get("verdict")}, indent=1, default=str))
    return 0 if (data.get("verdict") or {}).get("passed") else 1


def register(sub: argparse._SubParsersAction) -> None:
    from lab.update import CHANGES, DEFAULT_LOAD, UpdateTimes

    times, load = UpdateTimes(), DEFAULT_LOAD
    parser = sub.add_parser("update", help="a serve-config change under load: in place, blue/green, or an eviction")
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    parser.add_argument("--change", default="engine-args", choices=CHANGES,
                        help="engine-args (lab.update.ENGINE_ARGS_CHANGE), model (a second checkpoint of the same "
                             "architecture, same served id) or evict (the decode replica killed)")
    parser.add_argument("--path", default="blue-green,in-place",
                        help="steps in order on one deployment, each from the serving version to the other: "
                             "in-place, blue-green (with --change evict: evict)")
    # The stack's own engine on its GPU budget, as `run --stack dev --models qwen35-9b` and `scaling`.
    parser.add_argument("--model", default="qwen35-9b", choices=MODEL_KINDS)
    parser.add_argument("--kv-cache-from", default=DEFAULT_PROBE, help=f"{KV_CACHE_FROM_HELP} (empty: 4 GiB)")
    parser.add_argument("--model-dir", default="/tmp/lab-models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=load.rate_per_s, help="open-loop requests a second")
    parser.add_argument("--prompt-tokens", type=int, default=load.short_prompt_tokens)
    parser.add_argument("--long-prompt-tokens", type=int, default=load.long_prompt_tokens, help="every 4th request's")
    parser.add_argument("--output-tokens", type=int, default=load.output_tokens)
    parser.add_argument("--before-s", type=float, default=times.before_s, help="load before each change")
    parser.add_argument("--new-version-timeout-s", type=float, default=times.new_version_timeout_s,
                        help="longest wait from a change for the new version to serve (blue/green: to be RUNNING)")
    parser.add_argument("--deletion-delay-s", type=float, default=times.deletion_delay_s,
                        help="blue/green: the old app kept after the switch (rayClusterDeletionDelaySeconds)")
    parser.add_argument("--after-s", type=float, default=times.after_s, help="load after each update is done")
    parser.add_argument("--silence-limit-s", type=float, default=times.silence_limit_s,
                        help="the longest stretch without a token that still counts as serving")
    parser.add_argument("--cache-dir", default="", help="compile caches every engine of the run shares")
    parser.add_argument("--ready-timeout-s", type=float, default=480, help="longest wait for the first version")
    parser.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    parser.set_defaults(func=cmd_update)
