"""A deployed stack stays put: what AWS reports of it (its subnets' CIDRs, the zones of its GPU nodes
and NAT, its cluster's role) is what the next plan keeps, and a new stack gets the current layout.

The offline cloud answers the program's EC2 and EKS questions for a stack deployed as a
`DeployedStack` says (offline/mock_cloud.py); the program is run under mocks (preview=False)."""

from __future__ import annotations

import ipaddress

import pytest

from components.config.declared import project_name
from components.config.stack import settings_from_config
from components.config.zones import RegionSettings
from components.discovery import (
    DEPLOYED_STACK_INVOKES,
    CloudQuery,
    DeployedStack,
    DeployedSubnet,
    NodeTypeQuestion,
)
from offline import ask_recorded_cloud, run_offline, stack_config
from offline.mock_cloud import CloudMocks
from serve_app.errors import ConfigError

CLUSTER = "ray-llm-multinode"  # Pulumi.dev.yaml's clusterName
ROLE = "aws:iam/role:Role"
EKS = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
SUBNET = "aws:ec2/subnet:Subnet"
NAT = "aws:ec2/natGateway:NatGateway"

# Dev as the earlier releases deployed it: the GPU AZ (usw2-az2) first, so it took the VPC's first
# eighth; the NAT in it; the cluster with the role pulumi-eks made, at IAM's root path.
EARLIER_DEV = DeployedStack(
    cluster_name=CLUSTER,
    subnets=(DeployedSubnet("usw2-az2", "10.0.0.0/19", False), DeployedSubnet("usw2-az2", "10.0.224.0/22", True),
             DeployedSubnet("usw2-az1", "10.0.32.0/19", False), DeployedSubnet("usw2-az1", "10.0.228.0/22", True)),
    gpu_zone_ids=frozenset({"usw2-az2"}), nat_zone_ids=frozenset({"usw2-az2"}),
    cluster_role_arn=f"arn:aws:iam::123456789012:role/{CLUSTER}-eksRole-4b3c2a1")


def settings(deployed: DeployedStack | None = None, offerings: dict | None = None, **overrides: str):
    raw, _ = stack_config("dev")
    raw.update(overrides)

    def ask(query: CloudQuery):
        return ask_recorded_cloud(query, mocks=CloudMocks(query.region, deployed=deployed, offerings=offerings))

    return settings_from_config(raw, project=project_name(), stack="dev", ask_cloud=ask)


def cidrs_by_zone(s) -> dict[str, tuple[str, str]]:
    return {z.zone_id: (str(c.private), str(c.public)) for z, c in zip(s.zones.network_zones, s.zones.subnet_cidrs,
                                                                         strict=True)}


# ── What AWS reports ─────────────────────────────────────────────────────────────────────────

def test_the_deployed_stack_is_read_back_from_ec2_and_eks_answers():
    query = CloudQuery("us-west-2", RegionSettings.field("region"),
                       NodeTypeQuestion(RegionSettings.field("region"), "g6.8xlarge"),
                       NodeTypeQuestion(RegionSettings.field("region"), "m7i.xlarge"),
                       cluster=NodeTypeQuestion(RegionSettings.field("region"), CLUSTER))
    found = ask_recorded_cloud(query, mocks=CloudMocks("us-west-2", deployed=EARLIER_DEV)).deployed
    assert found is not None and found.earlier_iam_roles
    assert (set(found.subnets), found.gpu_zone_ids, found.nat_zone_ids, found.cluster_role_arn) == (
        set(EARLIER_DEV.subnets), EARLIER_DEV.gpu_zone_ids, EARLIER_DEV.nat_zone_ids, EARLIER_DEV.cluster_role_arn)
    # Another cluster's stack is not this one; nothing deployed is a new stack.
    other = CloudQuery(**{**query.__dict__, "cluster": NodeTypeQuestion(RegionSettings.field("region"), "other")})
    assert ask_recorded_cloud(other, mocks=CloudMocks("us-west-2", deployed=EARLIER_DEV)).deployed is None
    assert ask_recorded_cloud(query).deployed is None


