"""How big the one Ray worker pod on each GPU node is: pure arithmetic over the instance type.

The pod owns its node (requests = limits), so everything is what the node has less what the node
keeps for itself; the checks here refuse a node type the engines cannot start on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.scheduling import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_2MI_RESOURCE
from facts.aws import EFA_HUGEPAGES_2MI, HUGEPAGE_2MI_MIB
from facts.instances import InstanceType
from serve_app.stack_keys import StackField

GIB = 1024**3


# What a GPU node keeps for itself: kubelet and containerd (EKS kube-reserved for 32 vCPUs is
# 0.15 CPU and 255 MiB + 11 MiB per pod), the DaemonSets (aws-node, kube-proxy, both device
# plugins), and the share of RAM the kernel and firmware hold back from MemTotal (~3-4%).
NODE_RESERVED_CPUS = 2
NODE_RESERVED_MEMORY_FRACTION = 0.05
NODE_RESERVED_MEMORY_GIB = 4

# Ray Serve LLM places each engine in a placement group of {CPU: 1, GPU: 1} per GPU; model
# download tasks and the replica's helpers need CPUs outside it, or initialization hangs with no
# error (ray#59764). This many CPUs must stay free after the placement groups.
PLACEMENT_GROUP_CPUS_PER_GPU = 1
MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS = 4

# Raylet, the vLLM engine process, CUDA context and tokenizer, before any checkpoint bytes.
WORKER_RUNTIME_MEMORY_GIB = 8
# Shared memory NCCL, NIXL and vLLM keep for themselves, outside Ray's object store.
SHM_RESERVED_FOR_ENGINE_GIB = 2
MIN_SHM_GIB = 4
MAX_SHM_GIB = 32



@dataclass(frozen=True)
class WorkerResources:
    """What one Ray worker pod on one GPU node gets (requests = limits: Guaranteed QoS)."""

    cpus: int
    memory_gib: int
    gpus: int
    efa_interfaces: int
    hugepages_2mi_mib: int  # the 2 MiB huge pages the node allocates at boot (EFA nodes), all of them
    shm_gib: int
    object_store_gib: int

    def container_resources(self) -> dict[str, Any]:
        # Equal requests and limits: the pod owns the node, and Guaranteed QoS keeps the kubelet
        # from evicting a serving engine under memory pressure before anything else.
        amounts = {
            "cpu": str(self.cpus),
            "memory": f"{self.memory_gib}Gi",
            GPU_RESOURCE: str(self.gpus),
        }
        if self.efa_interfaces:
            amounts[EFA_RESOURCE] = str(self.efa_interfaces)
        if self.hugepages_2mi_mib:
            # As the EKS EFA guide's pods do: libfabric's EFA provider puts its buffers in huge pages
            # when the pod may use them, and a pod gets none (hugetlb limit 0) unless it asks.
            amounts[HUGEPAGES_2MI_RESOURCE] = f"{self.hugepages_2mi_mib}Mi"
        return {"requests": dict(amounts), "limits": dict(amounts)}


def worker_resources(instance: InstanceType, model_bytes: int | None, setting: StackField) -> WorkerResources:
    """Size the one worker pod that runs on each GPU node of `instance` (the type `setting` names; a
    refusal names it).

    CPU: the node's vCPUs less `NODE_RESERVED_CPUS`; refused if fewer than
    `MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS` stay free beside the engines' placement groups.
    Memory: the node's memory less 5% and 4 GiB (kernel share, kube-reserved, eviction threshold,
    DaemonSets) and less its pre-allocated huge pages, rounded down to whole GiB.
    Huge pages: an EFA node's user data allocates 2560 × 2 MiB (facts/aws.py, components/node_boot.py);
    the pod requests them all, and the kubelet counts them outside the node's allocatable memory.
    The limit must hold the checkpoint twice (the page cache keeps the safetensors so a restart loads
    in seconds; the load itself stages a copy) plus the runtime and /dev/shm, which a memory-backed
    emptyDir charges to the pod.
    /dev/shm: an eighth of the pod's memory, 4–32 GiB; Ray's object store gets all but 2 GiB of it
    so Ray does not fall back to /tmp.
    `model_bytes` None (a model we have no facts for) skips the memory floor.
    """
    if not instance.has_gpu:
        raise setting.refuse(instance.name, "a GPU instance type", "Ray workers run the vLLM engines")
    cpus = instance.vcpus - NODE_RESERVED_CPUS
    placement_group_cpus = instance.gpus * PLACEMENT_GROUP_CPUS_PER_GPU
    if cpus - placement_group_cpus < MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS:
        needed = placement_group_cpus + MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS + NODE_RESERVED_CPUS
        raise setting.refuse(
            instance.name, f"a type with at least {needed} vCPUs",
            f"{instance.vcpus} vCPUs leave {cpus - placement_group_cpus} beside {instance.gpus} engine placement "
            f"group CPU(s); Ray Serve LLM initialization hangs without spare CPUs (ray#59764)")

    hugepages_mib = EFA_HUGEPAGES_2MI * HUGEPAGE_2MI_MIB if instance.efa_capable else 0
    memory_gib = instance.memory_gib - math.ceil(instance.memory_gib * NODE_RESERVED_MEMORY_FRACTION) \
        - NODE_RESERVED_MEMORY_GIB - math.ceil(hugepages_mib / 1024)
    shm_gib = min(MAX_SHM_GIB, max(MIN_SHM_GIB, memory_gib // 8))
    checkpoint_gib = math.ceil(model_bytes / GIB) if model_bytes else 0
    needed_gib = 2 * checkpoint_gib + WORKER_RUNTIME_MEMORY_GIB + shm_gib
    if memory_gib < needed_gib:
        raise setting.refuse(
            instance.name, f"a type whose worker pod gets at least {needed_gib} GiB",
            f"the {checkpoint_gib} GiB checkpoint needs 2 × {checkpoint_gib} GiB (page cache + load) + "
            f"{WORKER_RUNTIME_MEMORY_GIB} GiB runtime + {shm_gib} GiB /dev/shm; a {instance.memory_gib} GiB node "
            f"leaves the pod {memory_gib} GiB")
    return WorkerResources(
        cpus=cpus,
        memory_gib=memory_gib,
        gpus=instance.gpus,
        efa_interfaces=instance.efa_interfaces,
        hugepages_2mi_mib=hugepages_mib,
        shm_gib=shm_gib,
        object_store_gib=shm_gib - SHM_RESERVED_FOR_ENGINE_GIB,
    )
