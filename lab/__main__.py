"""python -m lab {render,make-model,run,report} — the single-host GPU lab.

  render      print the stack's rendered PD args, the lab configs and the keys the overlay changed
  make-model  write the tiny random Llama, the Llama-3-8B-shaped model or Qwen3.5-9B's architecture
  probe-memory  start the stack's engine on a GPU's memory budget, one variant at a time (lab/probe.py)
  run         deploy PD + colocated for each model on this host's GPU(s), check, time, write JSON
              (--gpus 2: prefill and decode on separate whole GPUs, apps in stages; see lab/gpu_run_x2.sh)
  compare-greedy  greedy PD == colocated across a split run's two results files
  bench-compare  `pdctl bench` beside `vllm bench serve` against one running endpoint (within 5%?)
  report      the results JSON as a markdown table
  loadtime    weight-load time of the 8B-shaped checkpoint, default loader vs Run:ai streamer
  resilience  several of faults, soak, bad-requests, bench-compare on one deployment (--runs)
  faults      kill replicas, engine processes and the Serve controller under load (lab/faults.py)
  soak        a long steady load, memory sampled (lab/soak.py)
  bad-requests  the requests clients get wrong, a burst, then a normal one (lab/bad_requests.py)
  scaling     decode scaled 1 → 2 → 1 by the stack's autoscaling config under a load ramp (lab/scaling.py)
  pd-hop      a run's TTFT at concurrency 1 split into Serve's hops, prefill and the rest (lab/pd_hop.py)

`--set KEY=VALUE` (render, resilience, faults, soak, bad-requests, scaling; repeatable) sets a serving
stack key over Pulumi.<stack>.yaml, validated like the stack file (lab/stack.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.faults import FAULTS
from lab.scaling import Ramp
from serve_app.errors import ConfigError

MODEL_KINDS = ("tiny", "llama3-8b-shape", "qwen35-9b")
# The stack's default model: its architecture with dummy weights (lab/models.py write_qwen35_model).
HYBRID_KINDS = frozenset({"qwen35-9b"})
SET_HELP = "set a serving stack key over the stack file, e.g. decodeMaxReplicas=2 (repeatable)"
VARIANTS_HELP = ("variant matrix: a JSON list (or a file holding one) of {name, modes, engine_kwargs, "
                 "experimental_configs, env, direct_streaming}; each variant gets its own apps (see "
                 "lab/variants.py). Default: the stack's render as is")


def _make_model(kind: str, directory: Path, seed: int):
    from lab import models

    if kind == "tiny":
        return models.write_tiny_model(directory, seed=seed).as_dict()
    if kind == "qwen35-9b":
        return models.write_qwen35_model(directory, seed=seed)
    return models.write_shaped_model(directory, seed=seed).as_dict()


def _lab_models(kinds: list[str], model_dir: Path, seed: int, local_models: list[str],
                untimed: frozenset[str] = frozenset()):
    from lab.runner import LabModel, prompt_range

    out = []
    for kind in kinds:
        if kind not in MODEL_KINDS:
            raise ConfigError("--models", kind, f"a comma-separated subset of {', '.join(MODEL_KINDS)}")
        card = _make_model(kind, model_dir / kind, seed)
        out.append(LabModel(key=kind, path=card["path"], dummy_weights=card["weights"] == "dummy",
                            compare_outputs=kind in ("tiny", "qwen35-9b"), prompt_token_range=prompt_range(card),
                            card=card, timed=kind not in untimed, hybrid=kind in HYBRID_KINDS))
    for spec in local_models:
        key, _, path = spec.partition("=")
        if not path or not Path(path, "config.json").exists():
            raise ConfigError("--local-model", spec, "KEY=DIR where DIR holds a Hugging Face model (config.json)")
        # Real weights: logits are peaked, so the comparison is meaningful; common token ids for prompts.
        out.append(LabModel(key=key, path=str(Path(path).resolve()), dummy_weights=False, compare_outputs=True,
                            prompt_token_range=(1000, 5000)))
    return out


def _render_args(stack: str | None, overrides: list[str] | None = None) -> tuple[dict, str]:
    if stack:
        from lab.stack import rendered_pd_serving_args
        from offline.overrides import parse_overrides

        return rendered_pd_serving_args(stack, overrides=parse_overrides(overrides or []))
    if overrides:
        raise ConfigError("--set", overrides[0], "a stack to set it on (--stack NAME)")
    from serve_app.config import PDAppConfig
    from serve_app.render import pd_serving_args

    return pd_serving_args(PDAppConfig()), "serve_app.config.PDAppConfig() defaults (the reference deployment)"


def cmd_render(args) -> int:
    from lab.overlay import GiB, changed_paths
    from lab.runner import LabModel, lab_apps
    from lab.variants import parse_variants

    rendered, source = _render_args(args.stack, args.set)
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


def cmd_make_model(args) -> int:
    card = _make_model(args.kind, Path(args.directory), args.seed)
    print(json.dumps(card, indent=2))
    return 0


def _int_list(option: str, text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v)
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise ConfigError(option, text, "comma-separated positive integers, e.g. 1,8,32")
    return values


def _workload(args):
    from lab.runner import Interference, Workload

    if args.repeats < 1:
        raise ConfigError("--repeats", args.repeats, "a positive integer")
    return Workload(prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed,
                    concurrencies=_int_list("--concurrencies", args.concurrencies),
                    requests_per_concurrency_slot=args.requests_per_slot, min_requests=args.min_requests,
                    max_requests=args.max_requests, interference=Interference() if args.interference else None,
                    repeats=args.repeats, metrics_window_concurrency=args.metrics_window_concurrency,
                    side_by_side=args.side_by_side,
                    rates=tuple(float(r) for r in (args.rates or "").split(",") if r),
                    requests_per_rate=args.requests_per_rate)


def cmd_run(args) -> int:
    from lab.overlay import GiB
    from lab.probe import compile_cache_env
    from lab.report import markdown_report
    from lab.runner import run_lab
    from lab.variants import parse_variants

    if args.gpus not in (1, 2):
        raise ConfigError("--gpus", args.gpus, "1 (engines share the GPU) or 2 (a whole GPU per engine)")
    modes = tuple(m for m in args.modes.split(",") if m)
    if not modes or not set(modes) <= {"pd", "colocated"}:
        raise ConfigError("--modes", args.modes, "pd, colocated or pd,colocated")
    rendered, source = _render_args(args.stack)
    kinds = [k for k in args.models.split(",") if k]
    untimed = frozenset(k for k in (args.untimed or "").split(",") if k)
    if not untimed <= set(kinds):
        raise ConfigError("--untimed", args.untimed, f"a subset of --models ({args.models})")
    spec = _workload(args)
    variants = parse_variants(args.variants)
    models = _lab_models(kinds, Path(args.model_dir), args.seed, args.local_model or [], untimed)
    # Shared GPU: a fixed KV cache per engine. Whole GPUs: vLLM's memory profiling, as on EKS.
    kv_cache = int(args.kv_cache_gib * GiB) if args.kv_cache_gib else (4 * GiB if args.gpus == 1 else None)
    budget = None
    if args.kv_cache_from:
        # Each engine as the probe started it on the deployment GPU's budget: that utilization, and the
        # KV cache vLLM's own profiling gave the stack's config there (engines sharing a card cannot profile).
        probe = json.loads(Path(args.kv_cache_from).read_text())
        rendered_probe = next(p for p in probe["probes"] if p["name"] == "as-rendered" and p["started"])
        budget = probe["utilization_on_this_card"]
        kv_cache = int(rendered_probe["engine"]["kv_cache_bytes"])
    extra_env = compile_cache_env(args.cache_dir) if args.cache_dir else {}
    data = run_lab(rendered_args=rendered, source=source, models=models, out_dir=Path(args.out), spec=spec,
                   ready_timeout_s=args.ready_timeout_s, deadline_s=args.deadline_s,
                   kv_cache_memory_bytes=kv_cache, gpus=args.gpus, modes=modes, variants=variants,
                   serve_haproxy=args.serve_haproxy, budget_utilization=budget, extra_env=extra_env)
    report = markdown_report(data)
    Path(args.out, "lab-report.md").write_text(report)
    print(report)
    return 0 if data["checks"]["verdict"]["passed"] else 1


# The workload settings that fix the greedy comparison's prompts and rule: equal in both runs.
COMPARE_SETTINGS = ("seed", "compare_prompts", "compare_prompt_tokens", "compare_output_tokens")


def cmd_probe_memory(args) -> int:
    from lab.probe import probe_memory

    rendered, source = _render_args(args.stack, args.set)
    card = _make_model("qwen35-9b", Path(args.model_dir) / "qwen35-9b", 0)
    data = probe_memory(rendered, source, model_path=card["path"], budget_mib=args.budget_mib, out_dir=Path(args.out),
                        cache_dir=args.cache_dir, variants=tuple(v for v in args.variants.split(",") if v))
    return 0 if data["probes"] and data["probes"][0]["started"] else 1


def cmd_compare_greedy(args) -> int:
    """Greedy PD == colocated across two results files (a split run: --modes pd, --modes colocated)."""
    from lab.runner import Workload, compare_greedy_outputs

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


def _rounds(value: int) -> int:
    if value < 1:
        raise ConfigError("--bench-rounds", value, "a whole number of rounds, at least 1")
    return value


def cmd_bench_compare(args) -> int:
    from lab import bench_compare

    side = bench_compare.SideBySide(
        base_url=args.base_url.rstrip("/"), model=args.model, tokenizer=args.tokenizer, input_tokens=args.input_tokens,
        output_tokens=args.output_tokens, requests=args.requests, concurrency=args.concurrency, rate=args.rate,
        warmup=args.warmup, seed=args.seed, rounds=_rounds(args.bench_rounds))
    result = bench_compare.run(side, Path(args.out))
    Path(args.out, "side-by-side.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result.get(k) for k in ("comparison", "pdctl_error", "vllm_error") if k in result}, indent=2))
    return 0 if (result.get("comparison") or {}).get("agree") else 1


def cmd_resilience(args) -> int:
    from lab import faults, resilience, scaling

    kinds = [args.command] if args.command != "resilience" else [k for k in args.runs.split(",") if k]
    if not kinds or set(kinds) - set(resilience.KINDS):
        raise ConfigError("--runs", args.runs, f"a comma-separated list of {', '.join(resilience.KINDS)}")
    names = tuple(f for f in args.faults.split(",") if f)
    if not names or set(names) - set(faults.FAULTS):
        raise ConfigError("--faults", args.faults, f"a comma-separated subset of {', '.join(faults.FAULTS)}")
    _rounds(args.bench_rounds)
    rendered, source = _render_args(args.stack, args.set)
    ramp = scaling.Ramp(low_concurrency=args.low_concurrency, high_concurrency=args.high_concurrency,
                        low_s=args.low_s, up_timeout_s=args.up_timeout_s, hold_s=args.hold_s,
                        down_timeout_s=args.down_timeout_s, seed=args.seed)
    if "scaling" in kinds:  # before the models are written and Ray starts
        scaling.check_ramp(ramp, rendered["decode_config"])
    [model] = _lab_models(["tiny"], Path(args.model_dir), args.seed, [])
    options = resilience.RunOptions(
        fault_names=names,
        load=faults.LoadSpec(concurrency=args.concurrency, long_prompt_tokens=args.long_prompt_tokens, seed=args.seed),
        times=faults.FaultTimes(recover_s=args.recover_s), duration_s=args.duration_s,
        sample_every_s=args.sample_every_s, ramp=ramp,
        bench_requests=args.bench_requests, bench_concurrency=args.bench_concurrency,
        bench_rounds=args.bench_rounds)
    documents = resilience.run_resilience(kinds, rendered_args=rendered, source=source, model=model,
                                          out_dir=Path(args.out), options=options, ready_timeout_s=args.ready_timeout_s)
    verdicts = {kind: documents.get(kind, {}).get("verdict") for kind in kinds}
    print(json.dumps(verdicts, indent=2))
    return 0 if all((v or {}).get("passed") for v in verdicts.values()) else 1


def cmd_loadtime(args) -> int:
    from lab import loadtime

    return loadtime.main(["--dir", args.dir, "--out", args.out, "--shape", args.shape])


def cmd_pd_hop(args) -> int:
    from lab import pd_hop

    return pd_hop.report(args.logs, args.result, args.app, args.route_prefix)


def cmd_report(args) -> int:
    from lab.report import markdown_report

    print(markdown_report(json.loads(Path(args.result).read_text())), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="show the lab configs the overlay makes from the stack's render")
    render.add_argument("--stack", default="dev", help="stack file Pulumi.<stack>.yaml ('' = PDAppConfig defaults)")
    render.add_argument("--model-path", default="/tmp/lab-models/tiny")
    render.add_argument("--gpus", type=int, default=1, help="1: shared GPU; 2: a whole GPU per engine")
    render.add_argument("--variants", default="", help=VARIANTS_HELP)
    render.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    render.set_defaults(func=cmd_render)

    make = sub.add_parser("make-model", help="write a generated model directory")
    make.add_argument("kind", choices=MODEL_KINDS)
    make.add_argument("directory")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(func=cmd_make_model)

    run = sub.add_parser("run", help="the whole lab run on this host's GPU")
    run.add_argument("--stack", default="dev")
    run.add_argument("--models", default="tiny,llama3-8b-shape", help=f"comma-separated: {', '.join(MODEL_KINDS)}")
    run.add_argument("--local-model", action="append", metavar="KEY=DIR", help="also run a real local model")
    run.add_argument("--model-dir", default="/tmp/lab-models")
    run.add_argument("--out", default=".lab/out", help="results folder (.lab/ is git-ignored)")
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
    run.add_argument("--kv-cache-from", default="",
                     help="a probe-memory result: each engine gets its GPU budget and the KV cache vLLM chose there")
    run.add_argument("--cache-dir", default="", help="compile caches (vLLM, Triton, FlashInfer) for the engines")
    run.add_argument("--ready-timeout-s", type=float, default=420)
    run.add_argument("--deadline-s", type=float, default=560, help="stop starting new stages after this")
    run.set_defaults(func=cmd_run)

    probe = sub.add_parser("probe-memory", help="the stack's engine on a GPU's memory budget, one start at a time")
    probe.add_argument("--stack", default="dev")
    probe.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
    probe.add_argument("--budget-mib", type=int, default=22_888,
                       help="the deployment GPU's memory (default: g6.8xlarge's L4, facts/instances.py)")
    probe.add_argument("--variants", default="as-rendered,eager,vision,vision-eager,as-rendered-warm")
    probe.add_argument("--model-dir", default="/tmp/lab-models")
    probe.add_argument("--cache-dir", default="/tmp/lab-compile-cache", help="compile caches: empty = a cold start")
    probe.add_argument("--out", default=".lab/out", help="results folder (.lab/ is git-ignored)")
    probe.set_defaults(func=cmd_probe_memory)

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
    side.add_argument("--out", default=".lab/out/side-by-side", help="results folder (.lab/ is git-ignored)")
    side.set_defaults(func=cmd_bench_compare)

    for kind, text in (("resilience", "several of the runs below, in order, on one deployment (--runs)"),
                       ("faults", "kill replicas, engine processes and the Serve controller under a steady load"),
                       ("soak", "a long steady mixed load; failed requests and memory over time"),
                       ("bad-requests", "bad requests, a burst and a normal request against the PD app"),
                       ("scaling", "decode 1 → 2 → 1 replicas by the stack's autoscaling config under a load ramp")):
        resilience = sub.add_parser(kind, help=text)
        if kind == "resilience":
            resilience.add_argument("--runs", default="bench-compare,bad-requests,faults,soak",
                                    help="comma-separated, in order: bench-compare, bad-requests, faults, soak, "
                                         "scaling (needs --set decodeMaxReplicas=2)")
        resilience.add_argument("--stack", default="dev")
        resilience.add_argument("--set", action="append", metavar="KEY=VALUE", help=SET_HELP)
        resilience.add_argument("--out", default=".lab/out", help="results folder (.lab/ is git-ignored)")
        resilience.add_argument("--model-dir", default="/tmp/lab-models")
        resilience.add_argument("--seed", type=int, default=0)
        resilience.add_argument("--concurrency", type=int, default=4, help="clients of the steady load")
        resilience.add_argument("--long-prompt-tokens", type=int, default=2048, help="every 4th request's prompt")
        resilience.add_argument("--faults", default=",".join(FAULTS), help="faults to inject, in order")
        resilience.add_argument("--recover-s", type=float, default=240.0, help="longest wait for a fault to heal")
        resilience.add_argument("--duration-s", type=float, default=600.0, help="soak: how long the load runs")
        resilience.add_argument("--sample-every-s", type=float, default=5.0, help="soak: memory sampling interval")
        resilience.add_argument("--bench-requests", type=int, default=128,
                                help="bench-compare: timed requests per tool and round")
        resilience.add_argument("--bench-concurrency", type=int, default=8, help="bench-compare: requests in flight")
        resilience.add_argument("--bench-rounds", type=int, default=3,
                                help="bench-compare: rounds of both tools, order alternating; medians judged")
        ramp = Ramp()
        resilience.add_argument("--low-concurrency", type=int, default=ramp.low_concurrency,
                                help="scaling: clients before the step and after the drop (≤ the decode target)")
        resilience.add_argument("--high-concurrency", type=int, default=ramp.high_concurrency,
                                help="scaling: clients from the step to the drop (> the decode target)")
        resilience.add_argument("--low-s", type=float, default=ramp.low_s, help="scaling: low load before the step")
        resilience.add_argument("--up-timeout-s", type=float, default=ramp.up_timeout_s,
                                help="scaling: longest wait from the step for the 2nd decode replica to serve")
        resilience.add_argument("--hold-s", type=float, default=ramp.hold_s,
                                help="scaling: high load kept after the new replica served")
        resilience.add_argument("--down-timeout-s", type=float, default=ramp.down_timeout_s,
                                help="scaling: longest wait from the drop for decode to be back at 1 replica")
        resilience.add_argument("--ready-timeout-s", type=float, default=420)
        resilience.set_defaults(func=cmd_resilience)

    load = sub.add_parser("loadtime", help="weight-load time: vLLM's default loader vs the Run:ai streamer")
    load.add_argument("--dir", default="/tmp/loadtime-ckpt", help="where to write the checkpoint (the local disk)")
    load.add_argument("--out", default=".lab/out", help="results folder (.lab/ is git-ignored)")
    load.add_argument("--shape", choices=("llama3-8b", "tiny"), default="llama3-8b")
    load.set_defaults(func=cmd_loadtime)

    hop = sub.add_parser("pd-hop", help="a run's TTFT at concurrency 1 split into its parts, from Serve's access lines")
    hop.add_argument("logs", type=Path, help="a Ray session's logs dir (or an unpacked copy)")
    hop.add_argument("result", type=Path, help="the run's results JSON (.json or .json.gz)")
    hop.add_argument("app", help="the app's name, e.g. llama3-8b-shape-pd-graphs")
    hop.add_argument("--route-prefix", default=None, help="its route prefix (default: from the results)")
    hop.set_defaults(func=cmd_pd_hop)

    report = sub.add_parser("report", help="markdown table of a results JSON")
    report.add_argument("result")
    report.set_defaults(func=cmd_report)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
