"""Where a GPU node keeps what outlives a pod: container images, the model cache, vLLM's compile cache.

Decided from the instance facts (`InstanceType.local_nvme_gb`: EC2's totalInstanceStorage for the type, as
components/discovery.py reads it), before any resource:
- a type with instance-store NVMe gets AL2023 nodeadm's `localStorage.strategy: RAID0` in its launch
  template's user data: nodeadm joins the NVMe devices into one array, mounts it at
  `/mnt/k8s-disks/0` and bind-mounts containerd's and the kubelet's state onto it
  (docs/SOURCES.md#nodeadm-local-storage), so image layers and pod volumes live on NVMe. The model
  cache is a directory on that array. The gp3 root keeps the OS and logs only: its baseline
  throughput and IOPS, stated explicitly.
- a type without instance storage keeps everything on the gp3 root, whose throughput and IOPS are
  then raised to gp3's ceiling (the checkpoint is read back from it), and the plan says so.

With `gpuImageSnapshotId` a node also gets a gp3 volume restored from that EBS snapshot (made by
`pdctl image-snapshot`: an XFS filesystem labelled IMAGE_VOLUME_LABEL holding containerd's state with
the Ray image pulled), mounted as /var/lib/containerd before nodeadm starts containerd, so the image
is there at boot (docs/SOURCES.md#image-snapshot). nodeadm's RAID0 then leaves containerd alone
(`disabledMounts: [Containerd]`); the kubelet's volumes and the model cache stay on the NVMe.

components/node_boot.py puts the NodeConfig and the mount into the launch template's user data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from facts.instances import InstanceType

NODECONFIG_API_VERSION = "node.eks.aws/v1alpha1"
NODECONFIG_KIND = "NodeConfig"
# The MIME type nodeadm reads a NodeConfig part from (docs/SOURCES.md#nodeadm-local-storage).
NODECONFIG_MIME_SUBTYPE = "node.eks.aws"
LOCAL_STORAGE_STRATEGY = "RAID0"
# Where nodeadm's setup-local-disks mounts the RAID0 array: `${MNT_DIR}/0`, MNT_DIR defaulting to
# /mnt/k8s-disks (amazon-eks-ami templates/shared/runtime/bin/setup-local-disks, `maybe_raid0`).
RAID0_MOUNT = "/mnt/k8s-disks/0"
# On a type without instance storage: a directory of the root volume outside the kubelet's own.
ROOT_VOLUME_CACHE_PARENT = "/var/lib"
CACHE_DIRECTORY = "eks-pd-llm"

# gp3 (docs/SOURCES.md#gp3-performance): 3,000 IOPS
# and 125 MiB/s are included; throughput can be raised to 1,000 MiB/s, at most 0.25 MiB/s per
# provisioned IOPS, so 1,000 MiB/s needs 4,000 IOPS.
GP3_BASELINE_IOPS = 3_000
GP3_BASELINE_THROUGHPUT_MIBPS = 125
GP3_MAX_THROUGHPUT_MIBPS = 1_000
GP3_IOPS_FOR_MAX_THROUGHPUT = 4_000

# The image volume: its device name in the launch template, the label `pdctl image-snapshot` gives
# its filesystem (the node mounts it by label: NVMe device names do not follow the mapping), and
# where containerd keeps its state.
IMAGE_VOLUME_DEVICE = "/dev/xvdb"
IMAGE_VOLUME_LABEL = "eks-pd-llm-img"  # XFS labels hold at most 12 characters
CONTAINERD_STATE = "/var/lib/containerd"
# nodeadm's name for containerd's bind mount onto the RAID0 array (nodeconfig_types.go DisabledMount).
NODEADM_CONTAINERD_MOUNT = "Containerd"
# EBS's volume initialization rate, its most (100–300 MiB/s): how fast a restored volume's blocks come
# from S3 where fast snapshot restore is off (docs/SOURCES.md#image-snapshot).
IMAGE_VOLUME_INITIALIZATION_MIBPS = 300


@dataclass(frozen=True)
class NodeStorage:
    """What a GPU node's disks hold, and how the root volume is provisioned."""

    instance: InstanceType
    local_nvme: bool
    cache_root: str  # host path of the node-local cache (model weights, vLLM's compile cache)
    root_iops: int
    root_throughput_mibps: int
    image_snapshot_id: str | None = None  # gpuImageSnapshotId: containerd's state restored from it

    @property
    def summary(self) -> str:
        """One line for the plan: where images and the model cache live."""
        images = (f"containerd's images on a gp3 volume restored from {self.image_snapshot_id} "
                  f"({GP3_IOPS_FOR_MAX_THROUGHPUT} IOPS / {GP3_MAX_THROUGHPUT_MIBPS} MiB/s)"
                  if self.image_snapshot_id else "")
        if self.local_nvme:
            return (f"{self.instance.name}: {self.instance.local_nvme_gb} GB instance-store NVMe as RAID0 "
                    f"({'kubelet' if images else 'containerd, kubelet'}, model cache at {self.cache_root})"
                    f"{'; ' + images if images else ''}; gp3 root at baseline "
                    f"{self.root_iops} IOPS / {self.root_throughput_mibps} MiB/s")
        return (f"{self.instance.name} has no instance storage: {'the' if images else 'images and the'} model cache "
                f"({self.cache_root}) stay{'s' if images else ''} on the gp3 root, raised to {self.root_iops} IOPS / "
                f"{self.root_throughput_mibps} MiB/s{'; ' + images if images else ''}")


def node_storage(instance: InstanceType, image_snapshot_id: str | None = None) -> NodeStorage:
    if instance.local_nvme_gb > 0:
        return NodeStorage(instance, True, f"{RAID0_MOUNT}/{CACHE_DIRECTORY}",
                           GP3_BASELINE_IOPS, GP3_BASELINE_THROUGHPUT_MIBPS, image_snapshot_id)
    return NodeStorage(instance, False, f"{ROOT_VOLUME_CACHE_PARENT}/{CACHE_DIRECTORY}",
                       GP3_IOPS_FOR_MAX_THROUGHPUT, GP3_MAX_THROUGHPUT_MIBPS, image_snapshot_id)


def node_config(storage: NodeStorage) -> dict[str, Any] | None:
    """The nodeadm NodeConfig this stack adds to EKS's own, or None when there is nothing to add."""
    if not storage.local_nvme:
        return None
    local_storage: dict[str, Any] = {"strategy": LOCAL_STORAGE_STRATEGY}
    if storage.image_snapshot_id:  # containerd's state is the image volume's, not the array's
        local_storage["disabledMounts"] = [NODEADM_CONTAINERD_MOUNT]
    return {
        "apiVersion": NODECONFIG_API_VERSION,
        "kind": NODECONFIG_KIND,
        "spec": {"instance": {"localStorage": local_storage}},
    }

