"""Which input changes make a provider replace a resource instead of updating it in place.

Pulumi's AWS provider is bridged from terraform-provider-aws: an input its schema marks `ForceNew`
replaces the resource when it changes. pulumi-eks's `ManagedNodeGroup` hands its inputs to an
`aws.eks.NodeGroup`, and its `Cluster` its name to an `aws.eks.Cluster`. The Pulumi Kubernetes
provider replaces any object whose name or namespace changes. Paths are input paths as the engine
records them (camelCase, dotted); a change at or below one of them replaces.

`complete` says whether the list is the whole story for the type: then any other change updates in
place. Where it is not (pulumi-eks's Cluster is many resources; Kubernetes kinds with fields of their
own), and for types not listed at all, whether another change updates or replaces is decided by the
provider at `pulumi preview` time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplaceTriggers:
    paths: tuple[str, ...]
    source: str
    complete: bool = True  # False: other inputs may replace too (not modelled here)
    # Where the list is not complete: inputs known to update in place all the same.
    in_place: tuple[str, ...] = ()


_NODE_GROUP = ReplaceTriggers(
    ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes", "launchTemplate.id",
     "launchTemplate.name", "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess", "subnetIds"),
    "terraform-provider-aws internal/service/eks/node_group.go (ForceNew); labels, taints, scaling "
    "and the launch template version update in place",
)

REPLACE_TRIGGERS: dict[str, ReplaceTriggers] = {
    "eks:index:ManagedNodeGroup": _NODE_GROUP,
    "aws:eks/nodeGroup:NodeGroup": _NODE_GROUP,
    # A component of many resources (cluster, OIDC provider, security groups, add-ons): only the
    # cluster's own name and its service role are modelled (EKS cannot change a cluster's role).
    # A new Kubernetes version is an in-place upgrade (UpdateClusterVersion), as are tags and the
    # control-plane log types.
    "eks:index:Cluster": ReplaceTriggers(
        ("name", "serviceRole"),
        "terraform-provider-aws internal/service/eks/cluster.go (name and role_arn are ForceNew; version, "
        "tags and enabled_cluster_log_types update in place)", complete=False,
        in_place=("version", "tags", "enabledClusterLogTypes")),
    # A new name is a new template; any other change is a new version of the same template, which a
    # node group pinned to its latest version rolls out to every node (NODE_ROLLING_PATHS).
    "aws:ec2/launchTemplate:LaunchTemplate": ReplaceTriggers(
        ("name", "namePrefix"),
        "terraform-provider-aws internal/service/ec2/ec2_launch_template.go (name and name_prefix are ForceNew; "
        "resourceLaunchTemplateUpdate creates a version for any other change but tags and the default version)"),
    "aws:kms/key:Key": ReplaceTriggers(
        ("customKeyStoreId", "customerMasterKeySpec", "keyUsage", "multiRegion", "xksKeyId"),
        "terraform-provider-aws internal/service/kms/key.go (ForceNew); policy, description, rotation and "
        "the deletion window update in place"),
    # GCS fault tolerance's store. Its CustomizeDiff also replaces on an engine downgrade, on a changed
    # node_group_configuration and, below Redis 7.0.5, on transit_encryption_enabled: not complete.
    "aws:elasticache/replicationGroup:ReplicationGroup": ReplaceTriggers(
        ("atRestEncryptionEnabled", "dataTieringEnabled", "globalReplicationGroupId", "kmsKeyId", "networkType",
         "port", "replicationGroupId", "securityGroupNames", "snapshotArns", "snapshotName", "subnetGroupName"),
        "terraform-provider-aws internal/service/elasticache/replication_group.go (ForceNew, and CustomizeDiff)",
        complete=False,
        in_place=("authToken", "description", "maintenanceWindow", "nodeType", "numCacheClusters",
                  "securityGroupIds", "snapshotRetentionLimit", "snapshotWindow", "tags", "automaticFailoverEnabled",
                  "multiAzEnabled", "parameterGroupName", "applyImmediately", "autoMinorVersionUpgrade")),
    "aws:iam/role:Role": ReplaceTriggers(
        ("name", "namePrefix", "path"),
        "terraform-provider-aws internal/service/iam/role.go (name, name_prefix and path are ForceNew)",
        complete=False, in_place=("tags",)),
    "aws:ec2/subnet:Subnet": ReplaceTriggers(
        ("availabilityZone", "availabilityZoneId", "cidrBlock", "vpcId", "ipv6Native", "outpostArn"),
        "terraform-provider-aws internal/service/ec2/vpc_subnet.go (ForceNew)"),
    "aws:ec2/vpc:Vpc": ReplaceTriggers(
        ("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"),
        "terraform-provider-aws internal/service/ec2/vpc_.go (ForceNew)"),
}

# A managed node group's inputs whose change EKS rolls out to every node in place: a new launch template
# version, AMI release or Kubernetes version makes it launch new nodes beside the old (up to two per AZ
# beyond the group, or maxUnavailable if larger), drain the old ones, then scale back
# (docs/SOURCES.md#managed-node-update-behavior).
NODE_ROLLING_PATHS: tuple[str, ...] = ("launchTemplate.version", "releaseVersion", "version")
NODE_GROUP_TYPES: tuple[str, ...] = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
# Surge nodes per AZ while EKS rolls a managed node group, and its default maxUnavailable.
NODE_ROLL_SURGE_PER_AZ = 2
NODE_ROLL_DEFAULT_MAX_UNAVAILABLE = 1


def node_roll_surge(availability_zones: int, max_unavailable: int = NODE_ROLL_DEFAULT_MAX_UNAVAILABLE) -> int:
    """How many nodes EKS adds beyond the group while it rolls it: the larger of twice its AZs and its
    maxUnavailable (docs/SOURCES.md#managed-node-update-behavior)."""
    return max(NODE_ROLL_SURGE_PER_AZ * availability_zones, max_unavailable)


# Every Kubernetes object: pulumi-kubernetes provider/pkg/provider/diff.go `metadataForceNewProperties`.
# Its `forceNew` table adds fields for some built-in kinds (Secret, Service, Job, Deployment, ...);
# custom resources, Namespaces and NetworkPolicies have none there.
_KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")
_KUBERNETES_SOURCE = "pulumi-kubernetes provider/pkg/provider/diff.go (a new name or namespace is a new object)"
_KUBERNETES_IDENTITY_ONLY = ("kubernetes:core/v1:Namespace", "kubernetes:networking.k8s.io/v1:NetworkPolicy")
_KUBERNETES_BUILT_IN = ("kubernetes:core/", "kubernetes:apps/", "kubernetes:batch/", "kubernetes:policy/",
                        "kubernetes:rbac.authorization.k8s.io/", "kubernetes:storage.k8s.io/")


# Any other AWS resource: its tags change in place, by the service's tagging calls; terraform-provider-aws
# marks no `tags` ForceNew (docs/SOURCES.md#ec2-tag-scoped-grants). Whatever else changes, preview decides.
_AWS_TAGS_IN_PLACE = ReplaceTriggers(
    (), "terraform-provider-aws: tags update in place on every resource", complete=False, in_place=("tags",))


def replace_triggers(resource_type: str) -> ReplaceTriggers | None:
    """The known replace-triggering inputs of `resource_type`, or None when nothing is known here."""
    if resource_type in REPLACE_TRIGGERS:
        return REPLACE_TRIGGERS[resource_type]
    if resource_type.startswith("aws:"):
        return _AWS_TAGS_IN_PLACE
    if not resource_type.startswith("kubernetes:") or resource_type.startswith("kubernetes:helm.sh/"):
        return None
    complete = resource_type in _KUBERNETES_IDENTITY_ONLY or not resource_type.startswith(_KUBERNETES_BUILT_IN)
    return ReplaceTriggers(_KUBERNETES_IDENTITY, _KUBERNETES_SOURCE, complete=complete)


# What a replacement destroys beyond the resource itself: the resource types (and, for Helm releases,
# the charts) whose replacement loses data or takes the service down. `pdctl plan --diff` puts such a
# replacement first, and tests/pdctl/test_release_update.py refuses one between releases unless it is
# declared intended (pdctl/intended_replacements.yaml).
STATEFUL_TYPES: dict[str, str] = {
    "aws:ec2/vpc:Vpc": "the network: every subnet, node and endpoint in it goes with it",
    "eks:index:Cluster": "the EKS cluster: every Kubernetes object, the endpoint and its access entries",
    "eks:index:ManagedNodeGroup": "the nodes: every pod on them, the engines' loaded models and caches",
    "aws:eks/nodeGroup:NodeGroup": "the nodes: every pod on them, the engines' loaded models and caches",
    "aws:kms/key:Key": "the key: whatever it encrypted cannot be read again once it is deleted",
    "aws:elasticache/replicationGroup:ReplicationGroup": "the Ray head's cluster state (GCS fault tolerance)",
}
# Helm charts whose release owns a persistent volume (its claim goes when the release is replaced).
STATEFUL_CHARTS: dict[str, str] = {
    "kube-prometheus-stack": "Prometheus's volume: the metrics history",
}


def stateful_loss(resource_type: str, inputs: dict | None = None) -> str | None:
    """What replacing a resource of `resource_type` (with `inputs`) loses, or None for nothing kept."""
    if resource_type in STATEFUL_TYPES:
        return STATEFUL_TYPES[resource_type]
    if resource_type.startswith("kubernetes:helm.sh/") and inputs:
        return STATEFUL_CHARTS.get(str(inputs.get("chart")))
    return None
