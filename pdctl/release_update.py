"""What `pulumi up` of this checkout does to a stack an earlier release deployed, offline.

`release_plan(commit, stack, workdir)` extracts that release with `git archive`, runs its own program
under its own offline harness (pdctl/release_resources.py) and returns the resources as a plan
document `diff_plans` reads (`tree` with every input). Diffed against this checkout's plan, each
replacement of a resource that holds state (facts/replacements.py `stateful_loss`) must be declared
intended in pdctl/intended_replacements.yaml, with why; tests/pdctl/test_release_update.py refuses
any other. Offline means the mocks' stand-in ids: a replaced role shows as a changed ARN wherever it is
used, as it will in AWS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from pdctl.plan import resource_tree
from pdctl.plan_diff import PlanDiff, ResourceChange

REPO = Path(__file__).resolve().parents[1]
# The release existing stacks were deployed from: main of 2026-12-01.
PREVIOUS_RELEASE = "cee1f90abff572fb7cc75e1fb36645e6b2b1a6ae"
INTENDED_REPLACEMENTS = Path(__file__).with_name("intended_replacements.yaml")
DUMPER = Path(__file__).with_name("release_resources.py")


def release_plan(commit: str, stack: str, workdir: Path) -> dict:
    """The plan document (stack, tree with inputs) of `commit`'s program for `stack`."""
    tree = workdir / commit
    if not tree.exists():
        known = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
        if known.returncode != 0:
            raise LookupError(f"commit {commit} is not in this clone: fetch the history (git fetch --unshallow; "
                              "actions/checkout with fetch-depth: 0)")
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        shutil.copy(DUMPER, tree / DUMPER.name)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-m", DUMPER.stem, stack], cwd=tree, env=env, check=True,
                          capture_output=True, text=True)
    resources = [SimpleNamespace(**r) for r in json.loads(done.stdout)]
    return {"stack": stack, "tree": [node.to_dict() for node in resource_tree(resources)]}


def intended_replacements() -> list[dict]:
    """Replacements of stateful resources a change declares on purpose: stack, type, name, why."""
    return yaml.safe_load(INTENDED_REPLACEMENTS.read_text()) or []


def unintended_stateful_replacements(diff: PlanDiff, stack: str,
                                     declared: list[dict] | None = None) -> list[ResourceChange]:
    """The diff's replacements of stateful resources that `declared` (default:
    pdctl/intended_replacements.yaml) does not declare with a reason."""
    entries = intended_replacements() if declared is None else declared
    intended = {(e["stack"], e["type"], e["name"]) for e in entries if str(e.get("why") or "").strip()}
    return [r for r in diff.stateful_replacements if (stack, r.type, r.name) not in intended]
