"""The deploy role's least privilege (bootstrap/deploy_permissions/) against what the stack really
registers and calls: the dev and prod programs run offline, every AWS resource type (pulumi-eks's
remote components expanded) and every provider function must be covered, and nothing is granted
for a type no stack registers. The IAM statements must keep the deploy role from making an
administrator: roles only under the path, only with the boundary, only the stack's managed policies
(AWS's, and the workload policies the bootstrap makes for its cluster), no policy written by the deploy
role; the boundary caps such a role at what those policies grant."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml
from by_path import load_module
from iam_evaluation import decision, decision_within_boundary

from components import compile_cache
from components.cluster import CLUSTER_ROLE_POLICIES, IAM_ROLE_PATH, NODE_POLICIES, workload_policy_arn
from components.config.names import STACK_TAG
from components.discovery import DEPLOYED_STACK_INVOKES, DeployedStack, DeployedSubnet
from components.storage import EBS_CSI_POLICY
from facts.aws import OFFLINE_ACCOUNT_ID
from offline import run_offline
from serve_app.config import s3_location

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ACCOUNT = "111122223333"
ROLE_TYPE = "aws:iam/role:Role"
ATTACHMENT_TYPE = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
INLINE_POLICY_TYPE = "aws:iam/rolePolicy:RolePolicy"
# IAM's limit for a managed policy document, whitespace not counted.
MANAGED_POLICY_MAX_CHARS = 6144
# IAM's default quota of managed policies attached to one role (IAM and STS quotas page).
MANAGED_POLICIES_PER_ROLE = 10
AWS_DOCS = "https://docs.aws.amazon.com/"
# The thread where EKS's caller check of the node-group service-linked role was reported and explained.
TERRAFORM_EKS_THREAD = "https://github.com/terraform-aws-modules/terraform-aws-eks/issues/823"
DEV_CLUSTER = "ray-llm-multinode"  # Pulumi.dev.yaml clusterName
PROD_CLUSTER = "ray-llm-prod"
# Actions that write a policy or a trust policy, lift a boundary or make users: with any of them the
# deploy role could give a role it creates (or itself) more than the stack's policies grant. An inline
# policy on a stack role is one: as the cluster's creator the deploy role can run pods under the stack's
# IRSA service accounts, so what it wrote there would reach everything the boundary allows.
POLICY_WRITES = {
    "iam:PutRolePolicy", "iam:UpdateAssumeRolePolicy",
    "iam:CreatePolicy", "iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion",
    "iam:DeletePolicyVersion", "iam:DeleteRolePermissionsBoundary", "iam:PutUserPolicy", "iam:AttachUserPolicy",
    "iam:CreateUser", "iam:CreateAccessKey", "iam:PutGroupPolicy", "iam:AttachGroupPolicy",
    "iam:CreateLoginProfile",
}


permissions = load_module("bootstrap_deploy_permissions", REPO / "bootstrap" / "deploy_permissions")


# Settings neither stack file turns on that add AWS resources: an S3 model mirror (its reader role,
# components/model_access.py) and a GPU node group that may grow (the Cluster Autoscaler's role,
# components/node_autoscaler.py), each given the bootstrap's policy of its cluster.
MIRROR_BUCKET = "acme-models"
OPTIONS = {"modelSource": f"s3://{MIRROR_BUCKET}/mirror/Qwen/Qwen3.5-9B", "rayImageCarriesRunaiStreamer": "true",
           "gpuNodeMaxCount": "4", "decodeMaxReplicas": "3",
           "iamPermissionsBoundaryArn": f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"}


# Dev as this release deploys it, for the update's questions (what of the stack is deployed).
DEPLOYED_DEV = DeployedStack(
    cluster_name="ray-llm-multinode",
    subnets=(DeployedSubnet("usw2-az1", "10.0.0.0/19", False), DeployedSubnet("usw2-az1", "10.0.224.0/22", True),
             DeployedSubnet("usw2-az2", "10.0.32.0/19", False), DeployedSubnet("usw2-az2", "10.0.228.0/22", True)),
    gpu_zone_ids=frozenset({"usw2-az2"}), nat_zone_ids=frozenset({"usw2-az2"}),
    cluster_role_arn=f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/ray-llm-multinode-cluster")


@pytest.fixture(scope="module")
def stacks(offline_run):
    # The run with OPTIONS last: the tests of its roles read stacks[-1].
    return [offline_run("dev"), offline_run("prod"), run_offline("dev", deployed=DEPLOYED_DEV),
            run_offline("dev", overrides=OPTIONS)]


def registered_types(run) -> set[str]:
    return {r.type for r in run.resources}


def uncovered(types: set[str], invokes: set[str]) -> set[str]:
    """What a run needs that the deploy policy does not grant."""
    known = set(permissions.RESOURCE_ACTIONS) | set(permissions.IAM_ROLE_TYPES)
    return ((permissions.aws_resource_types(types) - known)
            | (permissions.invokes_behind(types, invokes) - set(permissions.INVOKE_ACTIONS)))


def test_every_aws_type_and_function_the_stacks_use_is_granted(stacks):
    for run in stacks:
        assert uncovered(registered_types(run), set(run.invokes)) == set(), run.stack


def test_a_type_the_policy_does_not_cover_is_caught():
    assert uncovered({"aws:s3/bucket:Bucket", "eks:index:Cluster"}, {"aws:rds/getEngineVersion:getEngineVersion"}) == {
        "aws:s3/bucket:Bucket", "aws:rds/getEngineVersion:getEngineVersion"}


def test_nothing_is_granted_for_a_type_or_function_no_stack_uses(stacks):
    types = set().union(*(permissions.aws_resource_types(registered_types(r)) for r in stacks))
    invokes = set().union(*(permissions.invokes_behind(registered_types(r), r.invokes) for r in stacks))
    assert set(permissions.RESOURCE_ACTIONS) | set(permissions.IAM_ROLE_TYPES) == types
    assert set(permissions.INVOKE_ACTIONS) == invokes


def test_the_deploy_role_grants_exactly_what_reading_the_deployed_stack_asks():
    # bootstrap/ is its own Pulumi project and keeps its own copy: the two lists may not drift apart.
    assert {name: permissions.INVOKE_ACTIONS[name] for name in DEPLOYED_STACK_INVOKES} == DEPLOYED_STACK_INVOKES


def test_the_deploy_role_may_attach_exactly_the_managed_policies_the_stack_attaches(stacks):
    attached = {a.inputs["policyArn"] for run in stacks for a in run.all(ATTACHMENT_TYPE)}
    aws_managed = {arn.split(":policy/", 1)[1] for arn in attached if arn.startswith("arn:aws:iam::aws:policy/")}
    assert aws_managed == set(permissions.ATTACHABLE_MANAGED_POLICIES) == {
        *CLUSTER_ROLE_POLICIES, *NODE_POLICIES, EBS_CSI_POLICY}
    # The rest are the bootstrap's workload policies of each stack's own cluster, by the ARN it gives them.
    for run in stacks:
        own = {permissions.workload_policy_arn("aws", OFFLINE_ACCOUNT_ID, run.program["settings"].cluster.name, purpose)
               for purpose in permissions.WORKLOAD_POLICY_PURPOSES}
        customer = {a.inputs["policyArn"] for a in run.all(ATTACHMENT_TYPE)} - {
            f"arn:aws:iam::aws:policy/{name}" for name in aws_managed}
        assert customer and customer <= own, run.stack


def test_no_stack_writes_an_inline_role_policy(stacks):
    """An inline policy would need iam:PutRolePolicy, which the deploy role must not have: the stack's
    workloads get the bootstrap's managed policies instead."""
    assert [(run.stack, p.name) for run in stacks for p in run.all(INLINE_POLICY_TYPE)] == []


