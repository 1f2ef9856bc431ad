"""What a new GPU node reads, made ahead of it: `mirror-model` (a Hugging Face model copied into the
stack's S3 mirror) and `image-snapshot` (an EBS snapshot of containerd's store with the Ray image)."""

from __future__ import annotations

import os

import typer

from pdctl.commands.common import (
    console,
    fail,
)
from pdctl.image_snapshot import DEFAULT_INSTANCE_TYPE, DEFAULT_SIZE_GIB


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


def image_snapshot(
    subnet_id: str = typer.Option(..., "--subnet-id", help="Subnet of the builder instance, with a route to the "
                                  "image's registry (the stack's private subnet in the GPU AZ)."),
    instance_profile: str = typer.Option(..., "--instance-profile", help="Instance profile of the builder: ECR "
                                         "read (AmazonEC2ContainerRegistryReadOnly)."),
    stack: str = typer.Option("dev", "--stack", help="Stack whose region, rayImage and kubernetesVersion to use."),
    fast_restore_az: str = typer.Option(None, "--fast-restore-az", help="Turn EBS fast snapshot restore on in this "
                                        "AZ (the GPU nodes'): restored volumes read at full speed at once; billed "
                                        "per hour and AZ."),
    size_gib: int = typer.Option(DEFAULT_SIZE_GIB, "--size-gib", help="The volume (and each node's) in GiB."),
    instance_type: str = typer.Option(DEFAULT_INSTANCE_TYPE, "--instance-type", help="The builder's type."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="EC2 and SSM endpoint other than AWS's (testing)."),
) -> None:
    """Build an EBS snapshot holding the stack's Ray image in containerd's store, then print the
    gpuImageSnapshotId that gives every GPU node a volume restored from it (nothing pulled on a new
    node). Uses the usual AWS credentials; the builder instance and its volume are removed however it ends."""
    import boto3

    from offline import run_offline
    from pdctl.image_snapshot import SnapshotRequest, build_image_snapshot

    settings = run_offline(stack).program["stack"].settings
    request = SnapshotRequest(image=settings.serving.image, region=settings.region,
                              kubernetes_version=settings.cluster.kubernetes_version, subnet_id=subnet_id,
                              instance_profile=instance_profile, fast_restore_az=fast_restore_az, size_gib=size_gib,
                              instance_type=instance_type)
    try:
        request.check()
        result = build_image_snapshot(
            request, ec2=boto3.client("ec2", region_name=request.region, endpoint_url=endpoint_url),
            ssm=boto3.client("ssm", region_name=request.region, endpoint_url=endpoint_url),
            log=lambda line: console.print(line, highlight=False))
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    except RuntimeError as exc:
        raise fail(str(exc), 1) from None
    if not result.fast_restore_az:
        console.print("fast snapshot restore is off: a new node's volume fills from S3 as it is read "
                      "(--fast-restore-az <the GPU AZ> turns it on)", highlight=False)
    console.print(f"pulumi config set gpuImageSnapshotId {result.arn} --stack {stack}", highlight=False,
                  soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command("mirror-model")(mirror_model)
    app.command("image-snapshot")(image_snapshot)
