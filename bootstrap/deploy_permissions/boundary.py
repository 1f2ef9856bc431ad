"""The workload permissions boundary: the most any role the deploy role creates may do."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from .naming import MANAGED_POLICY_MAX_CHARS

# S3 bucket names (S3 user guide, bucket naming rules): also what deployModelSources names.
S3_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


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


# The Cluster Autoscaler's policy (workload_policies.py, from the Cluster Autoscaler's AWS guide's),
# when a stack lets the GPU node group grow: reads anywhere; resizing only of Auto Scaling groups that
# EKS made for a managed node group (they carry eks:nodegroup-name). Its own policy narrows that to
# its cluster's GPU groups.
CLUSTER_AUTOSCALER_READ_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities", "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup",
)
CLUSTER_AUTOSCALER_WRITE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")


# The AWS Load Balancer Controller's policy (workload_policies.py: the policy its project
# publishes for the release the chart pins, bootstrap/aws_load_balancer_controller_policy.json, which
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
    """What the model reader's policy may grant (workload_policies.py model_reader_policy):
    objects and listing of the named buckets only; nothing for none."""
    buckets = sorted(set(buckets))
    for bucket in buckets:
        if not S3_BUCKET_NAME.fullmatch(bucket):
            raise ValueError(f"modelMirrorBuckets: {bucket!r} is not an S3 bucket name")
    if not buckets:
        return []
    return [
        {"Sid": "ReadTheModelMirrors", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": [f"arn:{partition}:s3:::{bucket}/*" for bucket in buckets]},
        {"Sid": "ListTheModelMirrors", "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": [f"arn:{partition}:s3:::{bucket}" for bucket in buckets]},
    ]


def compile_cache_statements(archives: Iterable[str]) -> list[dict]:
    """What the compile cache's policy may write (workload_policies.py compile_cache_policy): the objects
    `archives` names, each an S3 mirror's compile-cache prefix as that policy names it; nothing for none.
    Its sidecar writes an archive with one PutObject request (components/compile_cache.py), and an upload in
    parts is authorized as s3:PutObject too (docs/SOURCES.md#compile-cache-s3-calls)."""
    archives = sorted(set(archives))
    if not archives:
        return []
    return [{"Sid": "WriteTheCompileCaches", "Effect": "Allow", "Action": "s3:PutObject", "Resource": archives}]


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


def workload_boundary_policy(*, partition: str, model_mirror_buckets: Iterable[str] = (),
                             compile_cache_archives: Iterable[str] = ()) -> dict:
    """The most any role the deploy role creates may do: exactly what the attachable managed policies
    grant (their conditions are theirs to keep; a boundary only caps), what the workload
    policies may need (the Cluster Autoscaler's; the AWS Load Balancer Controller's, for the front
    door's NLB; reading the model mirror buckets named here; writing the compile caches' objects named
    here, workload_policies.py `compile_cache_archives`). The
    deploy role may attach no other managed policy, so the boundary is the second wall: against a
    mistake here, or a wider policy attached by hand. In IAM only the load balancers' service-linked
    role, as AmazonEKSClusterPolicy has it.
    """
    # One statement for every unconditioned action, the Load Balancer Controller's among them: a second
    # one would take 100 of the characters IAM's size limit leaves the mirrors' statements.
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "WhatTheStacksRolesPoliciesGrant", "Effect": "Allow", "Resource": "*",
             "Action": boundary_actions()},
            {"Sid": "ClusterAutoscalerResizesManagedNodeGroupsOnly", "Effect": "Allow", "Resource": "*",
             "Action": list(CLUSTER_AUTOSCALER_WRITE_ACTIONS),
             "Condition": {"Null": {"aws:ResourceTag/eks:nodegroup-name": "false"}}},
            {"Sid": "LoadBalancerServiceLinkedRole", "Effect": "Allow", "Action": "iam:CreateServiceLinkedRole",
             "Resource": f"arn:{partition}:iam::*:role/aws-service-role/elasticloadbalancing.amazonaws.com/*",
             "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}},
            *model_mirror_statements(partition, model_mirror_buckets),
            *compile_cache_statements(compile_cache_archives),
        ],
    }
    if len(json.dumps(policy, separators=(",", ":"))) > MANAGED_POLICY_MAX_CHARS:
        raise ValueError(f"modelMirrorBuckets, deployModelSources: the workload boundary naming these mirrors "
                         f"exceeds IAM's {MANAGED_POLICY_MAX_CHARS:,} characters for a managed policy; name fewer")
    return policy