def test_the_program_asks_aws_of_its_deployed_stack_only_what_the_listed_actions_allow():
    new, deployed = run_offline("dev"), run_offline("dev", deployed=EARLIER_DEV)
    listing = {"aws:ec2/getSubnets:getSubnets", "aws:eks/getClusters:getClusters"}
    # A new stack only lists: nothing of its own is there to describe.
    assert set(new.invokes) & set(DEPLOYED_STACK_INVOKES) == listing
    assert (set(deployed.invokes) - set(new.invokes)) | listing == set(DEPLOYED_STACK_INVOKES)


# ── Subnet CIDRs ─────────────────────────────────────────────────────────────────────────────

def test_a_new_stack_addresses_each_zone_by_its_zone_id_whatever_the_gpu_type():
    # g6e.8xlarge is offered in every AZ: a new stack's GPU AZ moves to usw2-az1, its subnets do not.
    before, after = settings(), settings(gpuNodeType="g6e.8xlarge")
    assert (before.zones.gpu_zone.zone_id, after.zones.gpu_zone.zone_id) == ("usw2-az2", "usw2-az1")
    assert cidrs_by_zone(before) == cidrs_by_zone(after) == {
        "usw2-az1": ("10.0.0.0/19", "10.0.224.0/22"), "usw2-az2": ("10.0.32.0/19", "10.0.228.0/22")}


def test_a_deployed_stack_keeps_its_cidrs_and_gpu_zone_when_the_gpu_type_changes():
    s = settings(EARLIER_DEV, gpuNodeType="g6e.8xlarge")
    assert s.zones.gpu_zone.zone_id == "usw2-az2"
    assert [z.zone_id for z in s.zones.nat_zones] == ["usw2-az2"]
    assert cidrs_by_zone(s) == {"usw2-az2": ("10.0.0.0/19", "10.0.224.0/22"),
                                "usw2-az1": ("10.0.32.0/19", "10.0.228.0/22")}


def test_a_new_zone_of_a_deployed_stack_never_takes_an_address_in_use():
    # Deployed in az2 and az3 at the first two slots; a third AZ (az1) would own the first slot.
    deployed = DeployedStack(
        cluster_name=CLUSTER, gpu_zone_ids=frozenset({"usw2-az2"}),
        subnets=(DeployedSubnet("usw2-az2", "10.0.0.0/19", False), DeployedSubnet("usw2-az2", "10.0.224.0/22", True),
                 DeployedSubnet("usw2-az3", "10.0.32.0/19", False), DeployedSubnet("usw2-az3", "10.0.228.0/22", True)))
    s = settings(deployed, azCount="3")
    cidrs = cidrs_by_zone(s)
    assert [z.zone_id for z in s.zones.network_zones] == ["usw2-az2", "usw2-az3", "usw2-az1"]
    assert (cidrs["usw2-az2"], cidrs["usw2-az3"]) == (("10.0.0.0/19", "10.0.224.0/22"),
                                                      ("10.0.32.0/19", "10.0.228.0/22"))
    networks = [ipaddress.IPv4Network(c) for pair in cidrs.values() for c in pair]
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1:])
    assert cidrs["usw2-az1"] == ("10.0.64.0/19", "10.0.232.0/22")


# ── The GPU zone ─────────────────────────────────────────────────────────────────────────────

def test_a_gpu_type_the_kept_zone_lacks_is_refused_in_one_line_naming_the_way_out():
    with pytest.raises(ConfigError) as caught:
        settings(EARLIER_DEV, offerings={"g6e.8xlarge": ("us-west-2a", "us-west-2c")}, gpuNodeType="g6e.8xlarge")
    said = str(caught.value)
    assert caught.value.setting == "gpuNodeType" and "\n" not in said
    assert said.startswith("gpuNodeType: got 'g6e.8xlarge'; allowed: a GPU type offered in us-west-2b (usw2-az2)")
    assert "gpuAvailabilityZone" in said and "us-west-2a (usw2-az1), us-west-2c (usw2-az3)" in said
    assert "replaces the GPU node groups" in said