def test_the_deploy_role_writes_no_policy_and_no_trust_policy():
    """The calls the deploy policy is made from: a policy or trust-policy write coming back is an escalation."""
    for cluster in (DEV_CLUSTER, PROD_CLUSTER):
        actions = {c.action for c in permissions.deploy_calls(partition="aws", account_id=ACCOUNT,
                                                              cluster_name=cluster)}
        assert actions & POLICY_WRITES == set()
        assert "iam:AttachRolePolicy" in actions  # what it does instead


def test_every_role_the_stack_creates_is_under_the_path_the_deploy_role_may_manage(stacks):
    assert permissions.ROLE_PATH == IAM_ROLE_PATH
    assert all(r.inputs["path"] == IAM_ROLE_PATH for run in stacks for r in run.all(ROLE_TYPE))
    # With a boundary set, every role carries it (the deploy role can create no other).
    roles = stacks[-1].all(ROLE_TYPE)
    assert {r.name for r in roles} >= {"model-access-role", "cluster-autoscaler-role", "front-door-controller-role"}
    assert {r.inputs["permissionsBoundary"] for r in roles} == {OPTIONS["iamPermissionsBoundaryArn"]}
    # Each carries its cluster's stack tag: the other environment's deploy role may not change it.
    assert all(r.inputs["tags"] == {"eks-pd-llm/cluster": run.program["settings"].cluster.name}
               for run in stacks for r in run.all(ROLE_TYPE))
    # bootstrap/ is its own Pulumi project and keeps its own copy of the key: the two may not drift apart.
    assert permissions.STACK_TAG == STACK_TAG


