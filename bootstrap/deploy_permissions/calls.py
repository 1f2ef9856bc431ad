"""`deploy_calls`: every request `pulumi up`/`destroy` makes AWS authorize against the deploy role,
each an action on a resource under the condition AWS puts in that request."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .naming import ATTACHABLE_MANAGED_POLICIES, PASS_ROLE_TO, ROLE_PATH, STACK_TAG, boundary_arn, iam_arn
from .reference import (
    dependent_actions,
    fill_arn,
    reference_arns,
    resource_condition_keys,
    resource_type,
    service_authorization,
)
from .resources import (
    CREATED_TYPES,
    INVOKE_ACTIONS,
    RESOURCE_ACTIONS,
    STACK_TAGGED_TYPES,
    UNTAGGED_RESOURCES,
    resource_actions,
)
from .workload_policies import WORKLOAD_POLICY_PURPOSES, workload_policy_arn


@dataclass(frozen=True)
class Call:
    """One request AWS authorizes against the deploy role while `pulumi up`/`destroy` runs: an action on
    one resource ("*" where the action takes none; `*` in an ARN stands for ids AWS chooses), under the
    condition the grant carries, which holds the values AWS puts in that request. The deploy policy is
    these calls grouped; `pdctl preflight` simulates each of them, `*` made concrete."""

    action: str
    resource: str = "*"
    condition: dict = field(default_factory=dict)

    def key(self) -> str:
        return json.dumps([self.resource, self.condition], sort_keys=True)




def _iam_calls(partition: str, account_id: str, cluster_name: str) -> list[Call]:
    role = iam_arn(partition, account_id, f"role{ROLE_PATH}*")
    bounded = {"ArnEquals": {"iam:PermissionsBoundary": boundary_arn(partition, account_id)}}
    # The AWS managed policies the stack attaches, and its environment's workload policies, which the
    # bootstrap wrote (workload_policies.py): the deploy role writes no policy, so attaching is all it can do
    # (iam:PolicyARN, docs/SOURCES.md#iam-workload-policies).
    attachable = [f"arn:{partition}:iam::aws:policy/{name}" for name in ATTACHABLE_MANAGED_POLICIES] + [
        workload_policy_arn(partition, account_id, cluster_name, purpose) for purpose in WORKLOAD_POLICY_PURPOSES]
    # Both environments' roles share the path: each role carries its cluster's stack tag, so one
    # environment changes none of the other's (untagged: a role made before the roles were tagged,
    # which its own stack's next update tags).
    own_if_tagged = {"StringEqualsIfExists": {f"aws:ResourceTag/{STACK_TAG}": cluster_name}}
    return [
        Call("iam:CreateRole", role, {**bounded, **_sets_own(cluster_name)}),
        # No iam:PutRolePolicy: as the cluster's creator the deploy role can run pods under the stack's
        # IRSA service accounts, so an inline policy it wrote on their roles would reach all the boundary
        # allows. DeleteRolePolicy only takes away: the first update of a stack made by an earlier release
        # deletes the inline policies its roles had.
        *(Call(a, role, {**bounded, **own_if_tagged}) for a in (
            "iam:PutRolePermissionsBoundary", "iam:DeleteRolePolicy")),
        *(Call(a, role, {"ArnEquals": {**bounded["ArnEquals"], "iam:PolicyARN": attachable}, **own_if_tagged})
          for a in ("iam:AttachRolePolicy", "iam:DetachRolePolicy")),
        # No iam:UpdateAssumeRolePolicy: a role could be made to trust the deploy role; a stack role whose
        # trust changes is replaced instead (components/cluster.py bounded_role).
        *(Call(a, role, own_if_tagged) for a in (
            "iam:DeleteRole", "iam:UpdateRole", "iam:UpdateRoleDescription", "iam:UntagRole")),
        Call("iam:TagRole", role, {**_sets_own(cluster_name), **own_if_tagged}),
        *(Call(a, role) for a in (
            "iam:GetRole", "iam:ListRolePolicies", "iam:GetRolePolicy", "iam:ListAttachedRolePolicies",
            "iam:ListInstanceProfilesForRole")),
    ]


@dataclass(frozen=True)
class CallerCheck:
    """An action AWS checks against the deploy role itself while a service works for it: the provider
    never calls it, so the per-resource actions above cannot show it, and only AWS's page says so
    (docs/SOURCES.md#deploy-role-caller-checks).

    actions: what the deploy role must be allowed.
    needed_by: the resource types whose create makes AWS check it (one of them in a stack means it is needed).
    resource: the ARN pattern granted (`{partition}`, `{account}`, `{cluster}` filled in), "*" where the
        action takes none.
    condition: narrows the grant to the use AWS checks; {} for none.
    source: the page that says the caller needs it.
    """

    actions: tuple[str, ...]
    needed_by: tuple[str, ...]
    resource: str
    condition: dict
    source: str

    def calls(self, partition: str, account_id: str, cluster_name: str) -> list[Call]:
        fill = json.dumps([self.resource, self.condition]).replace("{partition}", partition).replace(
            "{account}", account_id).replace("{cluster}", cluster_name)
        resource, condition = json.loads(fill)
        return [Call(action, resource, condition) for action in self.actions]


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
_NODEGROUP_SLR = "arn:{partition}:iam::{account}:role/aws-service-role/eks-nodegroup.amazonaws.com/" \
    "AWSServiceRoleForAmazonEKSNodegroup"
CALLER_CHECKS = (
    # CreateNodegroup with a launch template: EKS asks EC2 whether the caller may launch from it
    # ("You are not authorized to launch instances with this launch template" otherwise). Only from
    # a launch template of this account: the condition key is set on every resource RunInstances
    # touches when a template is used.
    CallerCheck(
        ("ec2:RunInstances",), (NODE_GROUP,), "*",
        {"ArnLike": {"ec2:LaunchTemplate": "arn:{partition}:ec2:*:{account}:launch-template/*"}},
        "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-launch-template-permissions.html"),
    # The launch templates tag the instances and volumes they start (tag specifications): tagging on
    # create is authorized as ec2:CreateTags with ec2:CreateAction = RunInstances.
    CallerCheck(
        ("ec2:CreateTags",), (NODE_GROUP,), "*", {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html"),
    # CreateCluster takes the cluster role, CreateNodegroup the node role: each is passed to EKS.
    CallerCheck(
        ("iam:PassRole",), (EKS_CLUSTER, NODE_GROUP), f"arn:{{partition}}:iam::{{account}}:role{ROLE_PATH}*",
        {"StringEquals": {"iam:PassedToService": list(PASS_ROLE_TO)},
         "StringEqualsIfExists": {f"aws:ResourceTag/{STACK_TAG}": "{cluster}"}},
        "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html"),
    # CreateNodegroup checks, with the caller's credentials, that the node-group service-linked role
    # exists and what it has attached ("Failed to validate if SLR … already exists due to missing
    # permissions for 'iam:GetRole'"); AWS's own CreateNodegroup policy grants both. The bootstrap
    # creates the service-linked roles, so the deploy role creates none.
    CallerCheck(
        ("iam:GetRole", "iam:ListAttachedRolePolicies"), (NODE_GROUP,), _NODEGROUP_SLR, {},
        "https://github.com/terraform-aws-modules/terraform-aws-eks/issues/823"),
    # Secrets encryption with a customer key: EKS creates a grant on it as the cluster's creator; the
    # key is the environment's own (tagged with its cluster before the cluster is made).
    CallerCheck(
        ("kms:CreateGrant",), (EKS_CLUSTER,), "arn:{partition}:kms:*:{account}:key/*",
        {"Bool": {"kms:GrantIsForAWSResource": "true"}, "StringEquals": {f"aws:ResourceTag/{STACK_TAG}": "{cluster}"}},
        "https://docs.aws.amazon.com/eks/latest/userguide/enable-kms.html"),
)


def caller_checks_for(aws_types: Iterable[str]) -> tuple[CallerCheck, ...]:
    """The caller checks the resource types `aws_types` make AWS run."""
    types = set(aws_types)
    return tuple(check for check in CALLER_CHECKS if types & set(check.needed_by))


def called_actions() -> set[str]:
    """Every action the deploy calls or AWS checks for it, before the dependent actions."""
    return (resource_actions(RESOURCE_ACTIONS) | {a for calls in INVOKE_ACTIONS.values() for a in calls}
            | {a for check in CALLER_CHECKS for a in check.actions}
            | {c.action for c in _iam_calls("aws", "111122223333", "cluster")})



# EKS actions that take no resource ARN (CreateCluster's cluster does not exist yet: the Service
# Authorization Reference lists no resource type for it). Every other EKS action is granted on the
# ARN formats the reference lists for it, with the environment's cluster name filled in, so one
# environment's deploy role cannot touch another's cluster.
EKS_ACCOUNT_WIDE_ACTIONS = ("eks:CreateCluster", "eks:DescribeAddonVersions", "eks:ListClusters")
# The kinds of EKS resource the stack makes (the reference lists tagging on every kind EKS has).
EKS_RESOURCE_KINDS = ("cluster/", "nodegroup/", "addon/", "access-entry/")
# EKS cluster names (EKS API reference, CreateCluster `name`).
_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")
# KMS actions on the stack's keys; CreateKey and ListAliases take no key.
_KMS_ACCOUNT_WIDE = ("kms:CreateKey", "kms:ListAliases")
_KMS_ALIAS_ACTIONS = ("kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias")
# What the provider calls on a key right after CreateKey (terraform-provider-aws kms/key.go: rotation on,
# then its reads until they agree), when KMS may not yet authorize by the key's tags: up to five minutes
# (docs/SOURCES.md#kms-abac-delay). Reads and turning rotation on, so on any key of the account; what
# changes or deletes a key stays on the environment's own.
_KMS_RIGHT_AFTER_CREATE = ("kms:DescribeKey", "kms:EnableKeyRotation", "kms:GetKeyPolicy",
                           "kms:GetKeyRotationStatus", "kms:ListResourceTags")


# The reference's access levels of the calls that change what they name (reads stay on every resource).
_CHANGING = ("Write", "Tagging", "Permissions management")


def _ec2_tag_on_create_actions() -> list[str]:
    """The EC2 calls that create and tag in one request (tag specifications), as ec2:CreateAction names
    them (no service prefix)."""
    return sorted(a.split(":", 1)[1] for a in CREATED_TYPES if a.startswith("ec2:"))


def _carries_own(cluster_name: str) -> dict:
    """The condition of a change of what exists: it carries the environment's cluster's stack tag."""
    return {"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": cluster_name}}


def _sets_own(cluster_name: str) -> dict:
    """The condition of a create: the request tags what it makes with the environment's cluster."""
    return {"StringEquals": {f"aws:RequestTag/{STACK_TAG}": cluster_name}}


def _keeps_own(cluster_name: str) -> dict:
    """The condition of the stack tag set again: the resource carries the environment's value and the request
    sets that same value (the provider does so when its state lacks a tag the resource carries)."""
    return {"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": cluster_name, f"aws:RequestTag/{STACK_TAG}": cluster_name}}


