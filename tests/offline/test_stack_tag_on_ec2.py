"""Every EC2 resource the stack registers carries the stack tag with its environment's cluster name from
its create on (tag specifications): each deploy role's EC2 grants (bootstrap/deploy_permissions/) allow
changes only on what carries its own cluster's value, and creates only with it."""

from __future__ import annotations

import pytest

from components.config.names import STACK_TAG
from pdctl.stack_tags import ec2_types_taking_tags


def untagged(run) -> list[str]:
    """The EC2 resources of `run` that take tags and miss the stack tag with its cluster's name."""
    cluster = run.program["settings"].cluster.name
    return [f"{r.type} {r.name}" for r in run.resources
            if r.type in ec2_types_taking_tags() and (r.inputs.get("tags") or {}).get(STACK_TAG) != cluster]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_ec2_resource_carries_the_stack_tag_with_its_cluster(offline_run, stack):
    run = offline_run(stack)
    # The network, the node groups' templates, placement group and EFA group, their rules (and prod's
    # GCS store's groups): what each deploy role may change only with its own cluster's tag.
    assert {r.type for r in run.resources if r.type in ec2_types_taking_tags()} >= {
        "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/eip:Eip",
        "aws:ec2/natGateway:NatGateway", "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/vpcEndpoint:VpcEndpoint", "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/placementGroup:PlacementGroup",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"}
    assert untagged(run) == []