def test_the_boundary_lets_the_model_reader_read_only_the_named_mirror_buckets():
    mirror = permissions.model_mirror(OPTIONS["modelSource"])
    assert (mirror.bucket, mirror.prefix) == (MIRROR_BUCKET, "mirror/Qwen/Qwen3.5-9B")
    granted = permissions.workload_policies(partition="aws", cluster_name=DEV_CLUSTER, mirror=mirror)[
        permissions.MODEL_READER]
    boundary = permissions.workload_boundary_policy(partition="aws", model_mirror_buckets=[MIRROR_BUCKET])
    allowed = {(a, r) for s in boundary["Statement"] if s["Action"] in ("s3:GetObject", "s3:ListBucket")
               for a in actions_of(s) for r in s["Resource"]}
    assert allowed == {("s3:GetObject", f"arn:aws:s3:::{MIRROR_BUCKET}/*"),
                       ("s3:ListBucket", f"arn:aws:s3:::{MIRROR_BUCKET}")}
    # Every statement of the inline policy falls inside the boundary's.
    for statement in granted["Statement"]:
        [match] = [s for s in boundary["Statement"] if s["Action"] == statement["Action"]]
        bucket_arn = statement["Resource"].split("/", 1)[0]
        assert any(statement["Resource"].startswith(r.rstrip("*")) or r == bucket_arn for r in match["Resource"])
    # No bucket named, no S3 at all; a malformed name is refused.
    assert not [s for s in permissions.workload_boundary_policy(partition="aws")["Statement"]
                if any(a.startswith("s3:") for a in actions_of(s))]
    with pytest.raises(ValueError, match="modelMirrorBuckets"):
        permissions.workload_boundary_policy(partition="aws", model_mirror_buckets=["Not_A_Bucket"])


# What IAM authorizes each S3 call of the compile-cache sidecar as (components/compile_cache.py
# SIDECAR_SCRIPT; docs/SOURCES.md#compile-cache-s3-calls): put_object is one PutObject request.
SIDECAR_S3_ACTIONS = {"get_object": "s3:GetObject", "list_objects_v2": "s3:ListBucket", "put_object": "s3:PutObject"}


def sidecar_s3_calls() -> set[str]:
    """The methods the sidecar's program calls on its S3 client."""
    return {node.func.attr for node in ast.walk(ast.parse(compile_cache.SIDECAR_SCRIPT))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "s3"}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_compile_cache_sidecar_restores_and_uploads_within_the_boundary(bootstrap_run):
    """With compileCacheInS3 the GPU pods' role holds the compile cache's policy under the workload boundary:
    each call of the sidecar must be allowed by both, and the boundary lets no other object be written."""
    source = OPTIONS["modelSource"]
    run = bootstrap_run(deployModelSources=json.dumps([f"prod={source}"]),
                        modelMirrorBuckets=json.dumps([MIRROR_BUCKET]))
    documents = {p.name: json.loads(p.inputs["policy"]) for p in run.all("aws:iam/policy:Policy")}
    granted, boundary = documents["prod-compile-cache"]["Statement"], documents["workload-boundary"]["Statement"]
    assert sidecar_s3_calls() == set(SIDECAR_S3_ACTIONS)  # a new call needs its action here
    bucket, mirror_prefix = s3_location(source)
    cache_prefix = compile_cache.cache_uri(bucket, mirror_prefix).removeprefix(f"s3://{bucket}/")
    archive = f"arn:aws:s3:::{bucket}/{cache_prefix}/{'0' * 20}.tar"  # the sidecar's `{prefix}/{key}.tar`
    requests = {"s3:GetObject": (archive, {}), "s3:PutObject": (archive, {}),
                "s3:ListBucket": (f"arn:aws:s3:::{bucket}", {"s3:prefix": [f"{cache_prefix}/"]})}
    refused = [method for method, action in SIDECAR_S3_ACTIONS.items()
               if decision_within_boundary(granted, boundary, action, *requests[action]) != "allowed"]
    assert refused == []
    # No wider than the compile cache's policy: the model's objects, another mirror's caches, another bucket.
    for elsewhere in (f"{bucket}/{mirror_prefix}/model.safetensors", f"{bucket}/{compile_cache.S3_PREFIX}/other/x.tar",
                      f"other-models/{cache_prefix}/x.tar"):
        assert decision(boundary, "s3:PutObject", f"arn:aws:s3:::{elsewhere}", {}) == "implicitDeny", elsewhere


