"""What `pulumi up` of this checkout does to a stack an earlier release deployed, offline: the update check.

`RELEASES` are the releases stacks may run today, oldest first; the check compares each stack with
every one of them (`pdctl update-check`, on every pull request and in tests/pdctl/test_release_update.py).
`release_plan(commit, stack, workdir)` extracts a release with `git archive`, runs its own program
under its own offline harness (pdctl/release_resources.py) and returns the resources as a plan
document `diff_plans` reads (`tree` with every input). Diffed against this checkout's plan, each
replacement, delete or possible replacement of a resource that holds state (facts/replacements.py
`stateful_loss`) must be declared intended in pdctl/intended_replacements.yaml, with why; the check
refuses any other. Node groups whose nodes the update replaces (a new launch template version rolls
them) are named with their extra nodes, quota and minutes (pdctl/node_rollout.py).

Offline means the mocks' stand-in ids: a replaced role shows as a changed ARN wherever it is used, as
it will in AWS. A release's own mock cloud may number launch template versions its own way (before
this check read them from their content, every template stood at version 1): its plan gets the
versions this checkout's mock gives the same content, so only a changed template shows as a roll.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import yaml

from facts.replacements import NODE_GROUP_TYPES
from offline.mock_cloud import launch_template_version
from pdctl.plan_diff import LAUNCH_TEMPLATE_TYPE, PlanDiff, ResourceChange, diff_plans, summary_lines
from pdctl.resource_tree import resource_tree
from pdctl.update_traffic import serving_lines

REPO = Path(__file__).resolve().parents[1]
INTENDED_REPLACEMENTS = Path(__file__).with_name("intended_replacements.yaml")
DUMPER = Path(__file__).with_name("release_resources.py")
# `pdctl update-check` exit status when a release's stack would lose state the change does not declare.
EXIT_REFUSED = 4


@dataclass(frozen=True)
class Release:
    """A release stacks run today: its commit and its name (the day of main it is)."""

    commit: str
    name: str


RELEASES: tuple[Release, ...] = (
    Release("cee1f90abff572fb7cc75e1fb36645e6b2b1a6ae", "2026-12-01"),
    Release("f81eec3a6557c8f212782085ef4e7d899d77b5a9", "2026-12-02"),
)
LAST_RELEASE = RELEASES[-1]


def release_plan(commit: str, stack: str, workdir: Path, overrides: dict[str, str] | None = None) -> dict:
    """The plan document (stack, tree with inputs) of `commit`'s program for `stack` (with `overrides`:
    settings the release knows)."""
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
    done = subprocess.run([sys.executable, "-m", DUMPER.stem, stack, json.dumps(overrides or {})], cwd=tree, env=env,
                          check=True, capture_output=True, text=True)
    resources = [SimpleNamespace(**r) for r in json.loads(done.stdout)]
    _version_launch_templates_by_content(resources)
    return {"stack": stack, "tree": [node.to_dict() for node in resource_tree(resources)]}


def _version_launch_templates_by_content(resources: list[SimpleNamespace]) -> None:
    """Point each node group at the version this checkout's mock gives its launch template's content: the
    template its component made beside it (one per node group component)."""
    templates = {r.parent: r for r in resources if r.type == LAUNCH_TEMPLATE_TYPE}
    for group in resources:
        template = templates.get(group.parent)
        if group.type in NODE_GROUP_TYPES and template is not None and group.inputs.get("launchTemplate"):
            version = str(launch_template_version(template.inputs))
            group.inputs = {**group.inputs, "launchTemplate": {**group.inputs["launchTemplate"], "version": version}}


def intended_replacements() -> list[dict]:
    """Losses of stateful resources a change declares on purpose: stack, type, name, why, and the
    release it is from (its name; absent: from every release)."""
    return yaml.safe_load(INTENDED_REPLACEMENTS.read_text()) or []


def unintended_stateful_losses(diff: PlanDiff, stack: str, release: Release,
                               declared: list[dict] | None = None) -> list[ResourceChange]:
    """The diff's replacements, deletes and possible replacements of stateful resources that
    `declared` (default: pdctl/intended_replacements.yaml) does not declare with a reason."""
    entries = intended_replacements() if declared is None else declared
    intended = {(e["stack"], e["type"], e["name"]) for e in entries
                if str(e.get("why") or "").strip() and e.get("release", release.name) == release.name}
    return [r for r in diff.stateful_losses if (stack, r.type, r.name) not in intended]


def verdict(diff: PlanDiff, stack: str, release: Release) -> tuple[str, list[str]]:
    """The update check's first line for `stack` from `release`, then one line per refused loss and per
    node group whose nodes the update replaces."""
    refused = unintended_stateful_losses(diff, stack, release)
    head = f"update check, stack {stack} from release {release.name} ({release.commit[:7]}): "
    if refused:
        head += (f"REFUSED: {len(refused)} loss(es) of state not declared in pdctl/intended_replacements.yaml")
    else:
        head += "passes: nothing that holds state is lost unless declared"
    lines = [f"  {line}" for line in serving_lines(diff.serving)] if diff.serving and diff.serving.kinds else []
    lines += [f"  {r.loss_verb.lower()} {r.name} ({r.type}): loses {r.loses}" for r in refused]
    lines += [f"  {r.name} {r.rollout.summary()}" for r in diff.rollouts if r.rollout]
    lines += summary_lines(diff)
    return head, lines


def update_diff(stack: str, release: Release, workdir: Path, overrides: dict[str, str] | None = None, *,
                as_deployed: bool = True) -> PlanDiff:
    """What this checkout's `pulumi up` does to `stack` as `release` deployed it (its subnets, zones and
    roles read back as `pulumi preview` reads them from AWS; not `as_deployed`: planned as a new stack);
    `overrides`, settings the release knows too, on both sides."""
    from offline import deployed_stack_from_plan, run_offline
    from pdctl.plan import build_plan

    base = release_plan(release.commit, stack, workdir, overrides)
    deployed = deployed_stack_from_plan(base) if as_deployed else None
    run = run_offline(stack, overrides=overrides or {}, deployed=deployed)
    # Compared as JSON, as a saved base plan is: the same types on both sides.
    head = json.loads(json.dumps(build_plan(run, stack=stack).to_dict(), sort_keys=True, default=str))
    return diff_plans(base, head)
