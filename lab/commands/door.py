"""`door`: the front door's added latency and its refusals under load, the stack's PD app on this host's
GPU (lab/door.py), with a results JSON and a markdown summary."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.commands.common import (
    DEFAULT_PROBE,
    KV_CACHE_FROM_HELP,
    MODEL_KINDS,
    RESULTS_HELP,
    kv_cache_from_probe,
    lab_models,
)
from serve_app.errors import ConfigError

# `python -m pdctl plan --stack dev -o json`'s outputs.clientConfig (tests/lab/test_lab_door.py keeps it current).
DEFAULT_CLIENT_CONFIG = "lab/client-config-dev.json"
# On a bare machine (every compile cache empty) the stack's two engines were still starting 300 s after
# Serve deployed them (docs/FRONT_DOOR.md#door-lab): the wait covers a cold start, the deadline
# counts from the run's start, so the timed passes keep their own 290 s after the wait.
READY_TIMEOUT_S = 900
PASSES_S = 290


def door_spec(args):
    from lab.apps import Workload
    from lab.commands.run import _int_list
    from lab.door import DoorSpec

    if args.repeats < 1:
        raise ConfigError("--repeats", args.repeats, "a positive integer")
    if args.limited_rpm < 1:
        raise ConfigError("--limited-rpm", args.limited_rpm, "a positive integer")
    timing = Workload(prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed,
                      concurrencies=_int_list("--concurrencies", args.concurrencies),
                      requests_per_concurrency_slot=args.requests_per_slot, min_requests=args.min_requests,
                      max_requests=args.max_requests, repeats=args.repeats)
    return DoorSpec(timing=timing, load_concurrency=args.load_concurrency, limited_requests_per_minute=args.limited_rpm)


def read_client_config(path: str) -> dict:
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict) or not {"base_url", "model"} <= set(config):
        raise ConfigError("--client-config", path, "a JSON file holding the stack's clientConfig output "
                          "(base_url, model), e.g. `pdctl plan -o json`'s outputs.clientConfig")
    return config


def cmd_door(args) -> int:
    from lab.door import KEY_TABLE, make_keys, run_door, write_key_table
    from lab.door_report import markdown_report
    from lab.probe import compile_cache_env
    from lab.stack import rendered_pd_serving_args
    from serve_app.config import KeyedIngress

    spec = door_spec(args)
    client_config = read_client_config(args.client_config)
    kv_cache, budget = kv_cache_from_probe(args.kv_cache_from)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    key_table = (out / KEY_TABLE).resolve()
    keys = make_keys()
    write_key_table(key_table, keys, spec)
    keyed, source = rendered_pd_serving_args(args.stack, api_keys=KeyedIngress(keys_file=str(key_table),
                                                                                code_version="lab"))
    [model] = lab_models([args.model], Path(args.model_dir), args.seed, [])
    data = run_door(keyed_args=keyed, source=source, model=model, out_dir=out, spec=spec,
                    client_config=client_config, key_table=key_table, keys=keys, kv_cache_memory_bytes=kv_cache,
                    budget_utilization=budget, extra_env=compile_cache_env(args.cache_dir) if args.cache_dir else {},
                    ready_timeout_s=args.ready_timeout_s, deadline_s=args.deadline_s)
    report = markdown_report(data)
    (out / "door-report.md").write_text(report)
    print(report)
    return 0 if data["verdict"]["passed"] else 1


def cmd_door_cost(args) -> int:
    from lab.door_cost import measure

    if args.requests < 1:
        raise ConfigError("--requests", args.requests, "a positive integer")
    result = measure(args.requests, args.prompt_tokens, args.output_tokens)
    print(f"front door's own work per streamed request ({result['requests']:,} requests, {result['prompt_tokens']} "
          f"prompt and {result['output_tokens']} output tokens, CPU {result['cpu']}): p50 {result['p50_us']} µs, "
          f"p99 {result['p99_us']} µs, max {result['max_us']} µs")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    cost = sub.add_parser("door-cost", help="the front door's own work per request, in-process on the CPU "
                                            "(lab/door_cost.py)")
    cost.add_argument("--requests", type=int, default=20_000)
    cost.add_argument("--prompt-tokens", type=int, default=128)
    cost.add_argument("--output-tokens", type=int, default=64)
    cost.add_argument("--out", default="", help="also write the result as JSON here")
    cost.set_defaults(func=cmd_door_cost)
    door = sub.add_parser("door", help="the front door's added latency (c=1, 16) and its 401/429 under load")
    door.add_argument("--stack", default="dev")
    door.add_argument("--model", default="qwen35-9b", choices=MODEL_KINDS)
    door.add_argument("--model-dir", default="/tmp/lab-models")
    door.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    door.add_argument("--seed", type=int, default=0)
    door.add_argument("--kv-cache-from", default=DEFAULT_PROBE, help=KV_CACHE_FROM_HELP)
    door.add_argument("--cache-dir", default="", help="compile caches (vLLM, Triton, FlashInfer) for the engines")
    door.add_argument("--client-config", default=DEFAULT_CLIENT_CONFIG,
                      help="the stack's clientConfig output (JSON) the OpenAI SDK check is built from")
    door.add_argument("--prompt-tokens", type=int, default=128)
    door.add_argument("--output-tokens", type=int, default=64)
    door.add_argument("--concurrencies", default="1,16", help="comma-separated client concurrencies to time")
    door.add_argument("--requests-per-slot", type=int, default=4, help="requests = clamp(this × concurrency, min, max)")
    door.add_argument("--min-requests", type=int, default=16)
    door.add_argument("--max-requests", type=int, default=64)
    door.add_argument("--repeats", type=int, default=3,
                      help="timed passes over both paths, alternating which goes first")
    door.add_argument("--load-concurrency", type=int, default=16, help="clients of the load the refusals run under")
    door.add_argument("--limited-rpm", type=int, default=3, help="requests per minute of the limited key")
    door.add_argument("--ready-timeout-s", type=float, default=READY_TIMEOUT_S,
                      help="longest wait for the engines from Serve's deploy (sized for a bare machine's cold start)")
    door.add_argument("--deadline-s", type=float, default=READY_TIMEOUT_S + PASSES_S,
                      help="start no timed pass after this many seconds from the run's start")
    door.set_defaults(func=cmd_door)