def test_gpu_availability_zone_moves_the_gpu_nodes_and_the_nat_stays():
    s = settings(EARLIER_DEV, gpuNodeType="g5.8xlarge", gpuAvailabilityZone="us-west-2a")
    assert s.zones.gpu_zone.zone_id == "usw2-az1"
    assert [z.zone_id for z in s.zones.nat_zones] == ["usw2-az2"]
    assert cidrs_by_zone(s)["usw2-az2"] == ("10.0.0.0/19", "10.0.224.0/22")


def test_the_program_keeps_the_deployed_network_when_only_the_gpu_type_changes():
    base = run_offline("dev", deployed=EARLIER_DEV)
    changed = run_offline("dev", overrides={"gpuNodeType": "g6e.8xlarge"}, deployed=EARLIER_DEV)
    network = (SUBNET, NAT, "aws:ec2/vpc:Vpc", "aws:ec2/routeTable:RouteTable", EKS)
    assert sorted((r.name, r.type, str(r.inputs)) for r in base.resources if r.type in network) == sorted(
        (r.name, r.type, str(r.inputs)) for r in changed.resources if r.type in network)
    assert base.one(NAT).name == "network-nat-us-west-2b"
    assert {s.inputs["availabilityZone"]: s.inputs["cidrBlock"] for s in changed.all(SUBNET)
            if "kubernetes.io/role/internal-elb" in s.inputs["tags"]} == {"us-west-2b": "10.0.0.0/19",
                                                                          "us-west-2a": "10.0.32.0/19"}


# ── IAM roles ────────────────────────────────────────────────────────────────────────────────

def test_a_stack_deployed_with_the_earlier_roles_keeps_them_with_no_setting():
    run = run_offline("dev", deployed=EARLIER_DEV)
    assert "serviceRole" not in run.one(EKS).inputs  # pulumi-eks keeps the role it made
    assert [r.name for r in run.all(ROLE) if r.name.startswith("cluster-")] == ["cluster-node"]
    assert run.one(ROLE, "cluster-node").inputs.get("path") is None  # IAM's root path, as created


def test_a_new_stack_gets_both_roles_under_the_stacks_path():
    run = run_offline("dev")
    assert run.one(EKS).inputs["serviceRole"]
    assert {run.one(ROLE, name).inputs["path"] for name in ("cluster-eks", "cluster-node")} == {"/eks-pd-llm/"}
    # A stack the current layout deployed keeps it.
    current = DeployedStack(cluster_name=CLUSTER, cluster_role_arn=(
        "arn:aws:iam::123456789012:role/eks-pd-llm/cluster-eks-6fa1259"))
    assert run_offline("dev", deployed=current).one(EKS).inputs["serviceRole"]


def test_the_retired_role_setting_is_refused_in_one_line_saying_what_to_do():
    with pytest.raises(ConfigError) as caught:
        settings(keepEarlierIamRoles="true")
    said = str(caught.value)
    assert said.startswith("keepEarlierIamRoles: ") and "\n" not in said
    assert "delete it from the stack file" in said


class DescribeSubnetsDenied(CloudMocks):
    def call(self, args):
        if args.token == "aws:ec2/getSubnets:getSubnets":
            return {}, [("filters", "UnauthorizedOperation: You are not authorized to perform this operation.")]
        return super().call(args)


def test_a_caller_that_may_not_describe_the_stack_is_told_which_actions_in_one_line():
    raw, _ = stack_config("dev")
    with pytest.raises(ConfigError) as caught:
        settings_from_config(raw, project=project_name(), stack="dev", ask_cloud=lambda query: ask_recorded_cloud(
            query, mocks=DescribeSubnetsDenied(query.region)))
    said = str(caught.value)
    assert caught.value.setting == "clusterName" and "\n" not in said
    assert "ec2:DescribeSubnets" in said and "eks:DescribeNodegroup" in said and "UnauthorizedOperation" in said
