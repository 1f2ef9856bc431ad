"""What each AWS resource type and provider function the stack registers or calls makes the deploy
role do: per type the actions of its provider's create, read, update and delete; per function its call."""

from __future__ import annotations

from collections.abc import Iterable

EC2_TAGS = ("ec2:CreateTags", "ec2:DeleteTags")

# What the stack tags with STACK_TAG from its create on, per service by the resource type its ARN names
# (the Service Authorization Reference's types): the network, the node groups' launch templates,
# placement group and EFA group and their rules (components/network.py, node_groups.py), the GCS
# store's groups, rules, subnet group, replication group and its member clusters (gcs_store.py). A
# call that changes one must find its own cluster's value there; a call that creates one must set it.
STACK_TAGGED_TYPES: dict[str, tuple[str, ...]] = {
    "ec2": ("vpc", "subnet", "route-table", "internet-gateway", "natgateway", "elastic-ip", "vpc-endpoint",
            "security-group", "security-group-rule", "launch-template", "placement-group"),
    "elasticache": ("replicationgroup", "cluster", "subnetgroup"),
}
# The types each create call makes, tagged in that request (tag specifications; ElastiCache's Tags):
# their grant takes the stack tag from the request (aws:RequestTag), the call's other resources exist.
CREATED_TYPES: dict[str, tuple[str, ...]] = {
    "ec2:AllocateAddress": ("elastic-ip",),
    "ec2:AuthorizeSecurityGroupEgress": ("security-group-rule",),
    "ec2:AuthorizeSecurityGroupIngress": ("security-group-rule",),
    "ec2:CreateInternetGateway": ("internet-gateway",),
    "ec2:CreateLaunchTemplate": ("launch-template",),
    "ec2:CreateNatGateway": ("natgateway",),
    "ec2:CreatePlacementGroup": ("placement-group",),
    "ec2:CreateRouteTable": ("route-table",),
    "ec2:CreateSecurityGroup": ("security-group",),
    "ec2:CreateSubnet": ("subnet",),
    "ec2:CreateVpc": ("vpc",),
    "ec2:CreateVpcEndpoint": ("vpc-endpoint",),
    "elasticache:CreateCacheSubnetGroup": ("subnetgroup",),
    "elasticache:CreateReplicationGroup": ("replicationgroup", "cluster"),
}
# Resources the stack's calls name beside its own that carry no stack tag because AWS makes them, granted
# on these ARNs without a tag condition (the placeholders filled in as given, `*` for the rest):
# the network interfaces ElastiCache makes in the stack's subnets for its nodes (CreateReplicationGroup's
# dependent actions) and the NAT gateway's, and the engine's default parameter group.
UNTAGGED_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "ec2": {"network-interface": {}},
    "elasticache": {"parametergroup": {"CacheParameterGroupName": "default.*"}},
}

# Resource types whose IAM is granted by `_iam_calls`, not by RESOURCE_ACTIONS.
IAM_ROLE_TYPES = ("aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment")

RESOURCE_ACTIONS: dict[str, tuple[str, ...]] = {
    # ── network (components/network.py) ──
    "aws:ec2/vpc:Vpc": (
        "ec2:CreateVpc", "ec2:DeleteVpc", "ec2:DescribeVpcs", "ec2:DescribeVpcAttribute", "ec2:ModifyVpcAttribute",
        # The provider reads the VPC's default route table, network ACL and security group.
        "ec2:DescribeRouteTables", "ec2:DescribeNetworkAcls", "ec2:DescribeSecurityGroups", *EC2_TAGS),
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2:CreateInternetGateway", "ec2:DeleteInternetGateway", "ec2:DescribeInternetGateways",
        "ec2:AttachInternetGateway", "ec2:DetachInternetGateway", *EC2_TAGS),
    "aws:ec2/subnet:Subnet": (
        "ec2:CreateSubnet", "ec2:DeleteSubnet", "ec2:DescribeSubnets", "ec2:ModifySubnetAttribute",
        # Deleting a subnet waits for the ENIs in it to go.
        "ec2:DescribeNetworkInterfaces", *EC2_TAGS),
    "aws:ec2/routeTable:RouteTable": (
        "ec2:CreateRouteTable", "ec2:DeleteRouteTable", "ec2:DescribeRouteTables",
        "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute", *EC2_TAGS),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        "ec2:AssociateRouteTable", "ec2:DisassociateRouteTable", "ec2:ReplaceRouteTableAssociation",
        "ec2:DescribeRouteTables"),
    "aws:ec2/eip:Eip": (
        "ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute",
        "ec2:DisassociateAddress", *EC2_TAGS),
    "aws:ec2/natGateway:NatGateway": (
        "ec2:CreateNatGateway", "ec2:DeleteNatGateway", "ec2:DescribeNatGateways", *EC2_TAGS),
    "aws:ec2/vpcEndpoint:VpcEndpoint": (
        "ec2:CreateVpcEndpoint", "ec2:DeleteVpcEndpoints", "ec2:DescribeVpcEndpoints", "ec2:ModifyVpcEndpoint",
        # A gateway endpoint's prefix list, and its route table associations.
        "ec2:DescribePrefixLists", "ec2:DescribeRouteTables", *EC2_TAGS),
    # ── security groups (node groups, the GCS store) ──
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups",
        # The provider removes the default allow-all egress rule of a new group.
        "ec2:RevokeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress",
        "ec2:DescribeNetworkInterfaces", *EC2_TAGS),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:ModifySecurityGroupRules",
        "ec2:DescribeSecurityGroupRules", *EC2_TAGS),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupEgress", "ec2:ModifySecurityGroupRules",
        "ec2:DescribeSecurityGroupRules", *EC2_TAGS),
    # ── nodes (components/node_groups.py) ──
    "aws:ec2/placementGroup:PlacementGroup": (
        "ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "ec2:DescribePlacementGroups", *EC2_TAGS),
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
        "ec2:DeleteLaunchTemplate", "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions",
        *EC2_TAGS),
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

