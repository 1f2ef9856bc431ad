"""Values for the Helm charts this stack installs (keys as in each chart's values.yaml at its pin)."""

from __future__ import annotations

from typing import Any

from components.config.observability import ObservabilitySettings
from components.scheduling import (
    DEVICE_PLUGIN_NAMESPACE,
    GPU_NODE_SELECTOR,
    GPU_TOLERATION,
    MONITORING_NAMESPACE,
    SCRAPER_POD_LABELS,
    SYSTEM_NODE_SELECTOR,
)
from facts.charts import CLUSTER_AUTOSCALER_IMAGE, CLUSTER_AUTOSCALER_RELEASE_FOR_KUBERNETES

# Grafana's dashboard sidecar loads ConfigMaps with this label (kube-prometheus-stack's defaults,
# pinned here so the dashboard ConfigMap and the sidecar cannot drift apart).
DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"


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


def kube_prometheus_stack_values(observability: ObservabilitySettings, storage_class: str, *,
                                 keep_volume: bool = False) -> dict[str, Any]:
    """Values for the `kube-prometheus-stack` chart (keys: facts/charts.py KUBE_PROMETHEUS_STACK).

    Everything on the system nodes, except node-exporter, which the chart runs on every node (its
    default toleration takes any NoSchedule taint, the GPU nodes' included) and which goes to
    kube-system: it needs the host's network, PID namespace and root filesystem, which the
    monitoring namespace's `baseline` Pod Security level refuses. Prometheus selects every
    PodMonitor, ServiceMonitor and PrometheusRule (not only those labelled for this release), keeps
    its TSDB on an encrypted gp3 volume and carries the label the serving namespace's
    NetworkPolicy admits to the Ray metrics port. Grafana's sidecar loads dashboards from labelled
    ConfigMaps in the monitoring namespace only. The Grafana admin password is left to the chart:
    40 random characters in the `kube-prometheus-stack-grafana` Secret, kept across upgrades.
    Prometheus's volume claim goes with its StatefulSet (`persistentVolumeClaimRetentionPolicy`;
    docs/SOURCES.md#prometheus-volume-retention) unless `keep_volume` (deletionProtection): a
    StatefulSet's claims otherwise outlive it, and `pulumi destroy` would leave a billed EBS volume.
    """
    system = dict(SYSTEM_NODE_SELECTOR)
    return {
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "defaultRules": {"rules": {"etcd": False, "kubeControllerManager": False, "kubeSchedulerAlerting": False,
                                   "kubeSchedulerRecording": False, "kubeProxy": False}},
        "prometheusOperator": {"nodeSelector": system, "admissionWebhooks": {"patch": {"nodeSelector": system}}},
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": system}},
        "kube-state-metrics": {"nodeSelector": system},
        "prometheus-node-exporter": {"namespaceOverride": DEVICE_PLUGIN_NAMESPACE},
        "grafana": {
            "nodeSelector": system,
            "sidecar": {"dashboards": {"label": DASHBOARD_LABEL, "labelValue": DASHBOARD_LABEL_VALUE,
                                       "searchNamespace": MONITORING_NAMESPACE}},
        },
        "prometheus": {"prometheusSpec": {
            "nodeSelector": system,
            "podMetadata": {"labels": dict(SCRAPER_POD_LABELS)},
            "retention": observability.retention,
            "retentionSize": observability.retention_size,
            "storageSpec": {"volumeClaimTemplate": {"spec": {
                "storageClassName": storage_class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{observability.storage_gib}Gi"}},
            }}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain" if keep_volume else "Delete",
                                                     "whenScaled": "Retain"},
            "podMonitorSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,
        }},
    }


# Ray exports fresh values every few seconds; 15 s (the DCGM chart's default too) keeps [1m] rates
# at four samples.
GPU_SCRAPE_INTERVAL = "15s"


def dcgm_exporter_values() -> dict[str, Any]:
    """Values for NVIDIA's `dcgm-exporter` chart (keys: facts/charts.py DCGM_EXPORTER): on the GPU
    nodes only, scraped through the ServiceMonitor the chart makes (kube-prometheus-stack's CRD)."""
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "tolerations": [dict(GPU_TOLERATION)],
        "serviceMonitor": {"enabled": True, "interval": GPU_SCRAPE_INTERVAL},
    }


def _auto_discovery_tags(cluster_name: str, node_group_name: str) -> list[str]:
    return ["k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cluster_name}",
            f"eks:nodegroup-name={node_group_name}"]


def cluster_autoscaler_values(*, cluster_name: str, region: str, kubernetes_version: str,
                              node_group_names: tuple[str, ...], service_account: str, role_arn: Any) -> dict[str, Any]:
    """Values for the `cluster-autoscaler` chart (keys as in its values.yaml at 9.59.0).

    It discovers only the Auto Scaling groups of `node_group_names`: EKS tags a managed node group's
    ASG with the cluster-autoscaler tags and eks:nodegroup-name, and `asg:tag=` takes key=value pairs
    that must all match (cluster-autoscaler/cloudprovider/aws/README.md, "Auto-discovery setup"). So
    each group is one discovery spec: the first is the chart's autoDiscovery.tags, a further one a
    repeated --node-group-auto-discovery flag (extraArgs ignores a key's text after its first `_`,
    the chart's way to repeat a flag). Its image is the release for the cluster's Kubernetes minor
    version. `role_arn` may be a Pulumi output.
    """
    first, *more = node_group_names
    further = {f"node-group-auto-discovery_{index}": "asg:tag=" + ",".join(_auto_discovery_tags(cluster_name, name))
               for index, name in enumerate(more, start=2)}
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {
            "clusterName": cluster_name,
            "tags": _auto_discovery_tags(cluster_name, first),
        },
        **({"extraArgs": further} if further else {}),
        "image": {
            "repository": CLUSTER_AUTOSCALER_IMAGE,
            "tag": CLUSTER_AUTOSCALER_RELEASE_FOR_KUBERNETES[kubernetes_version],
        },
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "rbac": {"serviceAccount": {
            "name": service_account,
            "annotations": {"eks.amazonaws.com/role-arn": role_arn},
        }},
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