def _by_resource_type(action: str, fill: dict[str, str], cluster_name: str) -> list[Call]:
    """`action` on each resource type the reference lists for it that the deploy names: what the stack tags
    with its condition (set by the request for the types the call makes, carried for the others), what
    AWS makes on its ARN alone (UNTAGGED_RESOURCES), no other type. Each resource of a request must be
    allowed (IAM authorizes them one by one), so the condition holds on each type the call touches."""
    service = action.split(":", 1)[0]
    calls = []
    for arn_format in resource_condition_keys(action):
        kind = resource_type(arn_format)
        if kind in STACK_TAGGED_TYPES[service]:
            created = kind in CREATED_TYPES.get(action, ())
            calls.append(Call(action, fill_arn(arn_format, fill),
                              _sets_own(cluster_name) if created else _carries_own(cluster_name)))
        elif kind in UNTAGGED_RESOURCES[service]:
            calls.append(Call(action, fill_arn(arn_format, {**fill, **UNTAGGED_RESOURCES[service][kind]})))
    if not calls:
        raise ValueError(f"{action}: no resource type of the stack's among {list(resource_condition_keys(action))}")
    return calls


def _scoped_calls(action: str, partition: str, account_id: str, cluster_name: str) -> list[Call]:
    """`action` as the deploy makes it, on the environment's own resources where IAM can tell them apart."""
    fill = {"Partition": partition, "Account": account_id, "ClusterName": cluster_name}
    service = action.split(":", 1)[0]
    if service == "eks" and action not in EKS_ACCOUNT_WIDE_ACTIONS:
        return [Call(action, arn) for arn in reference_arns(action, fill)
                if arn.split(":", 5)[5].startswith(EKS_RESOURCE_KINDS)]
    if service == "kms" and action not in _KMS_ACCOUNT_WIDE:
        return _kms_calls(action, partition, account_id, cluster_name)
    if action == "kms:CreateKey":
        return [Call(action, "*", _sets_own(cluster_name))]
    if service == "logs" and action != "logs:DescribeLogGroups":
        # EKS's control-plane log group: /aws/eks/<cluster>/cluster.
        return [Call(action, f"arn:{partition}:logs:*:{account_id}:log-group:/aws/eks/{cluster_name}/*")]
    if "OpenIDConnectProvider" in action:
        # EKS clusters' issuers only: never the GitHub provider the bootstrap made.
        return [Call(action, iam_arn(partition, account_id, "oidc-provider/oidc.eks.*.amazonaws.com/id/*"))]
    # On what carries the environment's own value: changes of tags other than the stack's, and the stack
    # tag set again to that value.
    other_tags = {**_carries_own(cluster_name), "ForAllValues:StringNotEquals": {"aws:TagKeys": [STACK_TAG]}}
    same_stack_tag = _keeps_own(cluster_name)
    if action == "ec2:CreateTags":
        # Tags on what a create call makes, with the environment's own value (each create call named).
        on_create = {"StringEquals": {"ec2:CreateAction": _ec2_tag_on_create_actions(),
                                      f"aws:RequestTag/{STACK_TAG}": cluster_name}}
        return [Call(action, "*", condition) for condition in (on_create, other_tags, same_stack_tag)]
    if action == "ec2:DeleteTags":
        return [Call(action, "*", other_tags)]
    if action == "elasticache:AddTagsToResource":
        return [call for condition in (_stack_tag_at_create(cluster_name), other_tags, same_stack_tag)
                for call in _on_stack_types(action, fill, condition)]
    if action == "elasticache:RemoveTagsFromResource":
        return _on_stack_types(action, fill, other_tags)
    if service in STACK_TAGGED_TYPES and service_authorization()[action]["access_level"] in _CHANGING:
        return _by_resource_type(action, fill, cluster_name)
    return [Call(action)]