@pytest.fixture(scope="module")
def policy() -> dict:
    """Every statement the deploy role gets, whichever of its managed policies holds it."""
    return {"Statement": permissions.deploy_policy_statements(partition="aws", account_id=ACCOUNT,
                                                              cluster_name=DEV_CLUSTER)}


def actions_of(statement: dict) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def statements(policy: dict, action: str) -> list[dict]:
    return [s for s in policy["Statement"] if action in actions_of(s)]


def test_the_deploy_policy_grants_no_policy_writing_and_no_wildcard_action(policy):
    actions = {a for s in policy["Statement"] if s["Effect"] == "Allow" for a in actions_of(s)}
    assert not actions & POLICY_WRITES
    assert not [a for a in actions if "*" in a]
    assert [s["Sid"] for s in policy["Statement"] if s["Effect"] != "Allow"] == ["NeverAssumeTheStacksRoles"]


def test_the_deploy_role_cannot_make_itself_a_stack_role(policy, stacks):
    """A policy written on a stack role plus a trust policy naming the deploy role (UpdateAssumeRolePolicy, or
    a CreateRole that trusts it) would hand the deploy role everything the boundary allows: it writes no
    policy, may not change a trust policy, and may not assume a role under the path whatever its trust says."""
    role = f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/front-door-controller-role-1a2b3c4"
    boundary = {"iam:PermissionsBoundary": [permissions.boundary_arn("aws", ACCOUNT)]}
    assert decision(policy["Statement"], "iam:PutRolePolicy", role, boundary) == "implicitDeny"
    assert decision(policy["Statement"], "iam:UpdateAssumeRolePolicy", role, boundary) == "implicitDeny"
    for action in ("sts:AssumeRole", "sts:TagSession", "sts:SetSourceIdentity"):
        assert decision(policy["Statement"], action, role, {}) == "explicitDeny"
    # A role whose trust can change (an IRSA role, when the cluster's OIDC issuer does) is replaced, not
    # updated; the others trust an AWS service, which never changes.
    roles = [r for run in stacks for r in run.all(ROLE_TYPE)]
    irsa = [r for r in roles if "AssumeRoleWithWebIdentity" in r.inputs["assumeRolePolicy"]]
    assert irsa and all("assumeRolePolicy" in r.replace_on_changes for r in irsa)
    assert all('"Service"' in r.inputs["assumeRolePolicy"] for r in roles if r not in irsa)


