"""Cluster add-ons: the GPU and EFA device plugins and the KubeRay operator (Helm), and the Ray image
pre-pull DaemonSet on the GPU nodes.

Each is a `k8s.helm.v3.Release` at a pinned chart version (defaults in `facts/charts.py`) through the
cluster's explicit provider; the values come from `components/manifests/helm_values.py`. Releases are atomic: a
failed install or upgrade rolls back instead of leaving a half-installed chart, and `pulumi up`
fails visibly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.manifests.helm_values import (
    efa_device_plugin_values,
    kuberay_operator_values,
    nvidia_device_plugin_values,
)
from components.manifests.image_prepull import PrePullNodes, image_prepull_manifest
from components.manifests.serving_namespace import kuberay_namespace_manifest
from components.scheduling import DEVICE_PLUGIN_NAMESPACE
from facts.charts import EFA_DEVICE_PLUGIN, KUBERAY_OPERATOR, NVIDIA_DEVICE_PLUGIN, HelmChart

# Seconds Helm waits for each release's workloads to become ready: image pulls on fresh nodes
# take a minute or two; past this the atomic release rolls back.
HELM_TIMEOUT_SECONDS = 600
HELM_MAX_HISTORY = 5


def explicit_dependencies(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """A component's `depends_on`, to hand to the children that really wait on it: Pulumi does not
    pass a parent's dependencies on to its children."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    if not isinstance(depends_on, Sequence):
        raise TypeError("depends_on must be a resource or a list of them to be handed on to children")
    return [dep for dep in depends_on if isinstance(dep, pulumi.Resource)]


def helm_release(resource_name: str, chart: HelmChart, version: str, namespace: pulumi.Input[str],
                 values: pulumi.Input[Mapping[str, Any]], opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """`chart` at `version`, atomic, through the provider in `opts`."""
    return k8s.helm.v3.Release(
        resource_name,
        k8s.helm.v3.ReleaseArgs(
            # The Helm release name is the chart name, so `helm list -A` reads plainly.
            name=chart.name,
            chart=chart.name,
            version=version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
            namespace=namespace,
            values=values,
            atomic=True,
            cleanup_on_fail=True,
            timeout=HELM_TIMEOUT_SECONDS,
            max_history=HELM_MAX_HISTORY,
        ),
        opts=opts,
    )


@dataclass(frozen=True)
class GpuDevicePluginsArgs:
    """Inputs of `GpuDevicePlugins`.

    provider: the cluster's Kubernetes provider (every release goes through it).
    nvidia_chart_version / efa_chart_version: chart versions to pin; defaults in facts/charts.py.
    """

    provider: k8s.Provider
    nvidia_chart_version: str = NVIDIA_DEVICE_PLUGIN.default_version
    efa_chart_version: str = EFA_DEVICE_PLUGIN.default_version


class GpuDevicePlugins(pulumi.ComponentResource):
    """NVIDIA and AWS EFA device plugins as DaemonSets on the GPU nodes only.

    EKS GPU node images carry the drivers but not the device plugins; without them the kubelet never
    advertises `nvidia.com/gpu` or `vpc.amazonaws.com/efa` and the Ray workers stay Pending. Pass the
    GPU node group in `opts.depends_on`: Helm waits for the DaemonSets to be ready on those nodes.
    """

    nvidia: k8s.helm.v3.Release
    efa: k8s.helm.v3.Release

    def __init__(self, name: str, args: GpuDevicePluginsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:addons:GpuDevicePlugins", name, None, opts)
        # The DaemonSets wait for the GPU nodes (the component's depends_on) to be Ready under Helm.
        child = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=explicit_dependencies(opts))
        self.nvidia = helm_release(
            f"{name}-nvidia", NVIDIA_DEVICE_PLUGIN, args.nvidia_chart_version,
            DEVICE_PLUGIN_NAMESPACE, nvidia_device_plugin_values(), child)
        self.efa = helm_release(
            f"{name}-efa", EFA_DEVICE_PLUGIN, args.efa_chart_version,
            DEVICE_PLUGIN_NAMESPACE, efa_device_plugin_values(), child)
        self.register_outputs({"nvidia_status": self.nvidia.status, "efa_status": self.efa.status})


@dataclass(frozen=True)
class KubeRayOperatorArgs:
    """Inputs of `KubeRayOperator`.

    provider: the cluster's Kubernetes provider.
    chart_version: `kuberay-operator` chart version; must match the RayService CRD the stack
    validates against (facts/charts.py).
    """

    provider: k8s.Provider
    chart_version: str = KUBERAY_OPERATOR.default_version


class KubeRayOperator(pulumi.ComponentResource):
    """The KubeRay operator (and its CRDs) on the system nodes, in its own `restricted` namespace.

    The namespace is created here rather than by Helm so it carries Pod Security labels: the
    operator's pod already meets `restricted`, and nothing privileged belongs beside it.
    Helm installs the chart's CRDs on first install only; a chart upgrade does not update them.
    """

    namespace: k8s.core.v1.Namespace
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: KubeRayOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:addons:KubeRayOperator", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        body = kuberay_namespace_manifest()
        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata=body["metadata"], opts=child)
        # Installing into the namespace's output name orders the release after the namespace; the
        # operator pod waits for the system nodes (the component's depends_on).
        self.release = helm_release(
            name, KUBERAY_OPERATOR, args.chart_version, self.namespace.metadata.name,
            kuberay_operator_values(),
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=explicit_dependencies(opts))))
        self.register_outputs({"namespace": self.namespace.metadata.name, "status": self.release.status})



@dataclass(frozen=True)
class RayImagePrePullArgs:
    """Inputs of `RayImagePrePull`.

    provider: the cluster's Kubernetes provider.
    ray_image: the image the RayService runs (resolved and pinned by the settings).
    nodes: "gpu" (the Ray workers' nodes) or "system" (the Ray head's).
    """

    provider: k8s.Provider
    ray_image: str
    nodes: PrePullNodes = "gpu"


# How long `pulumi up` waits for the pre-pull DaemonSet to be ready. pulumi-kubernetes waits 10 minutes
# for a DaemonSet unless told otherwise; a Ray LLM image of tens of GB on a node that has just joined
# (its NVMe array still fresh) can take longer, and a timeout fails the update with the pull half done.
IMAGE_PULL_AWAIT = "30m"


class RayImagePrePull(pulumi.ComponentResource):
    """The Ray image pulled onto each GPU node as it joins, or onto each system node for the Ray head
    (components/manifests/image_prepull.py).

    Pass the node group in `opts.depends_on`; it runs in parallel with the device plugins and KubeRay.
    `pulumi up` waits for the DaemonSet to be ready, i.e. for the image to be on every node of the
    group, so the RayService that depends on it starts without a pull.
    """

    daemon_set: k8s.apps.v1.DaemonSet

    def __init__(self, name: str, args: RayImagePrePullArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:addons:RayImagePrePull", name, None, opts)
        body = image_prepull_manifest(args.ray_image, args.nodes)
        self.daemon_set = k8s.apps.v1.DaemonSet(
            name, metadata=body["metadata"], spec=body["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=explicit_dependencies(opts),
                                        custom_timeouts=pulumi.CustomTimeouts(
                                            create=IMAGE_PULL_AWAIT, update=IMAGE_PULL_AWAIT)))
        self.register_outputs({"name": self.daemon_set.metadata.name})
