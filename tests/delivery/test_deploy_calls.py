"""The deploy role's calls (bootstrap/deploy_permissions/ `deploy_calls`), the one list the deploy
policy is made from and `pdctl preflight` simulates, evaluated offline as IAM would
(iam_evaluation.py: AWS's documented evaluation logic, standing in for the simulator):

- the new dev role allows every call; the role the previous bootstrap made (its policy kept in
  fixtures/deploy-policy-dev-f81eec3.json) is refused iam:GetRole on the EKS node-group
  service-linked role, which stopped a first `pulumi up` at the GPU node group;
- dev's role is refused prod's cluster, keys, log group, cache and tags, the state key, and GitHub's
  OIDC provider;
- every dependent action AWS's Service Authorization Reference lists for a call is granted, or
  declined with a reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from by_path import load_module
from iam_evaluation import SimulatingIam, decision

from pdctl import preflight as checks

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ACCOUNT = "111122223333"
REGION = "us-west-2"
DEV, PROD = "ray-llm-multinode", "ray-llm-prod"
PRINCIPAL = f"arn:aws:iam::{ACCOUNT}:role/github-deploy-dev"
NODEGROUP_SLR = (f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/eks-nodegroup.amazonaws.com/"
                 "AWSServiceRoleForAmazonEKSNodegroup")

permissions = load_module("bootstrap_deploy_permissions", REPO / "bootstrap" / "deploy_permissions")


def statements(cluster: str = DEV) -> list[dict]:
    return permissions.deploy_policy_statements(partition="aws", account_id=ACCOUNT, cluster_name=cluster)


def requests(cluster: str = DEV) -> list[checks.Simulation]:
    return checks.simulations(permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=cluster),
                              REGION)


def refused(policy: list[dict], simulations: list[checks.Simulation]) -> list[tuple[str, str]]:
    return [(action, s.resource or "*") for s in simulations for action in s.actions
            if decision(policy, action, s.resource or "*", {k: [v] for k, _, v in s.context}) != "allowed"]


def test_the_new_role_allows_every_call_and_the_previous_role_is_refused_iam_get_role():
    calls = requests()
    assert len(calls) > 30 and refused(statements(), calls) == []
    previous = json.loads((FIXTURES / "deploy-policy-dev-f81eec3.json").read_text())["Statement"]
    refused_before = refused(previous, calls)
    assert ("iam:GetRole", NODEGROUP_SLR) in refused_before
    assert ("iam:ListAttachedRolePolicies", NODEGROUP_SLR) in refused_before
    # What preflight prints for that role: one error line per refused call, iam:GetRole among them.
    iam = SimulatingIam(previous)
    lines = [f.line for f in checks.permission_findings(checks.Clients(iam, None, None, None), PRINCIPAL, calls)]
    assert (f"error: the deploy principal {PRINCIPAL} may not iam:GetRole on {NODEGROUP_SLR} (implicitDeny): "
            "run the bootstrap (bootstrap/) or grant it") in lines
    assert len(lines) == len(refused_before)
    new = SimulatingIam(statements())
    [line] = [f.line for f in checks.permission_findings(checks.Clients(new, None, None, None), PRINCIPAL, calls)]
    assert line.startswith(f"info: the deploy principal {PRINCIPAL} may make every call the stack needs")


def test_every_simulation_names_a_concrete_resource_and_concrete_values():
    """No wildcard goes to the simulator: a pattern is not a resource, nor the launch template EKS names."""
    calls = requests()
    assert all("*" not in (s.resource or "") for s in calls)
    assert all("*" not in value for s in calls for _, _, value in s.context)
    launch = [s for s in calls if s.actions == ("ec2:RunInstances",)]
    assert [c for s in launch for c in s.context] == [
        ("ec2:LaunchTemplate", "string", f"arn:aws:ec2:{REGION}:{ACCOUNT}:launch-template/preflight")]
    # Each policy the stack may attach (AWS's, the bootstrap's for its cluster) is its own request; each
    # EKS resource kind too.
    attaches = [s for s in calls if "iam:AttachRolePolicy" in s.actions]
    assert len(attaches) == len(permissions.ATTACHABLE_MANAGED_POLICIES) + len(permissions.WORKLOAD_POLICY_PURPOSES)
    eks = {s.resource.split(":")[5].split("/")[0] for s in calls if s.resource and ":eks:" in s.resource}
    assert eks == {"cluster", "nodegroup", "addon", "access-entry"}


def test_a_grant_narrower_than_the_calls_is_caught_on_the_resource_it_misses():
    """Each resource is simulated on its own: a policy without the add-on grant is refused there only."""
    addons = f"arn:aws:eks:*:{ACCOUNT}:addon/{DEV}/*/*"
    narrowed = [s for s in statements() if s["Resource"] != addons]
    assert len(narrowed) == len(statements()) - 1
    missing = refused(narrowed, requests())
    assert missing and {resource for _, resource in missing} == {
        f"arn:aws:eks:{REGION}:{ACCOUNT}:addon/{DEV}/preflight/preflight"}


@pytest.mark.parametrize(("action", "resource", "context"), [
    ("eks:DeleteCluster", f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{PROD}", {}),
    ("eks:CreateAccessEntry", f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{PROD}", {}),
    ("kms:ScheduleKeyDeletion", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/prod",
     {"aws:ResourceTag/eks-pd-llm/cluster": PROD}),
    ("kms:PutKeyPolicy", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/prod", {"aws:ResourceTag/eks-pd-llm/cluster": PROD}),
    ("kms:CreateGrant", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/prod",
     {"aws:ResourceTag/eks-pd-llm/cluster": PROD, "kms:GrantIsForAWSResource": "true"}),
    # The state key: its tag names no cluster; retagging it is refused too.
    ("kms:ScheduleKeyDeletion", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/state",
     {"aws:ResourceTag/eks-pd-llm/cluster": "eks-pd-llm bootstrap"}),
    ("kms:TagResource", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/state",
     {"aws:ResourceTag/eks-pd-llm/cluster": "eks-pd-llm bootstrap", "aws:RequestTag/eks-pd-llm/cluster": DEV}),
    ("kms:UpdateAlias", f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/eks-pd-llm-pulumi", {}),
    ("logs:DeleteLogGroup", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/eks/{PROD}/cluster", {}),
    ("elasticache:DeleteReplicationGroup", f"arn:aws:elasticache:{REGION}:{ACCOUNT}:replicationgroup:prod",
     {"aws:ResourceTag/eks-pd-llm/cluster": PROD}),
    ("ec2:DeleteTags", f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/sg-prod",
     {"aws:ResourceTag/eks-pd-llm/cluster": PROD, "aws:TagKeys": "Name"}),
    # Putting its own stack tag on what it did not create (to claim it) is refused.
    ("ec2:CreateTags", f"arn:aws:ec2:{REGION}:{ACCOUNT}:vpc/vpc-other", {"aws:TagKeys": "eks-pd-llm/cluster"}),
    # Both environments' roles share /eks-pd-llm/: prod's carry prod's stack tag.
    *((action, f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/prod-node-role",
       {"aws:ResourceTag/eks-pd-llm/cluster": PROD, "iam:PassedToService": "eks.amazonaws.com",
        "iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"})
      for action in ("iam:DeleteRole", "iam:DeleteRolePolicy", "iam:DetachRolePolicy", "iam:UntagRole",
                     "iam:PassRole")),
    # prod's workload policies (the bootstrap's, for prod's cluster) on a role of dev's own.
    *(("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/dev-model-access-role",
       {"aws:ResourceTag/eks-pd-llm/cluster": DEV,
        "iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary",
        "iam:PolicyARN": permissions.workload_policy_arn("aws", ACCOUNT, PROD, purpose)})
      for purpose in permissions.WORKLOAD_POLICY_PURPOSES),
    ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/x",
     {"aws:RequestTag/eks-pd-llm/cluster": PROD,
      "iam:PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"}),
    ("iam:DeleteOpenIDConnectProvider",
     f"arn:aws:iam::{ACCOUNT}:oidc-provider/token.actions.githubusercontent.com", {}),
    ("iam:CreateServiceLinkedRole", f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/eks.amazonaws.com/x", {}),
])
def test_devs_role_is_refused_what_is_prods_or_the_bootstraps(action, resource, context):
    assert decision(statements(DEV), action, resource, {k: [v] for k, v in context.items()}) == "implicitDeny"


def test_prods_own_resources_are_allowed_to_prods_role():
    """The other side of each refusal above: the same calls on its own resources pass."""
    prod = statements(PROD)
    assert decision(prod, "kms:ScheduleKeyDeletion", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/prod",
                    {"aws:ResourceTag/eks-pd-llm/cluster": [PROD]}) == "allowed"
    assert decision(prod, "logs:DeleteLogGroup",
                    f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/eks/{PROD}/cluster", {}) == "allowed"
    assert decision(prod, "eks:DeleteCluster", f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{PROD}", {}) == "allowed"
    for purpose in permissions.WORKLOAD_POLICY_PURPOSES:
        role = f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/prod-model-access-role"
        assert decision(prod, "iam:AttachRolePolicy", role, {
            "aws:ResourceTag/eks-pd-llm/cluster": [PROD],
            "iam:PermissionsBoundary": [f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"],
            "iam:PolicyARN": [permissions.workload_policy_arn("aws", ACCOUNT, PROD, purpose)]}) == "allowed"


def test_every_dependent_action_is_granted_or_declined_with_a_reason():
    reference = permissions.service_authorization()
    granted = {c.action for c in permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=DEV)}
    called = permissions.called_actions()
    dependents = {d for a in called for d in reference[a]["dependent_actions"]}
    assert dependents - set(permissions.DECLINED_DEPENDENT_ACTIONS) <= granted
    # Every declined one is a dependent of some call (the list cannot rot), with its reason.
    assert set(permissions.DECLINED_DEPENDENT_ACTIONS) <= dependents
    assert all(reason.strip() for reason in permissions.DECLINED_DEPENDENT_ACTIONS.values())
    # ElastiCache's network interfaces were missing before the reference was read.
    assert {"ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"} <= granted


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_deploy_role_creates_no_service_linked_role_and_the_bootstrap_does(bootstrap_run):
    granted = {c.action for c in permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=DEV)}
    assert "iam:CreateServiceLinkedRole" not in granted
    run = bootstrap_run()
    assert linked_roles_made(run) == set(permissions.SERVICE_LINKED_ROLES)
    [state_key] = [k for k in run.all("aws:kms/key:Key") if k.name == "pulumi-state"]
    assert state_key.inputs["tags"] == {permissions.STACK_TAG: permissions.BOOTSTRAP_TAG_VALUE}


# The three service-linked roles as IAM lists them (path /aws-service-role/<service>/, then the name).
EKS_ROLES = ("/aws-service-role/eks.amazonaws.com/AWSServiceRoleForAmazonEKS",
             "/aws-service-role/eks-nodegroup.amazonaws.com/AWSServiceRoleForAmazonEKSNodegroup",
             "/aws-service-role/elasticache.amazonaws.com/AWSServiceRoleForElastiCache")
# Roles every account has besides: a service-linked role of another service, and an ordinary role.
OTHER_ROLES = ("/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling", "/github-preview")


def linked_roles_made(run) -> set[str]:
    return {r.inputs["awsServiceName"] for r in run.all("aws:iam/serviceLinkedRole:ServiceLinkedRole")}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_bootstrap_creates_only_the_service_linked_roles_the_account_lacks_and_deletes_none(bootstrap_run):
    fresh = bootstrap_run(account_roles=OTHER_ROLES)
    assert linked_roles_made(fresh) == {"eks.amazonaws.com", "eks-nodegroup.amazonaws.com",
                                        "elasticache.amazonaws.com"}
    assert "aws:iam/getRoles:getRoles" in fresh.invokes
    # An account that ran EKS and ElastiCache before: creating any of them would fail the first up.
    ran_eks = bootstrap_run(account_roles=EKS_ROLES + OTHER_ROLES)
    assert linked_roles_made(ran_eks) == set()
    only_nodegroup_missing = bootstrap_run(account_roles=(EKS_ROLES[0], EKS_ROLES[2]))
    assert linked_roles_made(only_nodegroup_missing) == {"eks-nodegroup.amazonaws.com"}
    # The fresh account's next run finds the roles it made and no longer registers them; destroy drops
    # them too. Either deletes only what is retained: gone from state, kept in AWS.
    made = fresh.all("aws:iam/serviceLinkedRole:ServiceLinkedRole") + only_nodegroup_missing.all(
        "aws:iam/serviceLinkedRole:ServiceLinkedRole")
    assert made and all(role.retain_on_delete and not role.protect for role in made)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_service_linked_roles_set_explicitly_are_created_without_asking_iam(bootstrap_run):
    named = bootstrap_run(account_roles=EKS_ROLES, serviceLinkedRoles=json.dumps(["elasticache.amazonaws.com"]))
    assert linked_roles_made(named) == {"elasticache.amazonaws.com"}
    assert "aws:iam/getRoles:getRoles" not in named.invokes
    none = bootstrap_run(account_roles=RuntimeError("AccessDenied"), serviceLinkedRoles="[]")
    assert linked_roles_made(none) == set()
    with pytest.raises(Exception, match="serviceLinkedRoles"):
        bootstrap_run(serviceLinkedRoles=json.dumps(["autoscaling.amazonaws.com"]))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_role_listing_iam_refuses_stops_the_bootstrap_with_one_line_naming_the_setting(bootstrap_run):
    refusal = RuntimeError("operation error IAM: ListRoles, AccessDenied: not authorized to perform: "
                           "iam:ListRoles\nsecond line of the provider's error")
    with pytest.raises(Exception) as raised:
        bootstrap_run(account_roles=refusal)
    message = str(raised.value)
    assert message.startswith("set serviceLinkedRoles to the services whose role the account lacks")
    assert "iam:ListRoles" in message and "\n" not in message and "second line" not in message


@pytest.mark.parametrize("action", ["kms:EnableKeyRotation", "kms:DescribeKey", "kms:GetKeyPolicy",
                                    "kms:GetKeyRotationStatus", "kms:ListResourceTags", "kms:CreateAlias"])
def test_what_the_provider_calls_right_after_create_key_needs_no_tag_kms_may_not_see_yet(action):
    """KMS may take up to five minutes to authorize by a new key's tags: the provider's EnableKeyRotation
    and reads right after CreateKey (and the alias made next) must pass on a key whose tags it does not
    see yet; what changes or deletes a key still needs the environment's own tag."""
    new_key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-new"
    assert decision(statements(DEV), action, new_key, {}) == "allowed"
    for changing in ("kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:DisableKeyRotation"):
        assert decision(statements(DEV), changing, new_key, {}) == "implicitDeny"


