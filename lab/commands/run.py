"""`run`: PD and colocated apps for each model on this host's GPU(s), checked and timed; results JSON and
a markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import cast

from lab.apps import Mode
from lab.commands.common import (
    MODEL_KINDS,
    RESULTS_HELP,
    VARIANTS_HELP,
    engine_env,
    kv_cache_from_probe,
    lab_models,
    render_args,
)
from serve_app.errors import ConfigError


def _int_list(option: str, text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v)
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise ConfigError(option, text, "comma-separated positive integers, e.g. 1,8,32")
    return values


def _workload(args):
    from lab.apps import Interference, Workload

    if args.repeats < 1:
        raise ConfigError("--repeats", args.repeats, "a positive integer")
    return Workload(prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed,
                    concurrencies=_int_list("--concurrencies", args.concurrencies),
                    requests_per_concurrency_slot=args.requests_per_slot, min_requests=args.min_requests,
                    max_requests=args.max_requests, interference=Interference() if args.interference else None,
                    repeats=args.repeats, metrics_window_concurrency=args.metrics_window_concurrency,
                    side_by_side=args.side_by_side,
                    rates=tuple(float(r) for r in (args.rates or "").split(",") if r),
                    requests_per_rate=args.requests_per_rate,
                    open_loop_modes=_modes("--open-loop-modes", args.open_loop_modes))


def _modes(option: str, text: str) -> tuple[Mode, ...]:
    modes = [m for m in text.split(",") if m]
    if not modes or not set(modes) <= {"pd", "colocated"}:
        raise ConfigError(option, text, "pd, colocated or pd,colocated")
    return tuple(cast(Mode, m) for m in modes)


def _kv_cache_and_budget(args) -> tuple[int | None, float | None]:
    """Each engine's KV cache in bytes (None: vLLM profiles it) and GPU memory utilization (None: the stack's)."""
    from lab.overlay import GiB

    if args.kv_cache_from:
        probed_bytes, utilization = kv_cache_from_probe(args.kv_cache_from)
        fixed = _kv_cache_bytes(args)
        return (probed_bytes if fixed is None else fixed), utilization
    if args.kv_cache_bytes:
        raise ConfigError("--kv-cache-bytes", args.kv_cache_bytes, "with --kv-cache-from",
                          "the probe gives each engine the deployment GPU's budget")
    # Shared GPU: a fixed KV cache per engine. Whole GPUs: vLLM's memory profiling, as on EKS.
    return int(args.kv_cache_gib * GiB) if args.kv_cache_gib else (4 * GiB if args.gpus == 1 else None), None


def _kv_cache_bytes(args) -> int | None:
    """--kv-cache-bytes: a byte count, or plan (what kvCacheFromPlan renders for the stack's decode engine)."""
    if not args.kv_cache_bytes:
        return None
    if args.kv_cache_bytes == "plan":
        from lab.probe import planned_kv_cache_bytes
        from lab.stack import stack_app

        return int(planned_kv_cache_bytes(stack_app(args.stack))["kv_cache_bytes"])
    if not args.kv_cache_bytes.isdigit():
        raise ConfigError("--kv-cache-bytes", args.kv_cache_bytes, "a byte count, or plan")
    return int(args.kv_cache_bytes)


def cmd_run(args) -> int:
    from lab.probe import compile_cache_env
    from lab.report import markdown_report
    from lab.runner import run_lab
    from lab.variants import parse_variants

    if args.gpus not in (1, 2):
        raise ConfigError("--gpus", args.gpus, "1 (engines share the GPU) or 2 (a whole GPU per engine)")
    modes = _modes("--modes", args.modes)
    rendered, source = render_args(args.stack)
    kinds = [k for k in args.models.split(",") if k]
    untimed = frozenset(k for k in (args.untimed or "").split(",") if k)
    if not untimed <= set(kinds):
        raise ConfigError("--untimed", args.untimed, f"a subset of --models ({args.models})")
    spec = _workload(args)
    variants = parse_variants(args.variants)
    models = lab_models(kinds, Path(args.model_dir), args.seed, args.local_model or [], untimed)
    kv_cache, budget = _kv_cache_and_budget(args)
    extra_env = {**(compile_cache_env(args.cache_dir) if args.cache_dir else {}), **engine_env(args.stack)}
    data = run_lab(rendered_args=rendered, source=source, models=models, out_dir=Path(args.out), spec=spec,
                   ready_timeout_s=args.ready_timeout_s, deadline_s=args.deadline_s,
                   kv_cache_memory_bytes=kv_cache, gpus=args.gpus, modes=modes, variants=variants,
                   serve_haproxy=args.serve_haproxy, budget_utilization=budget, extra_env=extra_env)
    report = markdown_report(data)
    Path(args.out, "lab-report.md").write_text(report)
    print(report)
    return 0 if data["checks"]["verdict"]["passed"] else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    run = sub.add_parser("run", help="the whole lab run on this host's GPU")
    run.add_argument("--stack", default="dev")
    run.add_argument("--models", default="tiny,llama3-8b-shape", help=f"comma-separated: {', '.join(MODEL_KINDS)}")
    run.add_argument("--local-model", action="append", metavar="KEY=DIR", help="also serve and time a real local model")
    run.add_argument("--model-dir", default="/tmp/lab-models")
    run.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--prompt-tokens", type=int, default=512)
    run.add_argument("--output-tokens", type=int, default=128)
    run.add_argument("--gpus", type=int, default=1,
                     help="1: all engines share the GPU; 2: prefill and decode on separate whole GPUs, apps in stages")
    run.add_argument("--concurrencies", default="1,8", help="comma-separated client concurrencies to time")
    run.add_argument("--requests-per-slot", type=int, default=4, help="requests = clamp(this × concurrency, min, max)")
    run.add_argument("--min-requests", type=int, default=8)
    run.add_argument("--max-requests", type=int, default=None)
    run.add_argument("--interference", action="store_true",
                     help="also time short requests decoding while long prompts (2048–4000 tokens) arrive")
    run.add_argument("--untimed", default="", help="comma-separated models that only prove the path (no timing)")
    run.add_argument("--side-by-side", action="store_true",
                     help="also run `pdctl bench` and `vllm bench serve` on each timed PD app (lab.bench_compare)")
    run.add_argument("--kv-cache-gib", type=float, default=None,
                     help="fixed KV cache per engine (default: 4 GiB with --gpus 1, vLLM's profiling with --gpus 2)")
    run.add_argument("--modes", default="pd,colocated",
                     help="apps to run: pd, colocated or both (one per run splits a two-GPU lab over two calls)")
    run.add_argument("--variants", default="", help=VARIANTS_HELP)
    run.add_argument("--serve-haproxy", action="store_true",
                     help="every app behind Serve's HAProxy mode instead of its proxy (needed by direct_streaming)")
    run.add_argument("--repeats", type=int, default=1,
                     help="timed passes over every app and concurrency (passes interleave the apps)")
    run.add_argument("--metrics-window-concurrency", type=int, default=None,
                     help="PD apps, first pass: keep Ray's serving metrics just before and after this concurrency")
    run.add_argument("--rates", default="", help="comma-separated open-loop request rates per second (Poisson)")
    run.add_argument("--requests-per-rate", type=int, default=48)
    run.add_argument("--open-loop-modes", default="pd", help="apps the open-loop rates run on: pd, colocated or both")
    run.add_argument("--kv-cache-from", default="",
                     help="a probe-memory result: each engine gets its GPU budget and the KV cache vLLM chose there")
    run.add_argument("--kv-cache-bytes", metavar="BYTES|plan", default="",
                     help="with --kv-cache-from: every engine's KV cache at this size instead of the probe's; plan: "
                          "what kvCacheFromPlan renders for the stack's decode engine")
    run.add_argument("--cache-dir", default="", help="compile caches (vLLM, Triton, FlashInfer) for the engines")
    run.add_argument("--ready-timeout-s", type=float, default=420)
    run.add_argument("--deadline-s", type=float, default=560, help="stop starting new stages after this")
    run.set_defaults(func=cmd_run)
