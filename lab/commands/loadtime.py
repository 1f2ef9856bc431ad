"""`loadtime`: weight-load time of the 8B-shaped checkpoint, vLLM's default loader vs the Run:ai streamer."""

from __future__ import annotations

import argparse

from lab.commands.common import RESULTS_HELP


def cmd_loadtime(args) -> int:
    from lab import loadtime

    return loadtime.main(["--dir", args.dir, "--out", args.out, "--shape", args.shape])


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    load = sub.add_parser("loadtime", help="weight-load time: vLLM's default loader vs the Run:ai streamer")
    load.add_argument("--dir", default="/tmp/loadtime-ckpt", help="where to write the checkpoint (the local disk)")
    load.add_argument("--out", default=".lab/out", help=RESULTS_HELP)
    load.add_argument("--shape", choices=("llama3-8b", "tiny"), default="llama3-8b")
    load.set_defaults(func=cmd_loadtime)
