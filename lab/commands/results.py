"""`pd-hop` and `report`: what a finished run's results (and its Serve logs) say."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_pd_hop(args) -> int:
    from lab import pd_hop

    return pd_hop.report(args.logs, args.result, args.app, args.route_prefix)


def cmd_report(args) -> int:
    from lab.report import markdown_report

    print(markdown_report(json.loads(Path(args.result).read_text())), end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    hop = sub.add_parser("pd-hop", help="a run's TTFT at concurrency 1 split into its parts, from Serve's access lines")
    hop.add_argument("logs", type=Path, help="a Ray session's logs dir (or an unpacked copy)")
    hop.add_argument("result", type=Path, help="the run's results JSON (.json or .json.gz)")
    hop.add_argument("app", help="the app's name, e.g. llama3-8b-shape-pd-graphs")
    hop.add_argument("--route-prefix", default=None, help="its route prefix (default: from the results)")
    hop.set_defaults(func=cmd_pd_hop)

    report = sub.add_parser("report", help="markdown table of a results JSON")
    report.add_argument("result")
    report.set_defaults(func=cmd_report)