# What each environment's stack tags with its cluster (bootstrap/deploy_permissions/resources.py
# STACK_TAGGED_TYPES): per resource kind, calls that change one. Each must be allowed on what carries
# the role's own cluster and refused on what carries the other's or no stack tag at all.
EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
CACHE = f"arn:aws:elasticache:{REGION}:{ACCOUNT}"
TAG = "aws:ResourceTag/eks-pd-llm/cluster"
CHANGES_BY_KIND = {
    "vpc": [("ec2:DeleteVpc", f"{EC2}:vpc/vpc-1", {}), ("ec2:ModifyVpcAttribute", f"{EC2}:vpc/vpc-1", {}),
            ("ec2:AttachInternetGateway", f"{EC2}:vpc/vpc-1", {})],
    "subnet": [("ec2:DeleteSubnet", f"{EC2}:subnet/subnet-1", {}),
               ("ec2:ModifySubnetAttribute", f"{EC2}:subnet/subnet-1", {}),
               ("ec2:AssociateRouteTable", f"{EC2}:subnet/subnet-1", {})],
    "security group": [("ec2:DeleteSecurityGroup", f"{EC2}:security-group/sg-1", {}),
                       ("ec2:AuthorizeSecurityGroupIngress", f"{EC2}:security-group/sg-1", {}),
                       ("ec2:RevokeSecurityGroupIngress", f"{EC2}:security-group/sg-1", {}),
                       ("ec2:RevokeSecurityGroupEgress", f"{EC2}:security-group/sg-1", {})],
    "security group rule": [("ec2:ModifySecurityGroupRules", f"{EC2}:security-group-rule/sgr-1", {})],
    "route table": [("ec2:CreateRoute", f"{EC2}:route-table/rtb-1", {}),
                    ("ec2:ReplaceRoute", f"{EC2}:route-table/rtb-1", {}),
                    ("ec2:DeleteRouteTable", f"{EC2}:route-table/rtb-1", {}),
                    ("ec2:ReplaceRouteTableAssociation", f"{EC2}:route-table/rtb-1", {})],
    "NAT gateway": [("ec2:DeleteNatGateway", f"{EC2}:natgateway/nat-1", {})],
    "Elastic IP": [("ec2:ReleaseAddress", f"{EC2}:elastic-ip/eipalloc-1", {}),
                   ("ec2:DisassociateAddress", f"{EC2}:elastic-ip/eipalloc-1", {})],
    "internet gateway": [("ec2:DetachInternetGateway", f"{EC2}:internet-gateway/igw-1", {}),
                         ("ec2:DeleteInternetGateway", f"{EC2}:internet-gateway/igw-1", {})],
    "VPC endpoint": [("ec2:ModifyVpcEndpoint", f"{EC2}:vpc-endpoint/vpce-1", {}),
                     ("ec2:DeleteVpcEndpoints", f"{EC2}:vpc-endpoint/vpce-1", {})],
    "launch template": [("ec2:CreateLaunchTemplateVersion", f"{EC2}:launch-template/lt-1", {}),
                        ("ec2:ModifyLaunchTemplate", f"{EC2}:launch-template/lt-1", {}),
                        ("ec2:DeleteLaunchTemplate", f"{EC2}:launch-template/lt-1", {})],
    "placement group": [("ec2:DeletePlacementGroup", f"{EC2}:placement-group/pg-1", {})],
    # A tag other than the stack's (the stack tag itself is refused everywhere: test below).
    "EC2 tags": [(action, f"{EC2}:{kind}", {"aws:TagKeys": "Name"}) for action in ("ec2:CreateTags", "ec2:DeleteTags")
                 for kind in ("vpc/vpc-1", "subnet/subnet-1", "launch-template/lt-1")],
    "KMS key": [(action, f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k-1", {}) for action in (
        "kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:DisableKeyRotation", "kms:UpdateKeyDescription",
        "kms:UntagResource")],
    "replication group": [(action, f"{CACHE}:replicationgroup:gcs-1", {}) for action in (
        "elasticache:ModifyReplicationGroup", "elasticache:DeleteReplicationGroup")]
        + [(action, f"{CACHE}:replicationgroup:gcs-1", {"aws:TagKeys": "Name"}) for action in (
            "elasticache:AddTagsToResource", "elasticache:RemoveTagsFromResource")],
    "cache subnet group": [(action, f"{CACHE}:subnetgroup:gcs-1", {}) for action in (
        "elasticache:ModifyCacheSubnetGroup", "elasticache:DeleteCacheSubnetGroup",
        "elasticache:CreateReplicationGroup")],
}
CHANGES = [pytest.param(action, resource, context, id=f"{kind}-{action}-{resource.rsplit(':', 1)[1]}")
           for kind, changes in CHANGES_BY_KIND.items() for action, resource, context in changes]


