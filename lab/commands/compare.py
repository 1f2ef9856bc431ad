"""`compare-greedy` and `bench-compare`: greedy PD == colocated across a split run's two results files, and
`pdctl bench` beside `vllm bench serve` against one running endpoint."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.commands.common import RESULTS_HELP, bench_rounds
from serve_app.errors import ConfigError

# The workload settings that fix the greedy comparison's prompts and rule: equal in both runs.
COMPARE_SETTINGS = ("seed", "compare_prompts", "compare_prompt_tokens", "compare_output_tokens")


def cmd_compare_greedy(args) -> int:
    """Greedy PD == colocated across two results files (a split run: --modes pd, --modes colocated)."""
    from lab.apps import Workload
    from lab.runner import compare_greedy_outputs

    colocated, pd = (json.loads(Path(p).read_text()) for p in (args.colocated_result, args.pd_result))
    for name in COMPARE_SETTINGS:
        if colocated["workload"][name] != pd["workload"][name]:
            raise ConfigError(f"workload.{name}", (colocated["workload"][name], pd["workload"][name]),
                              "the same value in both results files", "they must have compared the same prompts")
    reference = colocated.get("greedy_outputs", {}).get(f"{args.model}-colocated")
    candidate = pd.get("greedy_outputs", {}).get(f"{args.model}-pd")
    if reference is None or candidate is None:
        raise ConfigError("--model", args.model, "a model with greedy outputs in both files "
                          f"({args.model}-colocated in the first, {args.model}-pd in the second)")
    spec = Workload(**{k: colocated["workload"][k] for k in (*COMPARE_SETTINGS, "clear_margin", "min_clear_positions")})
    result = compare_greedy_outputs(reference, candidate, spec)
    print(json.dumps({k: v for k, v in result.items() if k != "per_sequence"}, indent=2))
    return 0 if result["passed"] else 1


def cmd_bench_compare(args) -> int:
    from lab import bench_compare

    side = bench_compare.SideBySide(
        base_url=args.base_url.rstrip("/"), model=args.model, tokenizer=args.tokenizer, input_tokens=args.input_tokens,
        output_tokens=args.output_tokens, requests=args.requests, concurrency=args.concurrency, rate=args.rate,
        warmup=args.warmup, seed=args.seed, rounds=bench_rounds(args.bench_rounds))
    result = bench_compare.run(side, Path(args.out))
    Path(args.out, "side-by-side.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result.get(k) for k in ("comparison", "pdctl_error", "vllm_error") if k in result}, indent=2))
    return 0 if (result.get("comparison") or {}).get("agree") else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    greedy = sub.add_parser("compare-greedy", help="greedy PD == colocated across two results files")
    greedy.add_argument("colocated_result")
    greedy.add_argument("pd_result")
    greedy.add_argument("--model", default="tiny")
    greedy.set_defaults(func=cmd_compare_greedy)

    side = sub.add_parser("bench-compare", help="pdctl bench beside vllm bench serve against one endpoint")
    side.add_argument("--base-url", required=True, help="the app's root, without /v1 (http://127.0.0.1:8000/<prefix>)")
    side.add_argument("--model", required=True, help="the served model id")
    side.add_argument("--tokenizer", required=True, help="Hugging Face id or directory of the model's tokenizer")
    side.add_argument("--input-tokens", type=int, default=512)
    side.add_argument("--output-tokens", type=int, default=128)
    side.add_argument("--requests", type=int, default=128, help="timed requests per tool and round")
    side.add_argument("--concurrency", type=int, default=8, help="in flight (a cap with --rate)")
    side.add_argument("--rate", type=float, default=None, help="requests per second, Poisson (default: closed loop)")
    side.add_argument("--warmup", type=int, default=8)
    side.add_argument("--seed", type=int, default=0, help="round i (from 0) sends seed + i with both tools")
    side.add_argument("--bench-rounds", type=int, default=3,
                      help="rounds of both tools, order alternating; agreement is judged on the medians")
    side.add_argument("--out", default=".lab/out/side-by-side", help=RESULTS_HELP)
    side.set_defaults(func=cmd_bench_compare)
