"""Values for the Helm charts this stack installs (keys as in each chart's values.yaml at its pin)."""

from __future__ import annotations

from typing import Any

from components.scheduling import GPU_NODE_SELECTOR, GPU_TOLERATION, SYSTEM_NODE_SELECTOR


def _gpu_nodes_only_affinity() -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{
                    "matchExpressions": [
                        {"key": key, "operator": "In", "values": [value]}
                        for key, value in GPU_NODE_SELECTOR.items()
                    ],
                }],
            },
        },
    }


def nvidia_device_plugin_values() -> dict[str, Any]:
    """Values for the `nvidia-device-plugin` chart (keys as in its values.yaml at 0.20.0).

    The chart's default affinity requires Node Feature Discovery labels (pci-10de.present or
    nvidia.com/gpu.present) that EKS nodes do not carry without NFD, so it is replaced by the GPU
    role; Helm merges maps, so only replacing the list inside works.
    """
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "affinity": _gpu_nodes_only_affinity(),
        "tolerations": [dict(GPU_TOLERATION)],
    }


def efa_device_plugin_values() -> dict[str, Any]:
    """Values for the `aws-efa-k8s-device-plugin` chart (keys as in its values.yaml at v0.5.30).

    The chart itself restricts the DaemonSet to EFA-capable instance types by node affinity.
    """
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "tolerations": [dict(GPU_TOLERATION)],
    }


def kuberay_operator_values() -> dict[str, Any]:
    """Values for the `kuberay-operator` chart (keys as in its values.yaml at 1.7.0)."""
    return {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)}
