"""Persistent volumes for the cluster: the Amazon EBS CSI driver as an EKS managed add-on, with
its own least-privilege IAM role (IRSA: only its controller's service account can assume it), and
the encrypted gp3 StorageClass that Prometheus's volume is claimed from.

EKS ships no CSI driver for EBS: without it a PersistentVolumeClaim stays Pending for ever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies
from components.cluster import Cluster, bounded_role
from components.manifests.storage import encrypted_gp3_storage_class

EBS_CSI_ADDON = "aws-ebs-csi-driver"
# The controller's service account as the EKS add-on creates it (EKS user guide, "Amazon EBS CSI
# driver": "ebs-csi-controller-sa" in kube-system): the only subject the role trusts.
EBS_CSI_SERVICE_ACCOUNT = "system:serviceaccount:kube-system:ebs-csi-controller-sa"
EBS_CSI_POLICY = "service-role/AmazonEBSCSIDriverPolicy"


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, service_account: str) -> str:
    """A role trust policy for one Kubernetes service account through the cluster's OIDC provider."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                f"{oidc_issuer}:sub": service_account,
                f"{oidc_issuer}:aud": "sts.amazonaws.com",
            }},
        }],
    })


@dataclass(frozen=True)
class BlockStorageArgs:
    """Inputs of `BlockStorage`.

    cluster: the cluster (its OIDC provider, name and Kubernetes provider).
    """

    cluster: Cluster


class BlockStorage(pulumi.ComponentResource):
    """EBS CSI driver add-on + its IRSA role + the `gp3-encrypted` StorageClass.

    Pass the system node group in `opts.depends_on`: the add-on's controller runs there, and EKS
    reports the add-on DEGRADED (and the creation waits) until it can.
    """

    role: aws.iam.Role
    addon: aws.eks.Addon
    storage_class: k8s.storage.v1.StorageClass
    storage_class_name: str

    def __init__(self, name: str, args: BlockStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:storage:BlockStorage", name, None, opts)
        cluster = args.cluster
        partition = aws.get_partition().partition
        child = pulumi.ResourceOptions(parent=self)
        # Under the stack's role path and permissions boundary, like the cluster's own roles.
        self.role, [policy] = bounded_role(
            f"{name}-ebs-csi",
            description="EBS CSI driver controller (IRSA): creates, attaches and deletes the cluster's EBS volumes",
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_issuer).apply(
                lambda values: irsa_trust_policy(values[0], values[1], EBS_CSI_SERVICE_ACCOUNT)),
            managed_policies=(EBS_CSI_POLICY,), permissions_boundary=cluster.permissions_boundary,
            partition=partition, tags=cluster.tags, trusts_the_cluster=True, opts=child)
        self.addon = aws.eks.Addon(
            name,
            cluster_name=cluster.cluster_name,
            addon_name=EBS_CSI_ADDON,
            # No addon_version: EKS installs its default version for the cluster's Kubernetes version.
            service_account_role_arn=self.role.arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, *explicit_dependencies(opts)]),
        )
        body = encrypted_gp3_storage_class()
        self.storage_class_name = body["metadata"]["name"]
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata=body["metadata"],
            provisioner=body["provisioner"],
            parameters=body["parameters"],
            volume_binding_mode=body["volumeBindingMode"],
            allow_volume_expansion=body["allowVolumeExpansion"],
            reclaim_policy=body["reclaimPolicy"],
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[self.addon]),
        )
        self.register_outputs({"addon_name": self.addon.addon_name, "storage_class": self.storage_class_name})
