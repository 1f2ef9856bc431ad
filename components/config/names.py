"""What the stack's names look like: AWS regions, AZs and zone IDs, DNS labels, the cluster name, CIDRs,
and the tags subnets are found by."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator

DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d[a-z]$")
ZONE_ID = re.compile(r"^[a-z]{3,7}\d-az\d+$")
# An EBS snapshot: its ID (snap- and 8 or 17 hex digits), or its ARN, which names its region.
SNAPSHOT_ID = re.compile(r"^snap-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
SNAPSHOT_ARN = re.compile(r"^arn:aws(?:-cn|-us-gov)?:ec2:([a-z0-9-]+)::snapshot/(snap-(?:[0-9a-f]{8}|[0-9a-f]{17}))$")


def ipv4_cidrs(value: tuple[str, ...]) -> tuple[str, ...]:
    """`value` when each item is an IPv4 CIDR; else a ValueError naming the first that is not."""
    for cidr in value:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError as error:
            raise ValueError(f"{cidr!r} is not an IPv4 CIDR ({error})") from None
    return value


def _cluster_name(value: str) -> str:
    # IAM role and security group names are derived from it and must stay within AWS limits.
    if len(value) > 40 or not DNS_1035_LABEL.match(value):
        raise ValueError("not a DNS-1035 label of at most 40 characters")
    return value


ClusterName = Annotated[str, AfterValidator(_cluster_name)]

# Subnet tags the AWS Load Balancer Controller and EKS use to find subnets
# (https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html).
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"


def cluster_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


# Every AWS resource of the stack that takes tags carries it, with the cluster's name, from its create
# on: each environment's deploy role may change only what carries its own value
# (bootstrap/deploy_permissions/naming.py STACK_TAG, which must agree).
STACK_TAG = "eks-pd-llm/cluster"


def stack_tags(cluster_name: str) -> dict[str, str]:
    return {STACK_TAG: cluster_name}
