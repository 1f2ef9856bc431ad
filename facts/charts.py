"""Helm charts this stack installs: where each comes from and the version it pins by default.

Pinned, never "latest": a chart release can change its values keys (the NVIDIA chart's default
node affinity did) and a floating version would change a running cluster on the next `pulumi up`.
Each pin was read from the chart repository's published `index.yaml` and the chart source at that
version; `checked` says when. Revisit by reading the same two places, then adjust the values
builders in `components/manifests.py` if the chart's values keys moved.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HelmChart:
    name: str
    repository: str
    default_version: str
    app_version: str
    source: str
    checked: str


KUBERAY_OPERATOR = HelmChart(
    name="kuberay-operator",
    repository="https://ray-project.github.io/kuberay-helm/",
    default_version="1.7.0",
    app_version="v1.7.0",
    source=("KubeRay chart values at 1.7.0 (image quay.io/kuberay/operator:v1.7.0) and the RayService "
            "CRD, kept as test data in tests/data/kuberay-v1.7.0/; docs/SOURCES.md#kuberay (latest release)."),
    checked="2026-11",
)

NVIDIA_DEVICE_PLUGIN = HelmChart(
    name="nvidia-device-plugin",
    repository="https://nvidia.github.io/k8s-device-plugin",
    default_version="0.20.0",
    app_version="0.20.0",
    source=("github.com/NVIDIA/k8s-device-plugin: gh-pages index.yaml lists nvidia-device-plugin 0.20.0 "
            "(created 2026-08-20, newest; 0.19.3 before it); deployments/helm/nvidia-device-plugin/"
            "values.yaml at tag v0.20.0 (keys nodeSelector, affinity, tolerations)."),
    checked="2026-11",
)

EFA_DEVICE_PLUGIN = HelmChart(
    name="aws-efa-k8s-device-plugin",
    repository="https://aws.github.io/eks-charts",
    # The chart's own version string carries the "v" (Chart.yaml `version: v0.5.30`).
    default_version="v0.5.30",
    app_version="v0.5.20",
    source=("github.com/aws/eks-charts: gh-pages index.yaml lists aws-efa-k8s-device-plugin v0.5.30 "
            "(appVersion v0.5.20, newest, 2026-08-03); stable/aws-efa-k8s-device-plugin/values.yaml "
            "(keys nodeSelector, tolerations; g6.8xlarge is in supportedInstanceLabels)."),
    checked="2026-11",
)
