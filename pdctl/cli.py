"""`python -m pdctl`: plan a stack offline, then operate its endpoint.

The app, assembled from its command groups (pdctl/commands/, one module per group). Heavy modules
(pulumi, kubernetes, openai) are imported inside the commands that need them, so `--help` and the
client commands start fast and never pull in Pulumi.
"""

from __future__ import annotations

import typer

from pdctl import version
from pdctl.commands import bench, client, model, operate, plan
from pdctl.commands.common import PIPED_WIDTH

__all__ = ["PIPED_WIDTH", "app"]

app = typer.Typer(
    help="Plan an eks-pd-llm stack offline (no AWS account), then operate its endpoint.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app.callback()(version.app_callback)
for group in (plan, model, operate, client, bench):
    group.register(app)