def _on_stack_types(action: str, fill: dict[str, str], condition: dict) -> list[Call]:
    """`action` under `condition` on the ARN formats of the types the stack tags."""
    service = action.split(":", 1)[0]
    return [Call(action, fill_arn(arn_format, fill), condition) for arn_format in resource_condition_keys(action)
            if resource_type(arn_format) in STACK_TAGGED_TYPES[service]]


def _stack_tag_at_create(cluster_name: str) -> dict:
    """Tagging with the stack tag at a create (KMS's CreateKey, ElastiCache's creates with Tags check the
    tagging action too): the request sets the stack tag alone, with the environment's cluster, on what
    carries none. IAM cannot tell that from tagging an existing resource that carries none (no condition key
    says a create is under way: docs/SOURCES.md#tag-on-create-claims)."""
    return {"StringEquals": {f"aws:RequestTag/{STACK_TAG}": cluster_name},
            "ForAllValues:StringEquals": {"aws:TagKeys": [STACK_TAG]},
            "Null": {f"aws:ResourceTag/{STACK_TAG}": "true"}}


def _kms_calls(action: str, partition: str, account_id: str, cluster_name: str) -> list[Call]:
    keys = f"arn:{partition}:kms:*:{account_id}:key/*"
    if action in _KMS_ALIAS_ACTIONS:
        # The stack's alias is alias/<cluster>-eks-secrets: its own aliases only. The key side carries no
        # tag condition, since the alias is made right after the key (_KMS_RIGHT_AFTER_CREATE).
        return [Call(action, f"arn:{partition}:kms:*:{account_id}:alias/{cluster_name}-*"), Call(action, keys)]
    if action in _KMS_RIGHT_AFTER_CREATE:
        return [Call(action, keys)]
    if action == "kms:TagResource":
        # CreateKey with tags needs TagResource on every key (docs/SOURCES.md#kms-tag-on-create); on a key
        # that carries the stack tag, only one with its own value (never the state key or the other's).
        return [Call(action, keys, _stack_tag_at_create(cluster_name)), Call(action, keys, _keeps_own(cluster_name))]
    return [Call(action, keys, _carries_own(cluster_name))]


def deploy_calls(*, partition: str, account_id: str, cluster_name: str) -> list[Call]:
    """Every request `pulumi up`/`destroy` of one environment's stack makes AWS authorize against the
    deploy role: each resource type's create, read, update and delete calls and the provider functions
    (with the Service Authorization Reference's dependent actions), the IAM calls, and the caller
    checks. The deploy policy grants exactly these; `pdctl preflight` simulates exactly these."""
    if not _CLUSTER_NAME.fullmatch(cluster_name):
        raise ValueError(f"deployClusters: {cluster_name!r} is not an EKS cluster name")
    actions = resource_actions(RESOURCE_ACTIONS) | {a for calls in INVOKE_ACTIONS.values() for a in calls}
    actions |= dependent_actions(actions)
    calls = [call for action in sorted(actions) for call in _scoped_calls(action, partition, account_id, cluster_name)]
    calls += _iam_calls(partition, account_id, cluster_name)
    calls += [call for check in caller_checks_for(RESOURCE_ACTIONS)
              for call in check.calls(partition, account_id, cluster_name)]
    return list({(call.action, call.key()): call for call in calls}.values())


