"""An autoscaled GPU node group has a name the Cluster Autoscaler's policy and discovery must know. The
name changes with exactly the inputs that make EKS need a new group, so Pulumi's create-before-delete
replacement never meets "NodeGroup already exists", and the autoscaler follows the new name; any other
change (scaling, labels, a new launch template version) keeps it."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from components.node_groups import node_group_name
from facts.replacements import REPLACE_TRIGGERS
from offline import run_offline
from pdctl.preflight import load_deploy_permissions

CLUSTER = "ray-llm-multinode"
AUTOSCALED = {"gpuNodeMaxCount": "4"}


def _named(overrides: dict[str, str]) -> dict[str, Any]:
    """The GPU group's name and inputs, the autoscaler's discovery tags and the names its policy allows."""
    run = run_offline("dev", overrides={**AUTOSCALED, **overrides})
    [group] = [r for r in run.resources if r.type == "eks:index:ManagedNodeGroup" and r.name == "gpu-nodes"]
    [release] = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"
                 and r.inputs["chart"] == "cluster-autoscaler"]
    [policy] = [r for r in run.resources if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
                and r.name.startswith("cluster-autoscaler")]
    assert policy.inputs["policyArn"].endswith(f":policy/eks-pd-llm/{CLUSTER}-cluster-autoscaler")
    return {"name": group.inputs["nodeGroupName"], "group": group,
            "discovery": release.inputs["values"]["autoDiscovery"]["tags"]}


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return _named({})


def _follows(named: dict[str, Any]) -> None:
    assert f"eks:nodegroup-name={named['name']}" in named["discovery"]
    # The bootstrap's policy for the cluster (made before any group exists) resizes it by its name.
    [write] = [s for s in load_deploy_permissions().workload_policies(partition="aws", cluster_name=CLUSTER)[
        "cluster-autoscaler"]["Statement"] if "Condition" in s]
    assert fnmatch.fnmatchcase(named["name"], write["Condition"]["StringLike"]["aws:ResourceTag/eks:nodegroup-name"])


def test_the_name_is_readable_bounded_and_the_autoscaler_knows_it(base) -> None:
    assert base["name"].startswith(f"{CLUSTER}-gpu-") and len(base["name"]) == len(CLUSTER) + 13
    assert len(node_group_name("c" * 40 + "-gpu-prefill", {})) <= 63  # EKS's limit, at the longest cluster name
    _follows(base)
    # No deleteBeforeReplace: it would not reach the node group inside pulumi-eks's component anyway.
    assert not base["group"].delete_before_replace


def test_a_change_that_forces_a_new_group_gives_a_new_name_the_autoscaler_follows(base) -> None:
    moved = _named({"gpuNodeType": "g6.12xlarge"})
    assert moved["name"] != base["name"] and moved["name"].startswith(f"{CLUSTER}-gpu-")
    _follows(moved)


@pytest.mark.parametrize("overrides", [
    {"gpuNodeMaxCount": "6"},  # scaling: updated in place
    {"gpuDiskGiB": "300"},  # the launch template's root volume: a new version, rolled in place
], ids=["scaling", "launch template version"])
def test_a_change_eks_makes_in_place_keeps_the_name(base, overrides) -> None:
    kept = _named(overrides)
    assert kept["name"] == base["name"]
    assert kept["group"].inputs != base["group"].inputs  # the change reached the group


def test_the_name_hashes_exactly_the_node_group_inputs_eks_cannot_change(base) -> None:
    """Every ForceNew input of the node group the stack sets, and nothing else: `nodeGroupName` itself
    and the inputs the stack leaves unset (diskSize lives in the launch template, no remote access)."""
    forcing = set(REPLACE_TRIGGERS["eks:index:ManagedNodeGroup"].paths)
    unset = {"diskSize", "remoteAccess", "launchTemplate.name", "nodeGroupName", "nodeGroupNamePrefix"}
    inputs = base["group"].inputs
    assert not unset & set(inputs) - {"nodeGroupName"}
    values = {path: inputs[path.split(".")[0]][path.split(".")[1]] if "." in path else inputs[path]
              for path in forcing - unset}
    assert node_group_name(f"{CLUSTER}-gpu", values) == base["name"]
