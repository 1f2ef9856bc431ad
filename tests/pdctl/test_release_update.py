"""The update check: each stack is planned offline at every release stacks run today (its own program
and harness, extracted with git archive) and at this checkout as an update of what that release
deployed (offline.deployed_stack_from_plan: what `pulumi preview` reads from AWS); a replacement, delete
or possible replacement of a resource that holds state (the VPC, the cluster, node groups, KMS keys, the GCS store,
Prometheus's release) is refused unless pdctl/intended_replacements.yaml declares it, with why, and a
node group whose nodes roll is named with its extra nodes, quota and minutes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pdctl.cli import app
from pdctl.node_rollout import REPLACE
from pdctl.plan_diff import render_diff
from pdctl.release_update import (
    EXIT_REFUSED,
    RELEASES,
    intended_replacements,
    release_plan,
    unintended_stateful_losses,
    update_diff,
    verdict,
)

FIRST, LAST = RELEASES[0], RELEASES[-1]


@pytest.fixture(scope="module")
def release_workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("releases")


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_update_from_each_release_loses_nothing_that_holds_state(stack, release, release_workdir):
    """No setting to know: the stack keeps the roles, subnets and zones its deployed resources have."""
    diff = update_diff(stack, release, release_workdir)
    assert unintended_stateful_losses(diff, stack, release) == [], render_diff(diff)
    replaced = {r.type for r in diff.resources if r.action in ("replace", "delete")}
    assert not replaced & {"aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway", "aws:ec2/vpc:Vpc"}


@pytest.fixture(scope="module")
def update_from_first(release_workdir):
    return update_diff("dev", FIRST, release_workdir)


def test_the_first_release_differs_and_its_new_node_user_data_rolls_every_gpu_node_with_its_surge(
        update_from_first):
    """The release before adds NodeConfig and huge pages to the GPU nodes' user data: a new launch template
    version, which EKS rolls out node by node with up to two more nodes in the group's one AZ."""
    diff = update_from_first
    assert diff.changed
    [rolled] = [r for r in diff.rollouts if r.name == "gpu-nodes"]
    assert rolled.action == "update" and rolled.rollout is not None
    assert "launchTemplate.version" in [c.path for c in rolled.changes]
    roll = rolled.rollout
    assert (roll.nodes, roll.added_nodes, roll.vcpus_per_node) == (2, 2, 32)
    assert (roll.extra_vcpus, roll.peak_vcpus) == (64, 128)
    assert roll.minutes > 10  # a new GPU node's cold start
    head, lines = verdict(diff, "dev", FIRST)
    assert head.endswith("passes: nothing that holds state is lost unless declared")
    assert any(line.startswith("  gpu-nodes rolls every GPU node: 2 × g6.8xlarge") and "128 at the peak" in line
               for line in lines)
    # The system nodes' template did not change: no roll there.
    assert "system-nodes" not in {r.name for r in diff.rollouts}


def test_the_last_release_is_todays_main_and_nothing_rolls_from_it(release_workdir):
    assert LAST.name == "2026-12-02" and LAST.commit.startswith("f81eec3")
    diff = update_diff("dev", LAST, release_workdir)
    assert diff.rollouts == [] and diff.stateful_losses == [], render_diff(diff)


@pytest.fixture(scope="module")
def update_without_setting(release_workdir):
    return update_diff("dev", FIRST, release_workdir, as_deployed=False)


def test_planned_as_a_new_stack_the_cluster_and_node_groups_would_be_replaced_and_say_so_first(
        update_without_setting):
    """The current layout's cluster role replaces the cluster (EKS cannot change it), a node role under
    a new path replaces every node group: the check refuses it, and the diff's first lines say what is
    lost. It is what reading the deployed cluster's role spares an update."""
    diff = update_without_setting
    refused = {(r.type, r.name) for r in unintended_stateful_losses(diff, "dev", FIRST)}
    assert refused == {("eks:index:Cluster", "cluster-eks"), ("eks:index:ManagedNodeGroup", "gpu-nodes"),
                       ("eks:index:ManagedNodeGroup", "system-nodes")}
    lines = render_diff(diff).splitlines()
    assert all(line.startswith("REPLACES A STATEFUL RESOURCE: ") for line in lines[2:5])
    assert "cluster-eks (eks:index:Cluster) loses the EKS cluster" in lines[2]
    first = diff.resources[:3]
    assert {r.name for r in first} == {"cluster-eks", "gpu-nodes", "system-nodes"}
    [cluster] = [r for r in first if r.name == "cluster-eks"]
    assert [c.path for c in cluster.changes if c.replaces] == ["serviceRole"]
    # A replaced node group is created beside the old one: a whole second group's quota while both run.
    [gpu] = [r for r in first if r.name == "gpu-nodes"]
    assert gpu.rollout is not None and (gpu.rollout.added_nodes, gpu.rollout.peak_vcpus) == (2, 128)
    head, _ = verdict(diff, "dev", FIRST)
    assert "REFUSED: 3 loss(es) of state" in head


def test_a_loss_is_accepted_only_when_declared_with_a_reason_for_that_release(update_without_setting):
    diff = update_without_setting
    declared = [{"stack": "dev", "type": r.type, "name": r.name, "why": "a new cluster on purpose",
                 "release": FIRST.name} for r in diff.stateful_losses]
    assert unintended_stateful_losses(diff, "dev", FIRST, declared) == []
    assert unintended_stateful_losses(diff, "prod", FIRST, declared)  # another stack's
    assert unintended_stateful_losses(diff, "dev", LAST, declared)  # another release's
    unexplained = [{**entry, "why": " "} for entry in declared]
    assert len(unintended_stateful_losses(diff, "dev", FIRST, unexplained)) == 3
    # The file's own entries each say why (an entry without one would be ignored).
    assert all(str(e.get("why") or "").strip() for e in intended_replacements())


def test_an_autoscaled_gpu_group_the_last_release_named_is_renamed_once_by_a_new_group_beside_the_old(
        release_workdir):
    """The day-two face of the name that follows the inputs forcing a new group: a group the last
    release named `<cluster>-gpu` is replaced once, created beside the old one, and the check says so."""
    diff = update_diff("dev", LAST, release_workdir, {"gpuNodeMaxCount": "4", "decodeMaxReplicas": "3"})
    [group] = [r for r in diff.resources if r.name == "gpu-nodes"]
    assert group.action == "replace"
    [name] = [c for c in group.changes if c.path == "nodeGroupName"]
    assert name.before == "ray-llm-multinode-gpu" and str(name.after).startswith("ray-llm-multinode-gpu-")
    assert group.rollout is not None and (group.rollout.how, group.rollout.added_nodes) == (REPLACE, 2)
    assert group in unintended_stateful_losses(diff, "dev", LAST)  # refused until declared


def test_a_release_missing_from_a_shallow_clone_is_named_with_the_fix(tmp_path):
    with pytest.raises(LookupError, match="fetch-depth: 0"):
        release_plan("0" * 40, "dev", tmp_path)


def test_the_command_leads_with_one_verdict_per_release_and_exits_4_on_a_refusal(monkeypatch, update_without_setting):
    monkeypatch.setattr("pdctl.release_update.update_diff", lambda stack, release, workdir: update_without_setting)
    result = CliRunner().invoke(app, ["update-check", "--stack", "dev", "--release", FIRST.name])
    assert result.exit_code == EXIT_REFUSED == 4, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"update check, stack dev from release {FIRST.name} (cee1f90): REFUSED")
    unknown = CliRunner().invoke(app, ["update-check", "--stack", "dev", "--release", "1999-01-01"])
    assert unknown.exit_code == 2
