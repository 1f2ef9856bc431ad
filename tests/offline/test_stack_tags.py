"""Every EC2 resource the stack registers carries the stack tag with its environment's cluster name from
its create on (tag specifications): each deploy role's EC2 grants (bootstrap/deploy_permissions/) allow
changes only on what carries its own cluster's value, and creates only with it."""

from __future__ import annotations

import functools
import inspect
import re

import pulumi
import pulumi_aws as aws
import pytest

from components.config.names import STACK_TAG

# The modules of the EC2 API's resources: aws:ec2/* and the security group rules (aws:vpc/*).
EC2_MODULES = (aws.ec2, aws.vpc)
_TOKEN = re.compile(r"'(aws:(?:ec2|vpc)/[^']+)'")


@functools.cache
def tagged_ec2_types() -> frozenset[str]:
    """The type tokens of the EC2 resources that take tags, from pulumi-aws's classes."""
    types = set()
    for module in EC2_MODULES:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, pulumi.CustomResource) and "tags" in inspect.signature(cls._internal_init).parameters:
                types.update(_TOKEN.findall(inspect.getsource(cls._internal_init)))
    return frozenset(types)


def untagged(run) -> list[str]:
    """The EC2 resources of `run` that take tags and miss the stack tag with its cluster's name."""
    cluster = run.program["settings"].cluster.name
    taking_tags = tagged_ec2_types()
    return [f"{r.type} {r.name}" for r in run.resources
            if r.type in taking_tags and (r.inputs.get("tags") or {}).get(STACK_TAG) != cluster]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_ec2_resource_carries_the_stack_tag_with_its_cluster(offline_run, stack):
    run = offline_run(stack)
    ec2 = [r for r in run.resources if r.type in tagged_ec2_types()]
    # The network, the node groups' templates, placement group and EFA group, their rules (and prod's
    # GCS store's groups): what each deploy role may change only with its own cluster's tag.
    assert {r.type for r in ec2} >= {
        "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/eip:Eip",
        "aws:ec2/natGateway:NatGateway", "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/vpcEndpoint:VpcEndpoint", "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/placementGroup:PlacementGroup",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"}
    assert untagged(run) == []

