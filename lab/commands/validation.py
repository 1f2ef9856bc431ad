"""`validation-predict` and `validation-table`: the SLO model's lab validation, written down before the run
and set against it after (lab/validation.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_predict(args) -> int:
    from lab.validation import PLANS, predict

    document = predict(args.stack, plan=PLANS[args.plan])
    Path(args.out).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    for app in document["apps"]:
        for point in app["points"]:
            load = f"{point['requests_per_second']:g}/s" if "requests_per_second" in point else "c=1"
            print(f"{app['app']} {load}: TTFT p90 {point['ttft_p90_seconds'] * 1000:,.0f} ms "
                  f"TPOT p90 {point['tpot_p90_seconds'] * 1000:.2f} ms")
    return 0


def cmd_table(args) -> int:
    from lab.validation import link_windows, markdown, per_deployment, read_result, table

    predictions = json.loads(Path(args.predictions).read_text())
    results = [read_result(Path(path)) for path in args.results]
    rows = table(predictions, results)
    print(markdown(rows), end="")
    if len(results) > 1:
        print("\nEach deployment apart (in the order given):\n")
        print(markdown(per_deployment(predictions, results)), end="")
    for result in results:
        for app, link in link_windows(result).items():
            print(f"{app}: KV link {link['transfers']:.0f} transfers of {link['bytes_per_transfer'] / 1e6:.1f} MB, "
                  f"{link['seconds_per_transfer'] * 1000:.1f} ms each by NIXL's timer: "
                  f"{link['bytes_per_second'] / 1e9:.2f} GB/s")
    if args.out:
        Path(args.out).write_text(json.dumps({"predictions": args.predictions, "results": args.results, "rows": rows},
                                             indent=1) + "\n")
    return 0 if rows else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    predict = sub.add_parser("validation-predict", help="the SLO model's TTFT/TPOT p90 for the validation run, "
                                                        "before it runs (lab/validation.py)")
    predict.add_argument("--stack", default="dev")
    predict.add_argument("--plan", choices=("first", "colocated", "colocated-steps"), default="colocated-steps",
                         help="which run: the first (PD and colocated, three rates), colocated's second (fresh "
                              "arrivals at four rates) or its third (its engine run step by step, 192 a rate)")
    predict.add_argument("--out", required=True, help="the predictions JSON to write")
    predict.set_defaults(func=cmd_predict)

    compared = sub.add_parser("validation-table", help="a validation run's results against the predictions")
    compared.add_argument("results", nargs="+", help="lab-result.json(.gz) files; samples pooled per app and rate")
    compared.add_argument("--predictions", required=True)
    compared.add_argument("--out", default="", help="also write the rows as JSON here")
    compared.set_defaults(func=cmd_table)
