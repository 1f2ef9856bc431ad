"""`mirror-model`: a Hugging Face model copied into the stack's S3 mirror."""

from __future__ import annotations

import os

import typer

from pdctl.commands.common import (
    console,
    fail,
)


def mirror_model(
    model: str = typer.Argument(..., help="Hugging Face model id, org/name."),
    destination: str = typer.Argument(..., help="s3://<bucket>/<prefix>; the model goes under <prefix>/<org>/<name>/."),
    revision: str = typer.Option(None, "--revision", help="Branch, tag or commit of the model (default: main)."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="S3 endpoint other than AWS's (testing)."),
) -> None:
    """Copy a Hugging Face model into an S3 mirror, then print the modelSource that loads it.
    Uses the usual AWS credentials (profile, env, SSO) and HF_TOKEN for gated models."""
    import boto3

    from pdctl.mirror import mirror_model as copy_model

    try:
        result = copy_model(model, destination, revision=revision, token=os.environ.get("HF_TOKEN"),
                            s3_client=boto3.client("s3", endpoint_url=endpoint_url))
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    console.print(f"copied {result.objects} files, {result.total_bytes / 1e9:.2f} GB", highlight=False)
    console.print(f"pulumi config set modelSource {result.model_source}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command("mirror-model")(mirror_model)