def test_roles_are_created_and_given_policies_only_with_the_boundary(policy):
    boundary = f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/eks-pd-llm-workload-boundary"
    assert permissions.boundary_arn("aws", ACCOUNT) == boundary
    for action in ("iam:CreateRole", "iam:PutRolePermissionsBoundary", "iam:AttachRolePolicy", "iam:DetachRolePolicy",
                   "iam:DeleteRolePolicy"):
        [statement] = statements(policy, action)
        assert statement["Resource"] == f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/*"
        assert statement["Condition"]["ArnEquals"]["iam:PermissionsBoundary"] == boundary
    [attach] = statements(policy, "iam:AttachRolePolicy")
    # AWS's managed policies the stack attaches, and the bootstrap's workload policies of dev's cluster only.
    assert attach["Condition"]["ArnEquals"]["iam:PolicyARN"] == [
        f"arn:aws:iam::aws:policy/{name}" for name in permissions.ATTACHABLE_MANAGED_POLICIES] + [
        f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/{DEV_CLUSTER}-{purpose}"
        for purpose in ("load-balancer-controller", "cluster-autoscaler", "model-reader", "compile-cache")]
    assert not [arn for arn in attach["Condition"]["ArnEquals"]["iam:PolicyARN"] if PROD_CLUSTER in arn]
    [pass_role] = statements(policy, "iam:PassRole")
    assert pass_role["Resource"] == f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/*"
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": ["eks.amazonaws.com"]},
                                      "StringEqualsIfExists": {"aws:ResourceTag/eks-pd-llm/cluster": DEV_CLUSTER}}
    # No IAM action anywhere: the stack's roles, the node-group service-linked role, EKS's OIDC issuers.
    assert not [a for s in policy["Statement"] if s["Resource"] == "*" for a in actions_of(s) if a.startswith("iam:")]
    [oidc] = statements(policy, "iam:DeleteOpenIDConnectProvider")
    assert oidc["Resource"] == f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.*.amazonaws.com/id/*"


def test_the_deploy_policies_each_fit_iams_limit_and_together_hold_every_statement(policy):
    documents = permissions.deploy_policies(partition="aws", account_id=ACCOUNT, environment="dev",
                                            cluster_name=DEV_CLUSTER)
    # Named in order; within IAM's default quota of 10 managed policies attached to one role.
    assert list(documents) == ["eks-pd-llm-deploy-dev", *(f"eks-pd-llm-deploy-dev-{i}"
                                                         for i in range(2, len(documents) + 1))]
    assert 1 < len(documents) <= MANAGED_POLICIES_PER_ROLE
    assert all(len(json.dumps(d, separators=(",", ":"))) <= MANAGED_POLICY_MAX_CHARS for d in documents.values())
    assert [s for d in documents.values() for s in d["Statement"]] == policy["Statement"]
    # A GovCloud partition makes every ARN longer: still split, never over the limit.
    gov = permissions.deploy_policies(partition="aws-us-gov", account_id=ACCOUNT, environment="dev",
                                      cluster_name=DEV_CLUSTER)
    assert all(len(json.dumps(d, separators=(",", ":"))) <= MANAGED_POLICY_MAX_CHARS for d in gov.values())


def test_statements_that_outgrow_one_document_go_to_the_next_in_order():
    statements = [{"Sid": f"S{i}", "Effect": "Allow", "Action": "ec2:DescribeVpcs", "Resource": "*"}
                  for i in range(5)]
    documents = permissions.pack_policies(statements, max_chars=200)
    assert len(documents) > 1
    assert [s["Sid"] for d in documents for s in d["Statement"]] == [f"S{i}" for i in range(5)]
    assert all(len(json.dumps(d, separators=(",", ":"))) <= 200 for d in documents)
    with pytest.raises(ValueError, match="S0"):
        permissions.pack_policies(statements, max_chars=60)


def test_every_caller_checked_action_is_granted_for_the_stacks_that_need_it(stacks, policy):
    """What AWS checks against the deploy role while EKS or ElastiCache works for it: no provider call
    shows it, so each is listed with the AWS page that says so, and granted only for that use."""
    types = set().union(*(permissions.aws_resource_types(registered_types(r)) for r in stacks))
    checks = permissions.caller_checks_for(types)
    assert checks == permissions.CALLER_CHECKS  # every check belongs to a type the stacks register
    granted = {a for s in policy["Statement"] for a in actions_of(s)}
    for check in checks:
        assert check.source.startswith((AWS_DOCS, TERRAFORM_EKS_THREAD)), check.actions
        assert set(check.actions) <= granted, check.actions
    [run_instances] = statements(policy, "ec2:RunInstances")
    assert run_instances["Condition"] == {
        "ArnLike": {"ec2:LaunchTemplate": f"arn:aws:ec2:*:{ACCOUNT}:launch-template/*"}}
    [grant] = statements(policy, "kms:CreateGrant")
    assert grant["Resource"] == f"arn:aws:kms:*:{ACCOUNT}:key/*"
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"},
                                  "StringEquals": {"aws:ResourceTag/eks-pd-llm/cluster": DEV_CLUSTER}}
    # The node-group service-linked role is read, never created: the bootstrap makes it.
    slr = permissions.service_linked_role_arn("aws", ACCOUNT, "eks-nodegroup.amazonaws.com")
    assert {a for s in policy["Statement"] if s["Resource"] == slr for a in actions_of(s)} == {
        "iam:GetRole", "iam:ListAttachedRolePolicies"}
    assert statements(policy, "iam:CreateServiceLinkedRole") == []
    # Tags only on create (each create call named), or off the stack's tag key where not another's.
    tag_grants = statements(policy, "ec2:CreateTags")
    assert all(s["Resource"] == "*" and s.get("Condition") for s in tag_grants)
    [on_create] = [s for s in tag_grants
                   if isinstance(s["Condition"].get("StringEquals", {}).get("ec2:CreateAction"), list)]
    assert {"CreateVpc", "CreateSubnet", "CreateSecurityGroup"} <= set(on_create["Condition"]["StringEquals"][
        "ec2:CreateAction"])


def test_an_environments_deploy_role_may_change_its_own_cluster_only(policy):
    """dev's deploy job has no reviewer: its role must not reach prod's cluster, node groups, add-ons
    or access entries (EKS access entries are where cluster-admin comes from)."""
    eks = {a for s in policy["Statement"] for a in actions_of(s) if a.startswith("eks:")}
    anywhere = {a for s in policy["Statement"] if s["Resource"] == "*" for a in actions_of(s) if a.startswith("eks:")}
    # These take no resource: the cluster does not exist yet, the versions are EKS's, the list is the
    # account's (an update asks it whether the stack's cluster exists: only names, no cluster's details).
    assert anywhere == {"eks:CreateCluster", "eks:DescribeAddonVersions", "eks:ListClusters"}
    base = f"arn:aws:eks:*:{ACCOUNT}:"
    scoped = {s["Resource"] for s in policy["Statement"] if set(actions_of(s)) & (eks - anywhere)}
    assert scoped == {f"{base}cluster/{DEV_CLUSTER}", f"{base}nodegroup/{DEV_CLUSTER}/*/*",
                      f"{base}addon/{DEV_CLUSTER}/*/*", f"{base}access-entry/{DEV_CLUSTER}/*/*/*/*"}
    assert {"eks:DeleteCluster", "eks:UpdateClusterConfig", "eks:CreateAccessEntry", "eks:AssociateAccessPolicy",
            "eks:UpdateNodegroupConfig"} <= eks - anywhere
    with pytest.raises(ValueError, match="deployClusters"):
        permissions.deploy_calls(partition="aws", account_id=ACCOUNT, cluster_name="prod/*")


