"""`make-model`: a generated model directory (the tiny random Llama, the 8B shape, Qwen3.5-9B's architecture)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lab.commands.common import MODEL_KINDS, make_model


def cmd_make_model(args) -> int:
    card = make_model(args.kind, Path(args.directory), args.seed)
    print(json.dumps(card, indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add this group's commands to the lab's parser."""
    make = sub.add_parser("make-model", help="write a generated model directory")
    make.add_argument("kind", choices=MODEL_KINDS)
    make.add_argument("directory")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(func=cmd_make_model)
