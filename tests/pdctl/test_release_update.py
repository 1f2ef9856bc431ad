"""Updating a stack the previous release deployed: each stack is planned offline at that release (its
own program and harness, extracted with git archive) and at this checkout, and a replacement of a
resource that holds state (the VPC, the cluster, node groups, KMS keys, the GCS store, Prometheus's
release) is refused unless pdctl/intended_replacements.yaml declares it, with why."""

from __future__ import annotations

import pytest

from offline import run_offline
from pdctl.plan import build_plan
from pdctl.plan_diff import diff_plans, render_diff
from pdctl.release_update import PREVIOUS_RELEASE, intended_replacements, release_plan, unintended_stateful_replacements

# What docs/DELIVERY.md tells the operator of a stack the previous release created to set first.
UPDATE_SETTINGS = {"keepEarlierIamRoles": "true"}


@pytest.fixture(scope="module")
def release_workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("releases")


def update_diff(stack: str, workdir, overrides: dict[str, str]):
    base = release_plan(PREVIOUS_RELEASE, stack, workdir)
    head = build_plan(run_offline(stack, overrides=overrides), stack=stack).to_dict()
    return diff_plans(base, head)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_update_from_the_previous_release_replaces_nothing_that_holds_state(stack, release_workdir):
    diff = update_diff(stack, release_workdir, UPDATE_SETTINGS)
    assert diff.changed  # the release differs: the comparison ran
    assert unintended_stateful_replacements(diff, stack) == [], render_diff(diff)


@pytest.fixture(scope="module")
def update_without_setting(release_workdir):
    return update_diff("dev", release_workdir, {})


def test_without_the_update_setting_the_cluster_and_node_groups_would_be_replaced_and_say_so_first(
        update_without_setting):
    """A new cluster role replaces the cluster (EKS cannot change it), a node role under a new path
    replaces every node group: the check refuses it, and the diff's first lines say what is lost."""
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