def test_a_stack_without_node_groups_needs_no_launch_permission():
    checked = {a for c in permissions.caller_checks_for({"aws:eks/cluster:Cluster"}) for a in c.actions}
    assert "ec2:RunInstances" not in checked and "iam:GetRole" not in checked
    assert {"iam:PassRole", "kms:CreateGrant"} <= checked


def allowed_by(boundary: dict, action: str, resource: str = "*", context: dict | None = None) -> bool:
    return decision(boundary["Statement"], action, resource, context or {}) == "allowed"


def test_the_boundary_allows_what_the_stacks_role_policies_grant_less_what_it_refuses():
    recorded = json.loads((FIXTURES / "aws-managed-policies.json").read_text())["policies"]
    assert set(recorded) == set(permissions.ATTACHABLE_MANAGED_POLICIES)
    granted = {a for doc in recorded.values() for s in doc["Statement"] for a in actions_of(s)}
    workload = permissions.workload_policies(partition="aws", cluster_name=DEV_CLUSTER)
    controller = {a for s in workload[permissions.LOAD_BALANCER_CONTROLLER]["Statement"] for a in actions_of(s)}
    autoscaler = {a for s in workload[permissions.CLUSTER_AUTOSCALER]["Statement"] for a in actions_of(s)}
    boundary = permissions.workload_boundary_policy(partition="aws")
    expected = granted - set(permissions.REFUSED_BY_BOUNDARY) | autoscaler | controller
    listed = {a for s in boundary["Statement"] for a in actions_of(s)}
    # Each action named once, or by a wildcard of Elastic Load Balancing's Describe reads.
    assert listed - expected == set(permissions.BOUNDARY_WILDCARDS) == {"elasticloadbalancing:Describe*"}
    assert not [a for a in expected - listed if not a.startswith("elasticloadbalancing:Describe")]
    assert set(permissions.REFUSED_BY_BOUNDARY) <= granted
    assert not [a for a in permissions.REFUSED_BY_BOUNDARY if allowed_by(boundary, a)]
    assert not allowed_by(boundary, "elasticloadbalancing:DeleteLoadBalancerPolicy")  # in no policy
    [slr] = [s for s in boundary["Statement"] if s["Action"] == "iam:CreateServiceLinkedRole"]
    assert slr["Condition"] == {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}


def test_the_boundary_allows_every_call_of_the_load_balancer_controllers_policy():
    """Without it a stack with iamPermissionsBoundaryArn gets no NLB: the controller's calls are denied."""
    published = json.loads(permissions.LOAD_BALANCER_CONTROLLER_POLICY_FILE.read_text())
    assert permissions.workload_policies(partition="aws", cluster_name=DEV_CLUSTER)[
        permissions.LOAD_BALANCER_CONTROLLER] == published
    assert set(permissions.LOAD_BALANCER_CONTROLLER_ACTIONS) == {
        a for s in published["Statement"] for a in actions_of(s)} - {"iam:CreateServiceLinkedRole"}
    boundary = permissions.workload_boundary_policy(partition="aws")
    service_linked_role = (f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/elasticloadbalancing.amazonaws.com/"
                           "AWSServiceRoleForElasticLoadBalancing")
    calls = [(a, service_linked_role if a == "iam:CreateServiceLinkedRole" else resource)
             for s in published["Statement"] if s["Effect"] == "Allow" for a in actions_of(s)
             for resource in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])]
    denied = [(a, r) for a, r in calls
              if not allowed_by(boundary, a, r, {"iam:AWSServiceName": ["elasticloadbalancing.amazonaws.com"]})]
    assert denied == []


