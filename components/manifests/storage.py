"""The StorageClass persistent volumes of this stack use, as plain data."""

from __future__ import annotations

from typing import Any

EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
GP3_ENCRYPTED_STORAGE_CLASS = "gp3-encrypted"


def encrypted_gp3_storage_class() -> dict[str, Any]:
    """gp3 EBS volumes, encrypted (with the account's EBS key), created in the AZ of the pod that
    claims them (`WaitForFirstConsumer`: a volume made before scheduling could land in an AZ the
    pod cannot reach), and growable in place. Parameters: kubernetes-sigs/aws-ebs-csi-driver/docs/parameters.md."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": GP3_ENCRYPTED_STORAGE_CLASS},
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
        "reclaimPolicy": "Delete",
    }
