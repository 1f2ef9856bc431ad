"""Updating a stack the previous release deployed: each stack is planned offline at that release (its
own program and harness, extracted with git archive) and at this checkout as an update of what that
release deployed (offline.deployed_stack_from_plan: what `pulumi preview` reads from AWS), and a
replacement of a resource that holds state (the VPC, the cluster, node groups, KMS keys, the GCS
store, Prometheus's release) is refused unless pdctl/intended_replacements.yaml declares it, with why."""

from __future__ import annotations

import pytest

from offline import deployed_stack_from_plan, run_offline
from pdctl.plan import build_plan
from pdctl.plan_diff import diff_plans, render_diff
from pdctl.release_update import PREVIOUS_RELEASE, intended_replacements, release_plan, unintended_stateful_replacements


@pytest.fixture(scope="module")
def release_workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("releases")


def update_diff(stack: str, workdir, *, as_deployed: bool = True):
    """The release's plan → this checkout's, planned as an update of what the release deployed (or, not
    `as_deployed`, as a new stack would be)."""
    base = release_plan(PREVIOUS_RELEASE, stack, workdir)
    deployed = deployed_stack_from_plan(base) if as_deployed else None
    head = build_plan(run_offline(stack, deployed=deployed), stack=stack).to_dict()
    return diff_plans(base, head)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_update_from_the_previous_release_replaces_nothing_that_holds_state(stack, release_workdir):
    """No setting to know: the stack keeps the roles, subnets and zones its deployed resources have."""
    diff = update_diff(stack, release_workdir)
    assert diff.changed  # the release differs: the comparison ran
    assert unintended_stateful_replacements(diff, stack) == [], render_diff(diff)
    replaced = {r.type for r in diff.resources if r.action == "replace"}
    assert not replaced & {"aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway", "aws:ec2/vpc:Vpc"}


@pytest.fixture(scope="module")
def update_without_setting(release_workdir):
    return update_diff("dev", release_workdir, as_deployed=False)


def test_planned_as_a_new_stack_the_cluster_and_node_groups_would_be_replaced_and_say_so_first(
        update_without_setting):
    """The current layout's cluster role replaces the cluster (EKS cannot change it), a node role under
    a new path replaces every node group: the check refuses it, and the diff's first lines say what is
    lost. It is what reading the deployed cluster's role spares an update."""
    diff = update_without_setting
    refused = {(r.type, r.name) for r in unintended_stateful_replacements(diff, "dev")}
    assert refused == {("eks:index:Cluster", "cluster-eks"), ("eks:index:ManagedNodeGroup", "gpu-nodes"),
                       ("eks:index:ManagedNodeGroup", "system-nodes")}
    lines = render_diff(diff).splitlines()
    assert all(line.startswith("REPLACES A STATEFUL RESOURCE: ") for line in lines[2:5])
    assert "cluster-eks (eks:index:Cluster) loses the EKS cluster" in lines[2]
    first = diff.resources[:3]
    assert {r.name for r in first} == {"cluster-eks", "gpu-nodes", "system-nodes"}
    [cluster] = [r for r in first if r.name == "cluster-eks"]
    assert [c.path for c in cluster.changes if c.replaces] == ["serviceRole"]


def test_a_replacement_is_accepted_only_when_declared_with_a_reason(update_without_setting):
    declared = [{"stack": "dev", "type": r.type, "name": r.name, "why": "a new cluster on purpose"}
                for r in update_without_setting.stateful_replacements]
    assert unintended_stateful_replacements(update_without_setting, "dev", declared) == []
    assert unintended_stateful_replacements(update_without_setting, "prod", declared)  # another stack's
    unexplained = [{**entry, "why": " "} for entry in declared]
    assert len(unintended_stateful_replacements(update_without_setting, "dev", unexplained)) == 3
    # The file's own entries each say why (an entry without one would be ignored).
    assert all(str(e.get("why") or "").strip() for e in intended_replacements())


def test_a_release_missing_from_a_shallow_clone_is_named_with_the_fix(tmp_path):
    with pytest.raises(LookupError, match="fetch-depth: 0"):
        release_plan("0" * 40, "dev", tmp_path)
