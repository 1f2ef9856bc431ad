"""The DaemonSets that pull the Ray image onto every GPU node as soon as it joins, and onto every system
node for the Ray head (the same image: its Serve controller builds the app), as plain data.

An init container from the Ray image exits at once (only its pull matters); a pause container then
keeps the pod, and so the image, in use: the kubelet's image garbage collector removes only images
no container uses. Nothing here is privileged or mounts anything: it runs in the device plugins'
namespace, beside them, and needs no serving namespace, no KubeRay and no device plugin.

Why not a faster snapshotter (lazy pulling, e.g. SOCI or seekable-OCI): nothing in docs/SOURCES.md
says the EKS AL2023 NVIDIA AMI ships or supports one with managed node groups, and a lazy pull
moves the wait into the engine's first reads of the image (CUDA and PyTorch libraries), which a
serving start reads almost entirely. A complete pull ahead of time is the change we can state.
"""

from __future__ import annotations

from typing import Any, Literal

from components.scheduling import DEVICE_PLUGIN_NAMESPACE, GPU_NODE_SELECTOR, GPU_TOLERATION, SYSTEM_NODE_SELECTOR

PrePullNodes = Literal["gpu", "system"]
# By the nodes each pulls onto: the DaemonSet's name in Kubernetes and in the graph (the plan finds the GPU
# nodes' one by it); that one is the name every stack has had since the first release.
PREPULL_NAMES: dict[PrePullNodes, str] = {"gpu": "ray-image-prepull", "system": "ray-image-prepull-system"}
PREPULL_NAMESPACE = DEVICE_PLUGIN_NAMESPACE
# The Kubernetes project's pause image (registry.k8s.io; 3.10 is the release kubeadm pins for
# Kubernetes 1.31 and later): a few hundred KB that sleeps and does nothing else.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# Any unprivileged uid: neither container writes anything.
NOBODY_UID = 65534

_LOCKED_DOWN = {
    "runAsNonRoot": True,
    "runAsUser": NOBODY_UID,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
_TINY = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}


def image_prepull_manifest(ray_image: str, nodes: PrePullNodes = "gpu") -> dict[str, Any]:
    """The pre-pull DaemonSet (apps/v1) for `ray_image` on the GPU nodes or on the system nodes."""
    name = PREPULL_NAMES[nodes]
    labels = {"app.kubernetes.io/name": name}
    placement: dict[str, Any] = {"nodeSelector": dict(GPU_NODE_SELECTOR), "tolerations": [dict(GPU_TOLERATION)]} \
        if nodes == "gpu" else {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": PREPULL_NAMESPACE, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    **placement,
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                                        "runAsUser": NOBODY_UID, "runAsGroup": NOBODY_UID},
                    "initContainers": [{
                        "name": "pull-ray-image",
                        "image": ray_image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["true"],
                        "securityContext": dict(_LOCKED_DOWN),
                        "resources": _TINY,
                    }],
                    "containers": [{
                        "name": "hold",
                        "image": PAUSE_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "securityContext": dict(_LOCKED_DOWN),
                        "resources": _TINY,
                    }],
                },
            },
        },
    }
