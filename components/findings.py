"""Findings: what a stack deploys without error but should not, as it stands. Each is one line that
starts with the setting to change; the preview warns about each and `pdctl plan --strict` fails.

- GPUs a worker pod takes but no engine uses: each phase's pods own whole nodes, so a replica of
  1 GPU on an 8-GPU node leaves 7 billed and idle;
- GPU nodes no replica uses at the fewest replicas;
- a Helm chart version not recorded offline (facts/charts.py): Helm would refuse one that does not
  exist only at install, minutes into `pulumi up`, with the cluster and GPU nodes already billed;
- a gated model with no hfToken: the engines would fail to download it on the GPU nodes.
"""

from __future__ import annotations

from components.config.charts import ChartSettings
from components.config.serving import ServingSettings
from facts.charts import (
    CLUSTER_AUTOSCALER,
    DCGM_EXPORTER,
    EFA_DEVICE_PLUGIN,
    KUBE_PROMETHEUS_STACK,
    KUBERAY_OPERATOR,
    NVIDIA_DEVICE_PLUGIN,
    HelmChart,
)
from serve_app.settings import ServeAppSettings, engine_setting

# ChartSettings' fields → the chart each pins.
CHART_OF_SETTING: dict[str, HelmChart] = {
    "kuberay": KUBERAY_OPERATOR,
    "nvidia_device_plugin": NVIDIA_DEVICE_PLUGIN,
    "efa_device_plugin": EFA_DEVICE_PLUGIN,
    "kube_prometheus_stack": KUBE_PROMETHEUS_STACK,
    "dcgm_exporter": DCGM_EXPORTER,
    "cluster_autoscaler": CLUSTER_AUTOSCALER,
}


def stack_findings(serving: ServingSettings, charts: ChartSettings) -> tuple[str, ...]:
    return (*idle_gpus(serving), *idle_nodes(serving), *unrecorded_charts(charts), *gated_without_token(serving))


def idle_gpus(serving: ServingSettings) -> list[str]:
    """Per phase: GPUs its worker pods take (whole nodes) beyond what its engines use at the fewest
    replicas."""
    found = []
    app = serving.app.config
    for spec in serving.node_groups:
        instance = spec.target.instance
        for phase in spec.phases:
            engine = app.engine_for(phase)
            nodes = serving.app.nodes[phase]
            taken = nodes.min_nodes * instance.gpus
            used = app.phase(phase).replicas.min_replicas * engine.gpus_per_replica
            if taken > used:
                found.append(
                    f"{engine_setting(app, phase, 'tensor_parallel_size')}: {phase} engines use {used} of the "
                    f"{taken} GPUs the {phase} pods take on {nodes.min_nodes} × {instance.name} ({taken - used} idle); "
                    f"raise it (or the {phase} replicas) to fill the node, or pick a type with fewer GPUs")
    return found


def idle_nodes(serving: ServingSettings) -> list[str]:
    """Per GPU node group: nodes no replica takes at the fewest replicas."""
    found = []
    for spec in serving.node_groups:
        target = spec.target
        needed = sum(serving.app.nodes[phase].min_nodes for phase in spec.phases)
        if target.node_count > needed:
            found.append(f"{target.settings.count.key}: {target.node_count - needed} of {target.node_count} "
                         f"{target.instance.name} nodes run no replica; lower it to {needed}")
    return found


def unrecorded_charts(charts: ChartSettings) -> list[str]:
    found = []
    for field, chart in CHART_OF_SETTING.items():
        version = getattr(charts, field)
        if version not in chart.recorded_versions:
            found.append(
                f"{charts.key(field)}: {version} is not a {chart.name} version recorded offline "
                f"({', '.join(chart.recorded_versions)}, read {chart.checked}); check {chart.repository} "
                "(Helm refuses a missing one only at install, minutes into `pulumi up`)")
    return found


def gated_without_token(serving: ServingSettings) -> list[str]:
    if serving.model_gated and not serving.hf_token_configured:
        source = serving.app.config.model.model_source
        return [f"hfToken: {source} is gated and no token is set; the engines cannot download it "
                f"(pulumi config set --secret hfToken <token>, or set {ServeAppSettings.key('model_source')} "
                "to an open model)"]
    return []