def test_the_boundary_fits_iams_limit_on_a_managed_policy():
    mirrors = [permissions.model_mirror(f"s3://{bucket}/mirror/Qwen/Qwen3.5-9B")
               for bucket in ("acme-models", "acme-models-mirror-us-west-2")]
    boundary = permissions.workload_boundary_policy(
        partition="aws", model_mirror_buckets=[m.bucket for m in mirrors],
        compile_cache_archives=[permissions.compile_cache_archives("aws", m) for m in mirrors])
    assert len(json.dumps(boundary, separators=(",", ":"))) <= MANAGED_POLICY_MAX_CHARS
    # More mirrors than fit: refused before IAM would refuse the bootstrap's update.
    with pytest.raises(ValueError, match=r"^modelMirrorBuckets, deployModelSources: .* name fewer$"):
        permissions.workload_boundary_policy(partition="aws",
                                             model_mirror_buckets=[f"acme-models-{n}" for n in range(30)])


def test_the_boundary_covers_the_cluster_autoscalers_policy_and_resizes_only_managed_node_groups():
    statements_ = permissions.workload_policies(partition="aws", cluster_name=DEV_CLUSTER)[
        permissions.CLUSTER_AUTOSCALER]["Statement"]
    writes = set(permissions.CLUSTER_AUTOSCALER_WRITE_ACTIONS)
    assert {a for s in statements_ for a in actions_of(s)} == {*permissions.CLUSTER_AUTOSCALER_READ_ACTIONS, *writes}
    boundary = permissions.workload_boundary_policy(partition="aws")
    [resize] = [s for s in boundary["Statement"] if "autoscaling:SetDesiredCapacity" in actions_of(s)]
    assert set(actions_of(resize)) == writes
    assert resize["Condition"] == {"Null": {"aws:ResourceTag/eks:nodegroup-name": "false"}}
    # Its own policy is narrower still: its cluster's GPU groups, which the stack names <cluster>-gpu-….
    [own] = [s for s in statements_ if "autoscaling:SetDesiredCapacity" in actions_of(s)]
    assert own["Condition"] == {"StringEquals": {"aws:ResourceTag/eks:cluster-name": DEV_CLUSTER},
                                "StringLike": {"aws:ResourceTag/eks:nodegroup-name": f"{DEV_CLUSTER}-gpu-*"}}
    gpu_group = {"aws:ResourceTag/eks:cluster-name": [DEV_CLUSTER],
                 "aws:ResourceTag/eks:nodegroup-name": [f"{DEV_CLUSTER}-gpu-1a2b3c4d"]}
    assert decision(statements_, "autoscaling:SetDesiredCapacity", "*", gpu_group) == "allowed"
    for other in ({**gpu_group, "aws:ResourceTag/eks:nodegroup-name": ["system-nodes-1a2b3c4"]},
                  {**gpu_group, "aws:ResourceTag/eks:cluster-name": [PROD_CLUSTER]}):
        assert decision(statements_, "autoscaling:SetDesiredCapacity", "*", other) == "implicitDeny"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_bootstrap_gives_the_deploy_role_the_derived_policy_and_the_boundary(bootstrap_run):
    run = bootstrap_run()
    policies = {p.name: p for p in run.all("aws:iam/policy:Policy")}
    clusters = {"dev": DEV_CLUSTER, "prod": "ray-llm-prod"}
    expected = {env: permissions.deploy_policies(partition="aws", account_id=ACCOUNT, environment=env,
                                                 cluster_name=cluster) for env, cluster in clusters.items()}
    deploy = {p.inputs["name"]: json.loads(p.inputs["policy"]) for p in policies.values()
              if p.name.startswith("deploy-")}
    assert deploy == expected["dev"] | expected["prod"]
    assert json.loads(policies["workload-boundary"].inputs["policy"]) == permissions.workload_boundary_policy(
        partition="aws")
    mirrored = bootstrap_run(modelMirrorBuckets=json.dumps([MIRROR_BUCKET]))
    [boundary] = [p for p in mirrored.all("aws:iam/policy:Policy") if p.name == "workload-boundary"]
    assert json.loads(boundary.inputs["policy"]) == permissions.workload_boundary_policy(
        partition="aws", model_mirror_buckets=[MIRROR_BUCKET])
    assert policies["workload-boundary"].inputs["name"] == permissions.BOUNDARY_POLICY_NAME
    assert policies["workload-boundary"].inputs["path"] == permissions.ROLE_PATH
    for env in clusters:
        attached = {a.inputs["policyArn"] for a in run.all(ATTACHMENT_TYPE)
                    if a.inputs["role"] == f"github-deploy-{env}"}
        assert attached == {f"arn:aws:iam::{ACCOUNT}:policy/eks-pd-llm/{name}" for name in expected[env]}
    # The ARN the deploy policy's conditions name is the one the bootstrap creates.
    assert run.outputs["workloadPermissionsBoundaryArn"] == permissions.boundary_arn("aws", ACCOUNT)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_bootstrap_makes_each_environments_workload_policies_where_its_stack_attaches_them(bootstrap_run):
    """Under the names and path the stack derives their ARNs from, and the deploy role may attach: the model
    reader's only for an environment whose S3 mirror the bootstrap is told (deployModelSources)."""
    source = OPTIONS["modelSource"]
    run = bootstrap_run(deployModelSources=json.dumps([f"prod={source}"]))
    made = {p.name: p for p in run.all("aws:iam/policy:Policy") if not p.name.startswith(("deploy-", "workload-"))}
    clusters = {"dev": DEV_CLUSTER, "prod": PROD_CLUSTER}
    mirrors = {"dev": None, "prod": permissions.model_mirror(source)}
    expected = {f"{env}-{purpose}": (cluster, purpose, document) for env, cluster in clusters.items()
                for purpose, document in permissions.workload_policies(
                    partition="aws", cluster_name=cluster, mirror=mirrors[env]).items()}
    assert set(made) == set(expected) == {
        *(f"{env}-{purpose}" for env in clusters for purpose in ("load-balancer-controller", "cluster-autoscaler")),
        "prod-model-reader", "prod-compile-cache"}
    for name, (cluster, purpose, document) in expected.items():
        policy = made[name]
        assert json.loads(policy.inputs["policy"]) == document
        assert len(policy.inputs["policy"]) <= MANAGED_POLICY_MAX_CHARS
        arn = f"arn:aws:iam::{ACCOUNT}:policy{policy.inputs['path']}{policy.inputs['name']}"
        assert arn == permissions.workload_policy_arn("aws", ACCOUNT, cluster, purpose) == workload_policy_arn(
            f"arn:aws:iam::{ACCOUNT}:role/eks-pd-llm/x", cluster, purpose)
    # Made without a value only `pulumi up` of the stack knows; the stack's mirror parsed as the stack does.
    assert (mirrors["prod"].bucket, mirrors["prod"].prefix) == s3_location(source)
    with pytest.raises(Exception, match="deployModelSources"):
        bootstrap_run(deployModelSources=json.dumps(["staging=" + source]))
    with pytest.raises(Exception, match="deployModelSources"):
        bootstrap_run(deployModelSources=json.dumps(["prod=s3://acme-models"]))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_administrator_access_only_when_asked_for(bootstrap_run):
    run = bootstrap_run(deployWithAdministratorAccess="true")
    attached = {a.inputs["role"]: a.inputs["policyArn"] for a in run.all(ATTACHMENT_TYPE)}
    admin = "arn:aws:iam::aws:policy/AdministratorAccess"
    assert attached["github-deploy-dev"] == attached["github-deploy-prod"] == admin
    assert attached["github-preview"] == "arn:aws:iam::aws:policy/ReadOnlyAccess"
    # The stack's workload policies stay: the stack attaches them whoever deploys it.
    assert {p.name for p in run.all("aws:iam/policy:Policy") if p.name.startswith(("deploy-", "workload-"))} == {
        "workload-boundary"}


def test_the_bootstraps_cluster_names_are_the_stacks():
    """A deploy role scoped to a cluster name its stack does not use could not create that stack's cluster."""
    bootstrap = yaml.safe_load((REPO / "bootstrap" / "Pulumi.yaml").read_text())
    defaults = dict(e.split("=", 1) for e in bootstrap["config"]["deployClusters"]["default"])
    for env, cluster in defaults.items():
        stack = yaml.safe_load((REPO / f"Pulumi.{env}.yaml").read_text())["config"]
        assert stack["eks-pd-llm:clusterName"] == cluster


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_cluster_list_that_misses_an_environment_is_refused(bootstrap_run):
    with pytest.raises(Exception, match="deployClusters"):
        bootstrap_run(deployClusters=json.dumps(["dev=ray-llm-multinode"]))
    # Two environments on one cluster would share its workload policies' names.
    with pytest.raises(Exception, match="a cluster of its own each"):
        bootstrap_run(deployClusters=json.dumps(["dev=ray-llm-multinode", "prod=ray-llm-multinode"]))
