"""The engine arguments each vLLM version accepts: the field names of its `EngineArgs`, as data.

Ray Serve LLM turns `engine_kwargs` into `EngineArgs(**engine_kwargs)` on the cluster, and refuses an
unknown key only then (DEPLOY_FAILED, half an hour into a deploy). The names are generated from vLLM
itself into `vllm_engine_args.json` by `python -m tools.vllm_engine_args`:
- 0.29.0: `dataclasses.fields(EngineArgs)` of the vLLM CI installs (the validator, facts/validators.py);
  tests/validation/test_real_engine_args.py fails when the installed vLLM's list drifts from it;
- 0.26.0: the vLLM inside the Ray LLM DLC image the stacks deploy (facts/images.py), read from that
  version's arg_utils.py in its PyPI wheel (not importable here: it needs torch 2.11).
A key one version has and the other lacks (0.29 added 19, removed 4) is what the per-version lists
are for: the check uses the list of the vLLM inside the image that runs the engines.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent / "vllm_engine_args.json"


@functools.cache
def _table() -> Mapping[str, frozenset[str]]:
    data = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return {version: frozenset(entry["fields"]) for version, entry in data.items()}


def engine_arg_names(vllm_version: str) -> frozenset[str] | None:
    """EngineArgs field names of `vllm_version`, or None when no list was generated for it."""
    return _table().get(vllm_version)


def versions() -> tuple[str, ...]:
    return tuple(sorted(_table()))
