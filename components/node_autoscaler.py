"""The Cluster Autoscaler for the GPU node group: its AWS identity (IRSA) and its Helm release.

Why the Cluster Autoscaler and not Karpenter: the GPU nodes must share one AZ, one cluster placement
group and carry their EFA interfaces, and the managed node group's launch template already says all
three (components/node_groups.py). The Cluster Autoscaler only moves that group's desired size, so
every node it adds comes from the same template, subnet and placement group: one definition of a
GPU node, the one the policy pack and the tests check. Karpenter launches instances itself from an
EC2NodeClass; it can add EFA interfaces for pods that request them, but placement groups reached it
only in 2026 (EC2NodeClass placementGroupSelector, aws/karpenter-provider-aws#9030, closing #3324),
and using it would mean a second node definition beside the managed group, plus its own controller,
instance profile and interruption queue. docs/SOURCES.md#cluster-autoscaler.

Scope: the release discovers only the Auto Scaling groups of the GPU node groups that can grow (by
EKS's eks:nodegroup-name tag; a phase's own group, prefillGpuNodeType or decodeGpuNodeType, is one
more), and its role may change the desired size or terminate instances only of Auto Scaling groups
tagged with this cluster and a GPU node group name it gave (`<cluster>-gpu-…`: only the groups that
can grow are named so; the read-only Describe calls take no resource conditions). Pods reach it
through IRSA: the role trusts the cluster's OIDC provider for exactly the release's service account.
Installed only when a GPU group's max count exceeds its count.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies, helm_release
from components.cluster import Cluster, attach_workload_policy, bounded_role
from components.manifests.helm_values import cluster_autoscaler_values
from components.scheduling import DEVICE_PLUGIN_NAMESPACE
from components.storage import irsa_trust_policy
from facts.charts import CLUSTER_AUTOSCALER

# The release's service account: named so the IAM role's trust policy can name it.
SERVICE_ACCOUNT = "cluster-autoscaler"
NAMESPACE = DEVICE_PLUGIN_NAMESPACE  # kube-system, where the chart and the AWS guide put it

# Its policy, made by the bootstrap for each cluster (bootstrap/deploy_permissions/workload_policies.py,
# from the Cluster Autoscaler's AWS guide): describe anywhere, resize only the cluster's GPU groups that
# may grow, which the stack names `<cluster>-gpu-…` (components/node_groups.py gpu_node_group_name_prefix).
CLUSTER_AUTOSCALER_POLICY = "cluster-autoscaler"


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    """Inputs of `ClusterAutoscaler`.

    cluster: the cluster (its OIDC provider and Kubernetes provider).
    cluster_name: its name (the settings'), known at preview.
    region: where the Auto Scaling groups are.
    kubernetes_version: the cluster's minor version; picks the Cluster Autoscaler release.
    node_group_names: the GPU managed node groups that can grow, the only groups it discovers (their
        names change when a group is replaced: the discovery follows; the policy's name pattern covers them).
    chart_version: `cluster-autoscaler` chart version (facts/charts.py).
    """

    cluster: Cluster
    cluster_name: str
    region: str
    kubernetes_version: str
    node_group_names: tuple[pulumi.Input[str], ...]
    chart_version: str = CLUSTER_AUTOSCALER.default_version


class ClusterAutoscaler(pulumi.ComponentResource):
    """IAM role (IRSA) + the bootstrap's policy scoped to the GPU node groups, and the cluster-autoscaler Helm release
    on the system nodes. Pass the system and GPU node groups in `opts.depends_on`."""

    role: aws.iam.Role
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:addons:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Under the stack's role path and permissions boundary, like every role of the stack.
        self.role, _ = bounded_role(
            f"{name}-role",
            description=f"Cluster Autoscaler of EKS cluster {args.cluster_name}: resizes its GPU node group",
            # IRSA: the cluster's OIDC provider hands this role to the release's service account only.
            assume_role_policy=pulumi.Output.all(args.cluster.oidc_provider_arn, args.cluster.oidc_issuer).apply(
                lambda values: irsa_trust_policy(
                    values[0], values[1], f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}")),
            managed_policies=(), permissions_boundary=args.cluster.permissions_boundary, partition="aws",
            tags=args.cluster.tags, trusts_the_cluster=True, opts=child,
        )
        names = pulumi.Output.all(*args.node_group_names).apply(tuple)
        self.policy = attach_workload_policy(f"{name}-policy", self.role, args.cluster_name,
                                             CLUSTER_AUTOSCALER_POLICY, child)
        values = pulumi.Output.all(names, self.role.arn).apply(lambda found: cluster_autoscaler_values(
            cluster_name=args.cluster_name, region=args.region, kubernetes_version=args.kubernetes_version,
            node_group_names=found[0], service_account=SERVICE_ACCOUNT, role_arn=found[1]))
        self.release = helm_release(
            name, CLUSTER_AUTOSCALER, args.chart_version, NAMESPACE, values,
            pulumi.ResourceOptions(parent=self, provider=args.cluster.provider,
                                   depends_on=[self.policy, *explicit_dependencies(opts)]))
        self.register_outputs({"role_arn": self.role.arn, "status": self.release.status})