@pytest.mark.parametrize(("action", "resource", "context"), CHANGES)
def test_a_change_is_allowed_on_the_roles_own_resource_and_refused_on_the_others_or_an_untagged_one(
        action, resource, context):
    values = {k: [v] for k, v in context.items()}
    assert decision(statements(DEV), action, resource, {**values, TAG: [DEV]}) == "allowed"
    assert decision(statements(DEV), action, resource, {**values, TAG: [PROD]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, values) == "implicitDeny"
    # And prod's role the other way round.
    assert decision(statements(PROD), action, resource, {**values, TAG: [PROD]}) == "allowed"
    assert decision(statements(PROD), action, resource, {**values, TAG: [DEV]}) == "implicitDeny"


def test_every_kind_the_stack_tags_is_covered_above():
    kinds = {resource.split(":", 5)[5].split("/")[0].split(":")[0]
             for changes in CHANGES_BY_KIND.values() for _, resource, _ in changes}
    tagged = {*permissions.STACK_TAGGED_TYPES["ec2"], *permissions.STACK_TAGGED_TYPES["elasticache"]}
    # A replication group's member clusters are made, changed and deleted with it.
    assert tagged - {"cluster"} <= kinds


CREATE_TAG = "aws:RequestTag/eks-pd-llm/cluster"


@pytest.mark.parametrize(("action", "resource"), [
    ("ec2:CreateVpc", f"{EC2}:vpc/vpc-new"), ("ec2:CreateSubnet", f"{EC2}:subnet/subnet-new"),
    ("ec2:CreateSecurityGroup", f"{EC2}:security-group/sg-new"),
    ("ec2:AuthorizeSecurityGroupIngress", f"{EC2}:security-group-rule/sgr-new"),
    ("ec2:CreateRouteTable", f"{EC2}:route-table/rtb-new"), ("ec2:CreateNatGateway", f"{EC2}:natgateway/nat-new"),
    ("ec2:AllocateAddress", f"{EC2}:elastic-ip/eipalloc-new"),
    ("ec2:CreateInternetGateway", f"{EC2}:internet-gateway/igw-new"),
    ("ec2:CreateVpcEndpoint", f"{EC2}:vpc-endpoint/vpce-new"),
    ("ec2:CreateLaunchTemplate", f"{EC2}:launch-template/lt-new"),
    ("ec2:CreatePlacementGroup", f"{EC2}:placement-group/pg-new"),
    ("elasticache:CreateReplicationGroup", f"{CACHE}:replicationgroup:gcs-new"),
    ("elasticache:CreateCacheSubnetGroup", f"{CACHE}:subnetgroup:gcs-new"),
    ("kms:CreateKey", "*"),
])
def test_a_create_is_allowed_only_when_it_tags_what_it_makes_with_the_roles_own_cluster(action, resource):
    assert decision(statements(DEV), action, resource, {CREATE_TAG: [DEV]}) == "allowed"
    assert decision(statements(DEV), action, resource, {CREATE_TAG: [PROD]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, {}) == "implicitDeny"


@pytest.mark.parametrize(("action", "resource"), [
    ("ec2:CreateSubnet", f"{EC2}:vpc/vpc-1"), ("ec2:CreateSecurityGroup", f"{EC2}:vpc/vpc-1"),
    ("ec2:CreateNatGateway", f"{EC2}:subnet/subnet-1"), ("ec2:CreateNatGateway", f"{EC2}:elastic-ip/eipalloc-1"),
    ("ec2:CreateVpcEndpoint", f"{EC2}:route-table/rtb-1"),
    ("ec2:AuthorizeSecurityGroupIngress", f"{EC2}:security-group/sg-1"),
    ("ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-1"),
    ("elasticache:CreateReplicationGroup", f"{CACHE}:subnetgroup:gcs-1"),
])
def test_a_create_inside_what_exists_needs_that_to_be_the_roles_own(action, resource):
    """A new subnet in prod's VPC, a NAT gateway on prod's address, a rule in prod's group: refused."""
    own = {CREATE_TAG: [DEV], TAG: [DEV]}
    assert decision(statements(DEV), action, resource, own) == "allowed"
    assert decision(statements(DEV), action, resource, {**own, TAG: [PROD]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, {CREATE_TAG: [DEV]}) == "implicitDeny"


def test_no_ec2_resource_can_be_claimed_by_giving_it_the_stack_tag():
    """The stack tag goes on an EC2 resource only in the request that creates it (ec2:CreateAction): never
    onto one that exists untagged or the other's, never removed, never changed on the role's own."""
    for existing in ({}, {TAG: [PROD]}, {TAG: [DEV]}):
        assert decision(statements(DEV), "ec2:DeleteTags", f"{EC2}:vpc/vpc-1", {
            **existing, "aws:TagKeys": ["eks-pd-llm/cluster"]}) == "implicitDeny"
    for existing in ({}, {TAG: [PROD]}):
        assert decision(statements(DEV), "ec2:CreateTags", f"{EC2}:vpc/vpc-1", {
            **existing, "aws:TagKeys": ["eks-pd-llm/cluster"], CREATE_TAG: [DEV]}) == "implicitDeny"
    # Its own value set again on its own resource (the first up after an administrator tagged it, with
    # the tag not yet in the stack's state) passes; another value does not.
    own_vpc = {TAG: [DEV], "aws:TagKeys": ["eks-pd-llm/cluster"]}
    assert decision(statements(DEV), "ec2:CreateTags", f"{EC2}:vpc/vpc-1", {**own_vpc, CREATE_TAG: [DEV]}) == "allowed"
    assert decision(statements(DEV), "ec2:CreateTags", f"{EC2}:vpc/vpc-1", {**own_vpc, CREATE_TAG: [PROD]}) == (
        "implicitDeny")
    on_create = {"ec2:CreateAction": ["CreateVpc"], "aws:TagKeys": ["eks-pd-llm/cluster", "Name"]}
    new_vpc = f"{EC2}:vpc/vpc-new"
    assert decision(statements(DEV), "ec2:CreateTags", new_vpc, {**on_create, CREATE_TAG: [DEV]}) == "allowed"
    assert decision(statements(DEV), "ec2:CreateTags", new_vpc, {**on_create, CREATE_TAG: [PROD]}) == "implicitDeny"


@pytest.mark.parametrize(("action", "resource"), [
    ("kms:TagResource", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k-1"),
    ("elasticache:AddTagsToResource", f"{CACHE}:replicationgroup:gcs-1"),
])
def test_tagging_at_a_create_sets_only_the_stack_tag_with_the_roles_own_cluster(action, resource):
    """KMS's CreateKey and ElastiCache's creates with tags also check the tagging action on what they make,
    which carries no tag yet. IAM cannot tell that from an existing resource without one, so the grant is
    as narrow as AWS allows: the stack tag alone, with the role's own cluster, on what carries none; what
    carries the other's (or the bootstrap's) is never retagged (docs/SOURCES.md#tag-on-create-claims)."""
    stack_tag_only = {"aws:TagKeys": ["eks-pd-llm/cluster"], CREATE_TAG: [DEV]}
    assert decision(statements(DEV), action, resource, stack_tag_only) == "allowed"
    assert decision(statements(DEV), action, resource, {**stack_tag_only, CREATE_TAG: [PROD]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, {**stack_tag_only, TAG: [PROD]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, {
        "aws:TagKeys": ["eks-pd-llm/cluster", "Name"], CREATE_TAG: [DEV]}) == "implicitDeny"
    assert decision(statements(DEV), action, resource, {"aws:TagKeys": ["Name"]}) == "implicitDeny"


def test_the_default_parameter_group_is_the_only_untagged_elasticache_resource_a_role_may_name():
    default = f"{CACHE}:parametergroup:default.redis7"
    for action in ("elasticache:CreateReplicationGroup", "elasticache:ModifyReplicationGroup"):
        assert decision(statements(DEV), action, default, {}) == "allowed"
        assert decision(statements(DEV), action, f"{CACHE}:parametergroup:prod-params", {}) == "implicitDeny"


def test_every_tag_condition_is_on_a_resource_type_whose_reference_row_lists_that_key():
    """A tag condition on a type whose row in the Service Authorization Reference lacks the key would never
    hold there: the call would be refused in AWS, though allowed here."""
    reference = permissions.service_authorization()
    for call in permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name=DEV):
        keys = {key.split("/")[0] for operator in call.condition.values() for key in operator
                if key.startswith(("aws:ResourceTag/", "aws:RequestTag/"))}
        if not keys or call.resource == "*":
            continue
        rows = {_arn_type(fmt): row_keys for fmt, row_keys in reference[call.action]["resource_condition_keys"].items()}
        assert keys <= {k.split("/")[0] for k in rows[_arn_type(call.resource)]}, call


def _arn_type(arn: str) -> str:
    return re.split(r"[/:]", arn.split(":", 5)[5], maxsplit=1)[0]


def test_preflight_simulates_each_change_on_its_resource_type_tagged_with_the_stacks_own_cluster():
    """What `pdctl preflight` asks the simulator for the calls above: the action on a resource of that type
    (EC2's tag calls take none: "*") carrying the environment's own cluster tag, which prod's role refuses."""
    simulated = {(action, _arn_type(s.resource) if s.resource else "*", {k: v for k, _, v in s.context}.get(TAG))
                 for s in requests() for action in s.actions}
    for kind, changes in CHANGES_BY_KIND.items():
        for action, resource, _ in changes:
            assert (action, "*" if kind == "EC2 tags" else _arn_type(resource), DEV) in simulated, (action, resource)
    assert refused(statements(PROD), [s for s in requests() if any(k == TAG for k, _, _ in s.context)])
