"""What every pdctl command shares: the consoles, the one-line error, the common options, the offline run
of a stack and its outputs."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from components.project import PROJECT_ENV
from pdctl import endpoint

console = Console()
err = Console(stderr=True)


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def overrides_from_set(pairs: list[str]) -> dict[str, str]:
    """`--set KEY=VALUE` pairs as {key: value}, by the rules the lab's `--set` follows too."""
    from offline.overrides import parse_overrides as parse
    from serve_app.errors import ConfigError

    try:
        return parse(pairs)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None



def use_project(project: Path | None) -> Path:
    """The project directory: `project`, else found from the working directory (components/project.py);
    none found exits 2 with one line saying what to pass."""
    from components.project import ProjectNotFound, find_project_dir

    try:
        if project is not None:
            os.environ[PROJECT_ENV] = str(project)
        return find_project_dir()
    except ProjectNotFound as exc:
        raise fail(str(exc), 2) from None


def offline_run(stack: str, overrides: dict[str, str], project: Path | None = None, deployed: Any = None):
    """Run the real program under mocks; a user mistake exits 2 with the config error, no traceback.
    The project is `project`, else found from the working directory (components/project.py); the
    stack is new unless `deployed` (a DeployedStack) says how it is deployed."""
    import yaml

    import offline
    from serve_app.errors import ConfigError

    use_project(project)
    try:
        return offline.run_offline(stack, overrides=overrides or None, deployed=deployed)
    except ConfigError as exc:
        raise fail(f"stack {stack!r}: {exc}", 2) from None
    except yaml.YAMLError as exc:
        raise fail(f"stack {stack!r}: the stack file is not valid YAML: {exc}", 2) from None



STACK_OPTION = typer.Option("dev", "--stack", "-s", help="Stack name: reads Pulumi.<stack>.yaml.")
SET_OPTION = typer.Option([], "--set", help="Override a config key for this run: key=value (repeatable).")
PROJECT_OPTION = typer.Option(
    None, "--project", "-C", metavar="DIR", file_okay=False,
    help="The project checkout (its Pulumi.yaml and stack files). Default: the working directory or the "
         f"nearest parent holding this project's Pulumi.yaml; ${PROJECT_ENV} also sets it.")


# Text is read on a screen, piped (less, a CI log, a file) or not: wrapped at this many columns, or at
# a narrower terminal's width. Wider lines, as the plan's were at 120, wrap again in an 100-column pane.
PIPED_WIDTH = 100


def text_console(width: int | None) -> Console:
    """--width columns when given; else PIPED_WIDTH, or the terminal's width where it is narrower."""
    if width:
        return Console(width=width)
    if sys.stdout.isatty():
        return Console(width=min(console.width, PIPED_WIDTH))
    return Console(width=PIPED_WIDTH)


def read_plan_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise fail(f"--diff {path}: not a readable `pdctl plan --output json` document ({exc})", 2) from None
    if not isinstance(document, dict) or "tree" not in document:
        raise fail(f"--diff {path}: not a `pdctl plan --output json` document (no resource tree)", 2)
    return document



# ------------------------------------------------------------------------- stack outputs

OUTPUTS_FILE_OPTION = typer.Option(
    None, "--from-file", help="Saved `pulumi stack output --json` (with --show-secrets where the stack's "
                              "kubeconfig is needed); else the pulumi CLI is asked.")
PULUMI_STACK_OPTION = typer.Option(None, "--stack", "-s", help="Pulumi stack for `pulumi stack output`.")


def stack_outputs(stack: str | None, from_file: Path | None, *, secrets: bool = False) -> dict:
    try:
        return endpoint.read_stack_outputs(stack, from_file, secrets=secrets)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
