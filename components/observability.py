"""Metrics, dashboards and alerts for the PD endpoint, as part of the stack.

Collection runs in the cluster: kube-prometheus-stack (Prometheus Operator, Prometheus,
Alertmanager, Grafana, kube-state-metrics, node-exporter) on the system nodes, NVIDIA's DCGM
exporter on the GPU nodes, and a PodMonitor for the Ray nodes' metrics port. Why in-cluster rather
than Amazon Managed Service for Prometheus with its managed collector, in dev and prod alike
(docs/OBSERVABILITY.md says more): the serving namespace's NetworkPolicies must admit exactly the
scraper, and only a pod can be named by a NetworkPolicy — the managed collector scrapes from ENIs
in the cluster's subnets, which share their CIDRs with every pod, so admitting it by ipBlock would
admit every pod; and the dashboards and rules are provisioned by the same `pulumi up`, checked
offline by promtool, without an Amazon Managed Grafana workspace and its IAM Identity Center.

Order: the chart's CRDs come with its release, so the DCGM exporter (its ServiceMonitor), the
PodMonitor and the PrometheusRule wait for it; the release waits for the system nodes and the
StorageClass Prometheus's volume is claimed from; the DCGM exporter waits for the GPU nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies, helm_release
from components.config.charts import ChartSettings
from components.config.observability import ObservabilitySettings
from components.config.serving import ServingSettings
from components.manifests.helm_values import dcgm_exporter_values, kube_prometheus_stack_values
from components.manifests.monitoring import (
    dashboard_config_map_manifest,
    monitoring_namespace_manifest,
    ray_pod_monitor_manifest,
)
from components.manifests.prometheus_rules import omitted_alerts, prometheus_rule_manifest
from components.scheduling import DEVICE_PLUGIN_NAMESPACE
from facts.charts import DCGM_EXPORTER, KUBE_PROMETHEUS_STACK

# The chart's Prometheus Service is `<release>-prometheus`; the operator also makes this headless
# one for every Prometheus, whatever the release is called.
PROMETHEUS_SERVICE = "prometheus-operated"
PROMETHEUS_PORT = 9090
GRAFANA_SERVICE = f"{KUBE_PROMETHEUS_STACK.name}-grafana"  # the grafana subchart's fullname
GRAFANA_PORT = 80


@dataclass(frozen=True)
class ObservabilityArgs:
    """Inputs of `Observability`.

    provider: the cluster's Kubernetes provider.
    observability: retention, volume size and SLOs, validated.
    serving: the serving settings (namespace, RayService name, the checked app and its capacity).
    charts: the pinned chart versions.
    storage_class: the name of the StorageClass Prometheus's volume is claimed from (pass the storage
      component in `opts.depends_on`: the class must exist before the claim).
    gpu_nodes: what the DCGM exporter waits for (the GPU node group and the device plugins).
    keep_volume: keep Prometheus's volume when its StatefulSet goes (deletionProtection); else the
      claim, and so the EBS volume, goes with it.
    """

    provider: k8s.Provider
    observability: ObservabilitySettings
    serving: ServingSettings
    charts: ChartSettings
    storage_class: str
    gpu_nodes: tuple[pulumi.Resource, ...] = ()
    keep_volume: bool = False


class Observability(pulumi.ComponentResource):
    """Monitoring namespace → kube-prometheus-stack → DCGM exporter, Ray PodMonitor, PD rules; the PD
    dashboard ConfigMap beside them.

    Pass the system node group and the storage component in `opts.depends_on`.
    """

    namespace: str
    prometheus_service: str
    grafana_service: str

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:observability:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        body = monitoring_namespace_manifest()
        self.namespace_resource = k8s.core.v1.Namespace(f"{name}-namespace", metadata=body["metadata"], opts=child)

        self.stack_release = helm_release(
            f"{name}-kube-prometheus-stack", KUBE_PROMETHEUS_STACK, args.charts.kube_prometheus_stack,
            self.namespace_resource.metadata.name,
            kube_prometheus_stack_values(args.observability, args.storage_class, keep_volume=args.keep_volume),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=explicit_dependencies(opts))))
        after_stack = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.stack_release]))

        self.dcgm_release = helm_release(
            f"{name}-dcgm-exporter", DCGM_EXPORTER, args.charts.dcgm_exporter, DEVICE_PLUGIN_NAMESPACE,
            dcgm_exporter_values(),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[self.stack_release, *args.gpu_nodes])))

        monitor = ray_pod_monitor_manifest(args.serving)
        self.ray_pod_monitor = k8s.apiextensions.CustomResource(
            f"{name}-ray-pod-monitor", api_version=monitor["apiVersion"], kind=monitor["kind"],
            metadata=monitor["metadata"], spec=monitor["spec"], opts=after_stack)

        rules = prometheus_rule_manifest(args.serving, args.observability)
        self.rules = k8s.apiextensions.CustomResource(
            f"{name}-pd-rules", api_version=rules["apiVersion"], kind=rules["kind"],
            metadata=rules["metadata"], spec=rules["spec"], opts=after_stack)
        for omitted in omitted_alerts(args.serving):
            pulumi.log.warn(f"alert not created: {omitted}", resource=self)

        dashboard = dashboard_config_map_manifest()
        self.dashboard = k8s.core.v1.ConfigMap(
            f"{name}-pd-dashboard", metadata=dashboard["metadata"], data=dashboard["data"],
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace_resource])))

        self.namespace = body["metadata"]["name"]
        self.prometheus_service = PROMETHEUS_SERVICE
        self.grafana_service = GRAFANA_SERVICE
        self.register_outputs({
            "namespace": self.namespace,
            "prometheus_status": self.stack_release.status,
            "dcgm_exporter_status": self.dcgm_release.status,
        })

    def port_forward_commands(self) -> dict[str, str]:
        """`kubectl port-forward` lines for Prometheus (what `pdctl top` reads) and Grafana."""
        return {
            "prometheus": (f"kubectl --namespace {self.namespace} port-forward service/{self.prometheus_service} "
                           f"{PROMETHEUS_PORT}:{PROMETHEUS_PORT}"),
            "grafana": f"kubectl --namespace {self.namespace} port-forward "
                       f"service/{self.grafana_service} 3000:{GRAFANA_PORT}",
        }
