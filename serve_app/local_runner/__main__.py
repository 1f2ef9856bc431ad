"""python -m serve_app.local_runner {render,make-model,run,report} — the single-host GPU lab.

  render      print the stack's rendered PD args, the lab configs and the keys the overlay changed
  make-model  write the tiny random Llama or the Llama-3-8B-shaped model (config + tokenizer)
  run         deploy PD + colocated for each model on this host's GPU, check, time, write JSON
  report      the results JSON as a markdown table
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from serve_app.errors import ConfigError

MODEL_KINDS = ("tiny", "llama3-8b-shape")


def _make_model(kind: str, directory: Path, seed: int):
    from serve_app.local_runner import models

    if kind == "tiny":
        return models.write_tiny_model(directory, seed=seed)
    return models.write_shaped_model(directory, seed=seed)


def _lab_models(kinds: list[str], model_dir: Path, seed: int, local_models: list[str]):
    from serve_app.local_runner.runner import LabModel, prompt_range

    out = []
    for kind in kinds:
        if kind not in MODEL_KINDS:
            raise ConfigError("--models", kind, f"a comma-separated subset of {', '.join(MODEL_KINDS)}")
        card = _make_model(kind, model_dir / kind, seed).as_dict()
        out.append(LabModel(key=kind, path=card["path"], dummy_weights=card["weights"] == "dummy",
                            compare_outputs=kind == "tiny", prompt_token_range=prompt_range(card), card=card))
    for spec in local_models:
        key, _, path = spec.partition("=")
        if not path or not Path(path, "config.json").exists():
            raise ConfigError("--local-model", spec, "KEY=DIR where DIR holds a Hugging Face model (config.json)")
        # Real weights: logits are peaked, so the comparison is meaningful; common token ids for prompts.
        out.append(LabModel(key=key, path=str(Path(path).resolve()), dummy_weights=False, compare_outputs=True,
                            prompt_token_range=(1000, 5000)))
    return out


def _render_args(stack: str | None) -> tuple[dict, str]:
    if stack:
        from serve_app.local_runner.stack import rendered_pd_serving_args

        return rendered_pd_serving_args(stack)
    from serve_app.config import PDAppConfig
    from serve_app.render import pd_serving_args

    return pd_serving_args(PDAppConfig()), "serve_app.config.PDAppConfig() defaults (the reference deployment)"


def cmd_render(args) -> int:
    from serve_app.local_runner.overlay import changed_paths
    from serve_app.local_runner.runner import LabModel, lab_apps

    rendered, source = _render_args(args.stack)
    model = LabModel(key="model", path=args.model_path, dummy_weights=False, compare_outputs=False,
                     prompt_token_range=(4, 100))
    apps = lab_apps(rendered, [model])
    print(f"# source: {source}")
    print(json.dumps({"rendered": rendered, "lab_apps": {a.name: a.args for a in apps}}, indent=2))
    pd = apps[0]
    for role in ("prefill_config", "decode_config"):
        print(f"# {role}: keys the overlay changed: {sorted(changed_paths(rendered[role], pd.args[role]))}")
    return 0


def cmd_make_model(args) -> int:
    card = _make_model(args.kind, Path(args.directory), args.seed)
    print(json.dumps(card.as_dict(), indent=2))
    return 0


def cmd_run(args) -> int:
    from serve_app.local_runner.report import markdown_report
    from serve_app.local_runner.runner import Workload, run_lab

    rendered, source = _render_args(args.stack)
    kinds = [k for k in args.models.split(",") if k]
    models = _lab_models(kinds, Path(args.model_dir), args.seed, args.local_model or [])
    spec = Workload(prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed)
    data = run_lab(rendered_args=rendered, source=source, models=models, out_dir=Path(args.out), spec=spec,
                   ready_timeout_s=args.ready_timeout_s, deadline_s=args.deadline_s)
    report = markdown_report(data)
    Path(args.out, "lab-report.md").write_text(report)
    print(report)
    return 0 if data["checks"]["verdict"]["passed"] else 1


def cmd_report(args) -> int:
    from serve_app.local_runner.report import markdown_report

    print(markdown_report(json.loads(Path(args.result).read_text())), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_app.local_runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="show the lab configs the overlay makes from the stack's render")
    render.add_argument("--stack", default="dev", help="stack file Pulumi.<stack>.yaml ('' = PDAppConfig defaults)")
    render.add_argument("--model-path", default="/tmp/lab-models/tiny")
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
    run.add_argument("--ready-timeout-s", type=float, default=420)
    run.add_argument("--deadline-s", type=float, default=560, help="stop starting new stages after this")
    run.set_defaults(func=cmd_run)

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
