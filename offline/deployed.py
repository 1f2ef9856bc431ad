"""A stack as deployed, told from a saved plan: `deployed_stack_from_plan(plan) -> DeployedStack | None`.

A plan document (`pdctl plan -o json`, or any `{"tree": [...]}` with every resource's inputs, such as
pdctl/release_update.py's plan of an earlier release) describes what `pulumi up` of it deployed:
its subnets' CIDRs by zone, the zone of its GPU node groups and of its NAT gateways, and its EKS
cluster's role. Handed to the offline cloud (`CloudMocks(region, deployed=...)`, or
`run_offline(stack, deployed=...)`), the program plans an update of that stack, as `pulumi preview`
does against the account: `pdctl plan --diff base.json` plans the change as an update of the base.

The plan holds the offline mock cloud's stand-in ids (subnet ids in a node group's inputs, a role's
id in the cluster's `serviceRole`): they are matched back to their resources with the ids
offline/mock_cloud.py gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from components.config.names import PUBLIC_ELB_TAG
from components.discovery import DeployedStack, DeployedSubnet
from components.scheduling import GPU_ROLE, ROLE_LABEL
from offline.mock_cloud import ACCOUNT_ID, CloudMocks, ec2_id, role_name

SUBNET = "aws:ec2/subnet:Subnet"
NAT_GATEWAY = "aws:ec2/natGateway:NatGateway"
ROLE = "aws:iam/role:Role"
CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def _nodes(tree: list[dict]) -> Iterator[dict]:
    for node in tree:
        yield node
        yield from _nodes(node.get("children") or [])


def deployed_stack_from_plan(plan: Mapping[str, Any], zone_ids: Mapping[str, str] | None = None,
                             ) -> DeployedStack | None:
    """What `pulumi up` of `plan` left deployed, as the program's discovery reads it from AWS; None when
    the plan has no cluster, or no inputs (made by an older pdctl). `zone_ids` maps AZ names to zone
    IDs (default: the offline cloud's, for the region of the plan's subnets)."""
    nodes = list(_nodes(list(plan.get("tree") or [])))
    clusters = [n for n in nodes if n["type"] == CLUSTER]
    if not clusters or not all(n.get("inputs") for n in nodes if n["type"] in (SUBNET, CLUSTER)):
        return None
    cluster = clusters[0]["inputs"]
    subnets = {ec2_id("subnet", SUBNET, n["name"]): n["inputs"] for n in nodes if n["type"] == SUBNET}
    if zone_ids is None:
        regions = {inputs["availabilityZone"][:-1] for inputs in subnets.values()}
        zone_ids = CloudMocks(regions.pop() if regions else "us-west-2").zone_ids

    def zones(subnet_ids: list[str]) -> frozenset[str]:
        return frozenset(zone_ids[subnets[i]["availabilityZone"]] for i in subnet_ids if i in subnets)

    gpu_groups = [n["inputs"] for n in nodes
                  if n["type"] == NODE_GROUP and (n["inputs"].get("labels") or {}).get(ROLE_LABEL) == GPU_ROLE]
    return DeployedStack(
        cluster_name=cluster["name"],
        subnets=tuple(DeployedSubnet(zone_ids[inputs["availabilityZone"]], inputs["cidrBlock"],
                                     PUBLIC_ELB_TAG in (inputs.get("tags") or {}))
                      for inputs in subnets.values()),
        gpu_zone_ids=zones([i for group in gpu_groups for i in group.get("subnetIds") or ()]),
        nat_zone_ids=zones([n["inputs"]["subnetId"] for n in nodes if n["type"] == NAT_GATEWAY]),
        cluster_role_arn=_cluster_role_arn(cluster, [n for n in nodes if n["type"] == ROLE]))


def _cluster_role_arn(cluster: Mapping[str, Any], roles: list[dict]) -> str:
    """The stack's own role (`serviceRole`, by the id the mocks gave it), else the one pulumi-eks
    makes for the cluster at IAM's root path."""
    service_role = cluster.get("serviceRole")
    for role in roles:
        if service_role and role_name(role["name"], role["inputs"]) == service_role:
            return f"arn:aws:iam::{ACCOUNT_ID}:role{role['inputs'].get('path') or '/'}{service_role}"
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{cluster['name']}-eksRole"
