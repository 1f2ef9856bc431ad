"""The monitoring namespace's own objects, as plain data: the namespace, the PodMonitor that has
Prometheus scrape every Ray node of the RayService, and the ConfigMap that carries the PD dashboard
(dashboards/pd.json) to Grafana's sidecar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.compile_cache import METRICS_PORT_NAME as COMPILE_CACHE_METRICS_PORT_NAME
from components.config.serving import ServingSettings
from components.manifests.helm_values import DASHBOARD_LABEL, DASHBOARD_LABEL_VALUE, GPU_SCRAPE_INTERVAL
from components.manifests.prometheus_rules import ray_pod_monitor_name
from components.manifests.ray_service import ray_pod_labels
from components.manifests.serving_namespace import namespace_manifest
from components.project import find_project_dir
from components.scheduling import MONITORING_NAMESPACE
from facts.metrics import RAY_METRICS_PORT_NAME

# dashboards/pd.json, in the project directory (not installed with the packages).
PD_DASHBOARD_PATH = Path("dashboards", "pd.json")
POD_MONITOR_API_VERSION = "monitoring.coreos.com/v1"


def monitoring_namespace_manifest() -> dict[str, Any]:
    """`baseline`: nothing in it needs host access (node-exporter runs in kube-system)."""
    return namespace_manifest(MONITORING_NAMESPACE, "baseline")


def ray_pod_monitor_manifest(serving: ServingSettings) -> dict[str, Any]:
    """Scrape the `metrics` port of every head and worker pod of the RayService (KubeRay's own
    PodMonitor examples split head and workers; one is enough when both export on one port).
    `honorLabels` keeps Ray's own labels (its `Component`, `NodeAddress`, …) when they clash with
    the target's."""
    return {
        "apiVersion": POD_MONITOR_API_VERSION,
        "kind": "PodMonitor",
        "metadata": {"name": ray_pod_monitor_name(serving), "namespace": MONITORING_NAMESPACE},
        "spec": {
            "namespaceSelector": {"matchNames": [serving.namespace]},
            "selector": {"matchLabels": ray_pod_labels(serving.name)},
            "podMetricsEndpoints": [{
                "port": RAY_METRICS_PORT_NAME,
                "interval": GPU_SCRAPE_INTERVAL,
                "honorLabels": True,
                "relabelings": [{"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_label_ray_io_node_type"],
                                 "targetLabel": "ray_node_type"}],
            }, *([{"port": COMPILE_CACHE_METRICS_PORT_NAME, "interval": GPU_SCRAPE_INTERVAL}]
                 if serving.ray_service.compile_cache_in_s3 else [])],
        },
    }


def pd_dashboard() -> dict[str, Any]:
    return json.loads((find_project_dir() / PD_DASHBOARD_PATH).read_text())


def dashboard_config_map_manifest() -> dict[str, Any]:
    """The PD dashboard for Grafana's sidecar (it watches ConfigMaps with the dashboard label)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "eks-pd-llm-dashboard", "namespace": MONITORING_NAMESPACE,
                     "labels": {DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE}},
        "data": {PD_DASHBOARD_PATH.name: json.dumps(pd_dashboard(), indent=1, sort_keys=True)},
    }
