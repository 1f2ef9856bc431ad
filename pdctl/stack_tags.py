"""The stack tag on a running stack's EC2 resources, added once by an administrator before the first
`pulumi up` of the release whose deploy roles change only what carries their own cluster's tag.

Such a stack's network and node resources were created without the stack tag. Its deploy role may
neither change them nor put the tag on them (tagging what exists is how one environment would claim the
other's), so its first `up` would stop at the first of them. An administrator tags them from the stack's
state: `pulumi stack export` names each one and the tags it was created with."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import Any

from components.config.names import STACK_TAG

# CreateTags takes a resource by its id; a placement group's state id is its name.
_TAGGING_ID_OUTPUT = {"aws:ec2/placementGroup:PlacementGroup": "placementGroupId"}
_EC2_TOKEN = re.compile(r"'(aws:(?:ec2|vpc)/[^']+)'")


@functools.cache
def ec2_types_taking_tags() -> frozenset[str]:
    """The type tokens of the EC2 API's resources (aws:ec2/*, and the security group rules, aws:vpc/*)
    that take tags, read from pulumi-aws's classes."""
    import pulumi
    import pulumi_aws as aws

    types: set[str] = set()
    for module in (aws.ec2, aws.vpc):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            # pulumi-aws's generated classes register their type token and take their inputs here.
            init = getattr(cls, "_internal_init", None)
            if issubclass(cls, pulumi.CustomResource) and init and "tags" in inspect.signature(init).parameters:
                types.update(_EC2_TOKEN.findall(inspect.getsource(init)))
    return frozenset(types)


def untagged_ec2_ids(export: Mapping[str, Any], cluster_name: str) -> list[str]:
    """The ids, as EC2's CreateTags takes them, of the resources in `export` (`pulumi stack export`'s
    document) that take tags and were recorded without the stack tag with `cluster_name`."""
    taking_tags = ec2_types_taking_tags()
    ids = []
    for resource in export["deployment"].get("resources") or []:
        outputs = resource.get("outputs") or {}
        if resource["type"] in taking_tags and (outputs.get("tags") or {}).get(STACK_TAG) != cluster_name:
            ids.append(outputs.get(_TAGGING_ID_OUTPUT.get(resource["type"], ""), resource["id"]))
    return ids


def create_tags_command(ids: list[str], cluster_name: str, region: str) -> str:
    """The AWS CLI command that gives `ids` the stack tag with `cluster_name` (EC2's CreateTags takes
    resources of several types in one call)."""
    return (f"aws ec2 create-tags --region {region} --resources {' '.join(ids)} "
            f"--tags Key={STACK_TAG},Value={cluster_name}")
