"""A saved plan tells how its stack is deployed (offline.deployed_stack_from_plan): the facts the
program's discovery would read from EC2 and EKS after `pulumi up` of that plan."""

from __future__ import annotations

import json

from components.discovery import DeployedStack, DeployedSubnet
from offline import deployed_stack_from_plan, run_offline
from pdctl.plan import build_plan

# Deployed by a stack whose GPU nodes and NAT went to us-west-2c (usw2-az3), by pulumi-eks's cluster role.
DEPLOYED = DeployedStack(
    cluster_name="ray-llm-multinode",
    subnets=(DeployedSubnet("usw2-az3", "10.0.0.0/19", False), DeployedSubnet("usw2-az3", "10.0.224.0/22", True),
             DeployedSubnet("usw2-az1", "10.0.32.0/19", False), DeployedSubnet("usw2-az1", "10.0.228.0/22", True)),
    gpu_zone_ids=frozenset({"usw2-az3"}), nat_zone_ids=frozenset({"usw2-az3"}),
    cluster_role_arn="arn:aws:iam::123456789012:role/ray-llm-multinode-eksRole-4b3c2a1")


def plan_of(run, stack: str = "dev") -> dict:
    return json.loads(json.dumps(build_plan(run, stack=stack).to_dict(), default=str))


def test_a_new_stacks_plan_tells_its_subnets_gpu_and_nat_zones_and_current_roles(offline_run):
    plan = plan_of(offline_run("dev"))
    deployed = deployed_stack_from_plan(plan)
    assert deployed is not None and not deployed.earlier_iam_roles
    network = plan["availability_zones"]["network"]
    assert {(s.zone_id, s.cidr, s.public) for s in deployed.subnets} == {
        (z["id"], z[kind + "_cidr"], kind == "public") for z in network for kind in ("private", "public")}
    assert deployed.gpu_zone_ids == {plan["availability_zones"]["gpu"]["id"]}
    assert deployed.nat_zone_ids == {z["id"] for z in network if z["nat"]}
    assert deployed.cluster_role_arn.endswith(":role/eks-pd-llm/" + deployed.cluster_role_arn.rsplit("/", 1)[1])


def test_a_stack_planned_as_deployed_reads_back_as_deployed_so():
    deployed = deployed_stack_from_plan(plan_of(run_offline("dev", deployed=DEPLOYED)))
    assert deployed is not None and deployed.earlier_iam_roles
    assert (set(deployed.subnets), deployed.gpu_zone_ids, deployed.nat_zone_ids) == (
        set(DEPLOYED.subnets), DEPLOYED.gpu_zone_ids, DEPLOYED.nat_zone_ids)


def test_a_plan_without_a_cluster_or_inputs_tells_nothing():
    assert deployed_stack_from_plan({"tree": []}) is None
    older = {"tree": [{"type": "eks:index:Cluster", "name": "cluster-eks", "settings": {}, "children": []}]}
    assert deployed_stack_from_plan(older) is None
