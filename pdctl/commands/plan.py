"""Plan-time commands: `plan`, `size`, `render`, `preflight` (offline, or read-only against AWS)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape

from pdctl import size
from pdctl.commands.common import (
    PIPED_WIDTH,
    PROJECT_OPTION,
    SET_OPTION,
    STACK_OPTION,
    OutputFormat,
    console,
    err,
    fail,
    offline_run,
    overrides_from_set,
    read_plan_document,
    text_console,
)


def plan(
    stack: str = STACK_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
    set_: list[str] = SET_OPTION,
    diff: Path | None = typer.Option(
        None, "--diff", metavar="BASE.json",
        help="Print what changes from this saved `pdctl plan -o json` (e.g. the base branch's) instead of "
             "the plan, planning the stack as deployed from it (its subnets, GPU and NAT zones, IAM roles "
             "kept, as `pulumi preview` keeps them). Exit status: 0 no change, 3 changed, 2 bad input, 1 failure."),
    width: int | None = typer.Option(
        None, "--width", min=40, help=f"Wrap text at this many columns (default: {PIPED_WIDTH}, or the terminal's "
                                      "width where narrower)."),
    strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) on a warning too, e.g. model facts "
                                "that could not be read (CI runs the plan this way)."),
    project: Path | None = PROJECT_OPTION,
) -> None:
    """What the stack creates, protects, can serve, costs per hour and how long it takes to deploy.

    Values the offline mock cloud made up (ids, ARNs, AZ names) are marked "(offline)". Exits 1 when
    a rule of the policy pack (policy/) refuses a resource, as `pulumi preview --policy-pack policy`
    would; with --strict, also on a warning."""
    from offline import deployed_stack_from_plan
    from pdctl.plan import build_plan
    from pdctl.views import render_plan

    base = read_plan_document(diff) if diff is not None else None
    run = offline_run(stack, overrides_from_set(set_), project,
                      deployed=deployed_stack_from_plan(base) if base is not None else None)
    document = build_plan(run, stack=stack, config_region=run.config.get("aws:region"))
    if base is not None:
        _print_diff(base, document.to_dict(), output)
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(document.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
    else:
        out = text_console(width)
        with out.capture() as captured:
            render_plan(out, document)
        # Wrapping leaves the spaces it broke at: no line ends in them (diff and review noise).
        sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    _report_problems(document.warnings, document.policy_violations, strict)


def _print_diff(base: dict, plan: dict, output: OutputFormat) -> NoReturn:
    """What changes from `base` to `plan`, then exit with the diff's status."""
    from pdctl.plan_diff import EXIT_CHANGED, diff_plans, render_diff

    # Compared as the JSON a reviewer saved: the same types (lists, not tuples) on both sides.
    head = json.loads(json.dumps(plan, sort_keys=True, default=str))
    changes = diff_plans(base, head)
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(changes.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(_fitted(render_diff(changes)))
    raise typer.Exit(EXIT_CHANGED if changes.changed else 0)


def _fitted(text: str) -> str:
    """A diff's text wrapped at 100 columns, for a terminal or a pull-request comment."""
    from pdctl.plan_diff import fit

    return "".join(line + "\n" for line in fit(text.splitlines()))


def _report_problems(warnings: Sequence[str], violations: Sequence[object], strict: bool) -> None:
    """Warnings and policy violations on stderr; exit 1 on a violation, and with --strict on a warning."""
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for violation in violations:
        err.print(f"[bold red]error:[/] {escape(str(violation))}", highlight=False, soft_wrap=True)
    if violations:
        raise typer.Exit(1)
    if strict and warnings:
        raise fail(f"--strict: {len(warnings)} warning(s) above")


def render(
    stack: str = STACK_OPTION,
    serve_config: bool = typer.Option(False, "--serve-config", help="Print only serveConfigV2."),
    set_: list[str] = SET_OPTION,
    project: Path | None = PROJECT_OPTION,
) -> None:
    """Print the serving namespace's objects (Namespace, NetworkPolicies, RayService) for
    `kubectl apply -f -`, or only the RayService's serveConfigV2."""
    from pdctl import render as rendering

    run = offline_run(stack, overrides_from_set(set_), project)
    if serve_config:
        sys.stdout.write(rendering.to_yaml(rendering.serve_config(rendering.registered_ray_service(run))))
    else:
        sys.stdout.write(rendering.to_yaml_documents(rendering.serving_manifests(run)))



def preflight(stack: str = STACK_OPTION, set_: list[str] = SET_OPTION, principal: str = typer.Option(
        None, "--principal", help="IAM ARN of the deploy role to check (default: the caller's).")) -> None:
    """Ask the AWS account, read-only, what it would refuse: the deploy's calls, the permissions boundary,
    quotas with a node update's surge, GPU offerings, service-linked roles."""
    from pdctl.preflight import run_preflight

    lines, status = run_preflight(offline_run(stack, overrides_from_set(set_)).program["settings"], principal)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(status)


def stack_tags(stack: str = STACK_OPTION, state: Path = typer.Option(
        ..., "--state", metavar="EXPORT.json", help="The stack's `pulumi stack export` (`-` for stdin).")) -> None:
    """Print the AWS CLI command that adds the stack tag to the stack's EC2 resources created without it:
    an administrator runs it once, before the first `pulumi up` of a release whose deploy roles change only
    what carries the stack tag (docs/DELIVERY.md, Updating from the previous release). Reads only the export."""
    from pdctl.stack_tags import create_tags_command, untagged_ec2_ids

    settings = offline_run(stack, {}).program["settings"]
    try:
        export = json.loads(sys.stdin.read() if str(state) == "-" else state.read_text())
        ids = untagged_ec2_ids(export, settings.cluster.name)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise fail(f"--state {state}: not a `pulumi stack export` document ({error})", 2) from None
    if not ids:
        err.print(f"every EC2 resource of {stack} carries {settings.cluster.name}'s stack tag: nothing to tag")
        return
    sys.stdout.write(create_tags_command(ids, settings.cluster.name, settings.region) + "\n")


def update_check(
    stack: str = STACK_OPTION,
    release: str | None = typer.Option(None, "--release", help="Only this release (its name, e.g. 2026-12-02); "
                                       "default: every release stacks run today."),
    detail: bool = typer.Option(False, "--detail", help="Each release's whole plan diff after the verdicts: every "
                                "changed input, as `pdctl plan --diff` prints it."),
) -> None:
    """Plan the stack as each release stacks run today deployed it and as this checkout would update it:
    refuse a lost cluster, node group, KMS key or store not declared in pdctl/intended_replacements.yaml,
    and name every node group whose nodes roll. Needs the releases' commits in the clone.
    Exit status: 0 passes, 4 refused, 1 failure."""
    import tempfile

    from pdctl.plan_diff import fit, render_diff
    from pdctl.release_update import EXIT_REFUSED, RELEASES, unintended_stateful_losses, update_diff, verdict

    chosen = [r for r in RELEASES if release in (None, r.name)]
    if not chosen:
        raise fail(f"--release {release}: not a release stacks run today ({', '.join(r.name for r in RELEASES)})", 2)
    refused = False
    with tempfile.TemporaryDirectory(prefix="pdctl-releases-") as workdir:
        diffs = [(r, update_diff(stack, r, Path(workdir))) for r in chosen]
    for r, diff in diffs:
        head, lines = verdict(diff, stack, r)
        sys.stdout.write("\n".join(fit([head, *lines])) + "\n")
        refused = refused or bool(unintended_stateful_losses(diff, stack, r))
    if not detail:
        sys.stdout.write("every changed input: pdctl update-check --detail\n")
    for r, diff in diffs if detail else ():
        sys.stdout.write(f"\n--- from release {r.name} ---\n" + _fitted(render_diff(diff)))
    raise typer.Exit(EXIT_REFUSED if refused else 0)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command()(plan)
    app.command("update-check")(update_check)
    app.command("size")(size.size_command)
    app.command()(render)
    app.command()(preflight)
    app.command("stack-tags")(stack_tags)
