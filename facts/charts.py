"""Helm charts this stack installs: where each comes from and the version it pins by default.

Pinned, never "latest": a chart release can change its values keys (the NVIDIA chart's default
node affinity did) and a floating version would change a running cluster on the next `pulumi up`.
Each pin was read from the chart repository's published `index.yaml` and the chart source at that
version; `checked` says when. Revisit by reading the same two places, then adjust the values
builders in `components/manifests/helm_values.py` if the chart's values keys moved.

`values_keys` lists every values path (dotted; a subchart's keys under its name) the stack sets,
each read in the chart's values.yaml at `default_version` (or its subchart's at the version the
chart's Chart.yaml pins): a test holds the values builders to this list, so a key not checked
against the chart cannot slip in. Below a listed path the value is free-form for the chart (a
node selector, a volume claim template).
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
    values_keys: tuple[str, ...] = ()
    # Other versions read in the chart repository's index.yaml on `checked` (the default is one too).
    other_versions: tuple[str, ...] = ()

    @property
    def recorded_versions(self) -> tuple[str, ...]:
        """The versions known offline to exist; the plan warns about any other (facts/charts.py)."""
        return (self.default_version, *self.other_versions)


KUBERAY_OPERATOR = HelmChart(
    name="kuberay-operator",
    repository="https://ray-project.github.io/kuberay-helm/",
    default_version="1.7.0",
    app_version="v1.7.0",
    source=("KubeRay chart values at 1.7.0 (image quay.io/kuberay/operator:v1.7.0) and the RayService "
            "CRD, kept as test data in tests/data/kuberay-v1.7.0/; docs/SOURCES.md#kuberay (latest release)."),
    checked="2026-11",
    values_keys=("nodeSelector",),
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
    values_keys=("nodeSelector", "affinity", "tolerations"),
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
    values_keys=("nodeSelector", "tolerations"),
)

KUBE_PROMETHEUS_STACK = HelmChart(
    name="kube-prometheus-stack",
    repository="https://prometheus-community.github.io/helm-charts",
    default_version="88.5.3",
    app_version="v0.93.1",  # the Prometheus Operator's version
    source=("github.com/prometheus-community/helm-charts tag kube-prometheus-stack-88.5.3 (newest tag of "
            "the chart in the repository as read, 2026-08-22): charts/kube-prometheus-stack/Chart.yaml "
            "(appVersion v0.93.1; subcharts kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1, "
            "grafana 12.11.1 from grafana-community/helm-charts) and values.yaml; grafana's keys from "
            "grafana-community/helm-charts tag grafana-12.11.1 charts/grafana/values.yaml, kube-state-metrics' "
            "from tag kube-state-metrics-8.4.0."),
    checked="2026-12",
    values_keys=(
        # EKS runs the control plane: these components cannot be scraped, and their default
        # ServiceMonitors and rules would only raise TargetDown alerts.
        "kubeControllerManager.enabled", "kubeScheduler.enabled", "kubeEtcd.enabled", "kubeProxy.enabled",
        "defaultRules.rules.etcd", "defaultRules.rules.kubeControllerManager",
        "defaultRules.rules.kubeSchedulerAlerting", "defaultRules.rules.kubeSchedulerRecording",
        "defaultRules.rules.kubeProxy",
        "prometheusOperator.nodeSelector", "prometheusOperator.admissionWebhooks.patch.nodeSelector",
        "alertmanager.alertmanagerSpec.nodeSelector",
        "kube-state-metrics.nodeSelector",  # kube-state-metrics 8.4.0 values.yaml
        "prometheus-node-exporter.namespaceOverride",
        "grafana.nodeSelector",  # grafana 12.11.1 values.yaml
        "grafana.sidecar.dashboards.label", "grafana.sidecar.dashboards.labelValue",
        "grafana.sidecar.dashboards.searchNamespace",
        "prometheus.prometheusSpec.nodeSelector", "prometheus.prometheusSpec.podMetadata",
        "prometheus.prometheusSpec.retention", "prometheus.prometheusSpec.retentionSize",
        "prometheus.prometheusSpec.storageSpec",
        "prometheus.prometheusSpec.podMonitorSelectorNilUsesHelmValues",
        "prometheus.prometheusSpec.serviceMonitorSelectorNilUsesHelmValues",
        "prometheus.prometheusSpec.ruleSelectorNilUsesHelmValues",
        # Exposed since prometheus-community/helm-charts#4570 (the Prometheus CRD field since
        # prometheus-operator#6038).
        "prometheus.prometheusSpec.persistentVolumeClaimRetentionPolicy",
    ),
)

DCGM_EXPORTER = HelmChart(
    name="dcgm-exporter",
    repository="https://nvidia.github.io/dcgm-exporter/helm-charts",
    default_version="4.8.2",
    app_version="4.8.2",  # image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless (DCGM 4.5.3)
    source=("github.com/NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 (newest tag as read, 2026-05-12): "
            "deployment/Chart.yaml (version 4.8.2) and deployment/values.yaml (serviceMonitor on by default, "
            "SYS_ADMIN for the profiling metrics, default tolerations only the control-plane taint); metric "
            "names from etc/default-counters.csv."),
    checked="2026-12",
    values_keys=("nodeSelector", "tolerations", "serviceMonitor.enabled", "serviceMonitor.interval"),
)

CLUSTER_AUTOSCALER = HelmChart(
    name="cluster-autoscaler",
    repository="https://kubernetes.github.io/autoscaler",
    default_version="9.59.0",
    app_version="1.35.0",
    source=("github.com/kubernetes/autoscaler tag cluster-autoscaler-chart-9.59.0 (2026-07-21, newest): "
            "cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml (appVersion 1.35.0) and values.yaml, "
            "kept as test data in tests/data/cluster-autoscaler-9.59.0/; docs/SOURCES.md#cluster-autoscaler."),
    checked="2026-11",
)

AWS_LOAD_BALANCER_CONTROLLER = HelmChart(
    name="aws-load-balancer-controller",
    repository="https://aws.github.io/eks-charts",
    default_version="3.5.0",
    app_version="v3.5.0",
    source=("github.com/aws/eks-charts stable/aws-load-balancer-controller at commit 5239609 (2026-08-03, "
            "newest): Chart.yaml (version 3.5.0, appVersion v3.5.0) and values.yaml, kept as test data in "
            "tests/data/aws-load-balancer-controller-3.5.0/; its IAM policy is the controller's own install "
            "guide's iam_policy.json at tag v3.5.0 (bootstrap/aws_load_balancer_controller_policy.json); "
            "docs/SOURCES.md#front-door."),
    checked="2026-12",
    values_keys=("clusterName", "region", "vpcId", "serviceAccount.name", "serviceAccount.annotations",
                 "nodeSelector", "replicaCount", "enableServiceMutatorWebhook"),
)

# The Cluster Autoscaler release for each Kubernetes minor version: its versions match Kubernetes
# minors and it is meant for the control plane of the same minor (cluster-autoscaler/README.md,
# "Releases", at tag cluster-autoscaler-1.35.2); the newest
# patch of each minor, read from the repository's cluster-autoscaler-1.<minor>.<patch> tags (2026-11).
CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_RELEASE_FOR_KUBERNETES = {
    "1.32": "v1.32.7",
    "1.33": "v1.33.6",
    "1.34": "v1.34.5",
    "1.35": "v1.35.2",
}
