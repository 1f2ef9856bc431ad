"""Regenerate facts/vllm_engine_args.json: the field names of vLLM's `EngineArgs`, per vLLM version.

`extraEngineKwargs` is checked against this list at preview (serve_app.checks), so an unknown key is
refused before the cluster reports DEPLOY_FAILED (Ray Serve LLM builds `EngineArgs(**engine_kwargs)`
and refuses unknown ones only then).

    python -m tools.vllm_engine_args                      # the installed vLLM (dataclasses.fields)
    python -m tools.vllm_engine_args --source arg_utils.py --version 0.26.0 --origin "the PyPI wheel"
        # another version, read from its vllm/engine/arg_utils.py without importing it, e.g. from
        # `pip download vllm==0.26.0 --no-deps` and `unzip <wheel> vllm/engine/arg_utils.py`

The second form reads the `EngineArgs` class body with `ast` (its annotated fields, ClassVar ones
excluded): what `dataclasses.fields` returns for a dataclass. tests/validation/test_real_engine_args.py
checks the two readings agree on the installed vLLM, and that its entry in the file is current.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parent.parent / "facts" / "vllm_engine_args.json"


def installed_engine_args() -> tuple[str, list[str]]:
    """(vLLM version, EngineArgs field names) of the installed vLLM."""
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    return vllm.__version__, [field.name for field in dataclasses.fields(EngineArgs)]


def engine_args_in_source(source: str) -> list[str]:
    """EngineArgs field names in the text of a vllm/engine/arg_utils.py, in declaration order."""
    tree = ast.parse(source)
    engine_args = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "EngineArgs")
    return [node.target.id for node in engine_args.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and "ClassVar" not in ast.unparse(node.annotation)]


def write(version: str, fields: list[str], source: str, data_file: Path = DATA_FILE) -> None:
    data = json.loads(data_file.read_text(encoding="utf-8")) if data_file.exists() else {}
    data[version] = {"source": source, "fields": sorted(fields)}
    data_file.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, help="a vllm/engine/arg_utils.py of another vLLM version")
    parser.add_argument("--version", help="the vLLM version --source comes from")
    parser.add_argument("--origin", default="", help="where --source came from, recorded in the file")
    args = parser.parse_args()
    if args.source:
        if not args.version:
            parser.error("--source needs --version")
        origin = f" of {args.origin}" if args.origin else ""
        write(args.version, engine_args_in_source(args.source.read_text(encoding="utf-8")),
              f"vllm {args.version}: EngineArgs in vllm/engine/arg_utils.py{origin}, read with ast "
              "(tools/vllm_engine_args.py)")
    else:
        version, fields = installed_engine_args()
        write(version, fields, f"vllm {version} dataclasses.fields(EngineArgs) (tools/vllm_engine_args.py)")


if __name__ == "__main__":
    main()
