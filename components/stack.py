"""The whole system as one dependency graph: `build_stack(settings, hf_token) -> InferenceStack`.

Order of work:
1. (Before this module: `load_settings` asked EC2 about the region, its AZs by zone ID and the node
   types (components/discovery.py) and picked the GPU AZ and the VPC's AZs; a wrong setting stopped
   there, before any resource.)
2. Network → Cluster → node groups → add-ons → RayService, each waiting on what it really needs:
   the CoreDNS add-on, device plugins, KubeRay and the Ray image pre-pull on the nodes they run on
   (in parallel), the RayService on KubeRay (its CRD), both device plugins (GPU and EFA resources),
   the pre-pulled image and the GPU nodes (with an S3 model mirror, its read-only IAM role too); the
   EBS CSI driver on the system nodes; observability on the system nodes and the StorageClass, its GPU
   exporter on the GPU nodes and device plugins.
`pulumi destroy` walks the same edges backwards, so nothing is left orphaned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pulumi

from components.addons import (
    GpuDevicePlugins,
    GpuDevicePluginsArgs,
    KubeRayOperator,
    KubeRayOperatorArgs,
    RayImagePrePull,
    RayImagePrePullArgs,
)
from components.cluster import Cluster, ClusterArgs, CoreDns, CoreDnsArgs
from components.config.front_door import API_KEYS_KEY, FrontDoor
from components.config.nodes import GpuNodeGroupSpec
from components.config.stack import StackSettings
from components.config.zones import AvailabilityZonePlan
from components.front_door import LOAD_BALANCER_CONTROLLER_POLICY, FrontDoorArgs, FrontDoorNetwork
from components.gcs_store import GcsStore, GcsStoreArgs
from components.inference import GcsStoreConnection, InferenceService, InferenceServiceArgs
from components.manifests.image_prepull import PREPULL_NAMES
from components.model_access import COMPILE_CACHE_POLICY, MODEL_READER_POLICY, ModelReadAccess, ModelReadAccessArgs
from components.network import Network, NetworkArgs
from components.node_autoscaler import CLUSTER_AUTOSCALER_POLICY, ClusterAutoscaler, ClusterAutoscalerArgs
from components.node_groups import (
    GpuFabric,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    SystemNodeGroup,
    SystemNodeGroupArgs,
    gpu_node_group_resource_name,
)
from components.observability import Observability, ObservabilityArgs
from components.storage import BlockStorage, BlockStorageArgs
from front_door.keys import KEY_TABLE_FILE, key_table_document

# OpenAI-compatible API after `kubectl port-forward` to the serve Service, the way in without a
# front door (and the fallback for a laptop with one).
LOCAL_HOST = "localhost"
API_KEY_PLACEHOLDER = "not-needed"  # Ray Serve LLM's own ingress checks no key; OpenAI SDKs insist on one

# What each stack output is, for docs/OUTPUTS.md's table (`make docs` renders it with each
# output's type from an offline run; a test fails when an output has no line here).
OUTPUT_DESCRIPTIONS: Mapping[str, str] = MappingProxyType({
    "region": "AWS region of the stack",
    "clusterName": "EKS cluster name (`aws eks update-kubeconfig --name …`)",
    "kubeconfig": "kubeconfig for the cluster (uses `aws eks get-token`)",
    "namespace": "namespace of the RayService",
    "rayServiceName": "RayService name",
    "serveServiceName": "the OpenAI endpoint's Service, `<rayServiceName>-serve-svc`",
    "servePort": "the Service's port (8000)",
    "modelId": "the `model` clients send",
    "tokenizerSource": "where the served model's tokenizer is (`tokenizerSource`, else `modelSource`): "
                       "`pdctl bench` counts prompt tokens with it",
    "portForwardCommand": "`kubectl port-forward` line that exposes the endpoint on localhost:8000",
    "gpuAvailabilityZone": "the single AZ of the EFA GPU node group (its name in this account)",
    "gpuAvailabilityZoneId": "the same AZ's zone ID (`usw2-az2`), the same in every account",
    "clientConfig": "`{base_url, model, api_key_source}`: an OpenAI client's configuration "
                    "(`OpenAI(base_url=…, api_key=<the key>)`, `model=…`) and where its key is; never the key",
    "endpointUrl": "the OpenAI endpoint's base URL: `frontDoorHostname`, else the front door's load balancer, else "
                   "localhost after port-forward",
    "loadBalancerHostname": "the front door's load balancer's DNS name, what `frontDoorHostname` must point at "
                            "(CNAME or Route 53 alias); \"\" without a door",
    "apiKeySecret": "where the API keys live: the `apiKeys` stack secret (plain keys, for callers) and the "
                    "namespace/name of the Kubernetes Secret holding their salted hashes; \"\" without a door",
    "apiKeyNames": "the names of the front door's API keys (never the keys)",
    "prometheusPortForwardCommand": (
        "`kubectl port-forward` line that exposes the stack's Prometheus on localhost:9090 (what `pdctl top` reads)"),
    "grafanaPortForwardCommand": "`kubectl port-forward` line that exposes Grafana (the PD dashboard) on "
                                 "localhost:3000",
})


@dataclass(frozen=True)
class InferenceStack:
    """Every component of one stack, and the outputs a client consumes."""

    settings: StackSettings
    zones: AvailabilityZonePlan
    network: Network
    cluster: Cluster
    system_nodes: SystemNodeGroup
    gpu_nodes: GpuNodeGroup  # gpuNodeType's group
    phase_gpu_nodes: tuple[GpuNodeGroup, ...]  # a phase's own group, when prefill/decodeGpuNodeType sets one
    coredns: CoreDns
    device_plugins: GpuDevicePlugins
    kuberay: KubeRayOperator
    image_prepull: RayImagePrePull  # onto the GPU nodes
    head_image_prepull: RayImagePrePull  # onto the system nodes, for the Ray head
    model_access: ModelReadAccess | None
    inference: InferenceService
    storage: BlockStorage
    observability: Observability
    gcs_store: GcsStore | None
    node_autoscaler: ClusterAutoscaler | None  # only when a GPU node group can grow
    front_door: FrontDoorNetwork | None  # only when frontDoor is not "none"

    @property
    def outputs(self) -> dict[str, Any]:
        """Stack outputs, by the names `pulumi stack output` shows. The kubeconfig stays secret."""
        settings, inference = self.settings, self.inference
        port = inference.serve_port
        model = settings.serving.app.config.model
        model_id = model.model_id
        port_forward = (f"kubectl --namespace {inference.namespace} port-forward "
                        f"service/{inference.serve_service_name} {port}:{port}")
        kubeconfig_command = f"aws eks update-kubeconfig --region {settings.region} --name {settings.cluster.name}"
        door = settings.front_door
        endpoint_url: pulumi.Input[str] = f"http://{LOCAL_HOST}:{port}/v1"
        key_source = (f"none: any api_key (`{API_KEY_PLACEHOLDER}`) through the port-forward: {kubeconfig_command} "
                      f"&& {port_forward}")
        load_balancer: pulumi.Input[str] = ""
        if self.front_door is not None:
            scheme = "https" if door.tls else "http"
            load_balancer = self.front_door.hostname
            # Clients call the name the certificate covers; the load balancer's own name only without one.
            endpoint_url = (f"{scheme}://{door.settings.hostname}:{door.port}/v1" if door.settings.hostname else
                            self.front_door.hostname.apply(lambda host: f"{scheme}://{host}:{door.port}/v1"))
            key_source = (f"pulumi config get {API_KEYS_KEY} --stack {settings.stack} "
                          "(JSON: key name → key; `pdctl client-config --key NAME` reads it)")
        return {
            "region": settings.region,
            "clusterName": self.cluster.cluster_name,
            "kubeconfig": self.cluster.kubeconfig,
            "namespace": inference.namespace,
            "rayServiceName": inference.ray_service_name,
            "serveServiceName": inference.serve_service_name,
            "servePort": port,
            "modelId": model_id,
            "tokenizerSource": model.tokenizer_source or model.model_source,
            "portForwardCommand": port_forward,
            "gpuAvailabilityZone": self.zones.gpu_zone.name,
            "gpuAvailabilityZoneId": self.zones.gpu_zone.zone_id,
            "clientConfig": {
                "base_url": endpoint_url,
                "model": model_id,
                "api_key_source": key_source,
            },
            "endpointUrl": endpoint_url,
            "loadBalancerHostname": load_balancer,
            "apiKeySecret": (f"{API_KEYS_KEY} (stack secret); {inference.namespace}/{inference.api_keys_secret_name} "
                             f"key {KEY_TABLE_FILE} (salted hashes)") if self.front_door is not None else "",
            "apiKeyNames": list(door.key_names),
            "prometheusPortForwardCommand": self.observability.port_forward_commands()["prometheus"],
            "grafanaPortForwardCommand": self.observability.port_forward_commands()["grafana"],
        }


def build_stack(settings: StackSettings, hf_token: pulumi.Input[str] | None,
                api_keys: pulumi.Input[str] | None = None) -> InferenceStack:
    """Register the whole graph for validated `settings`; `hf_token` and `api_keys` (the `apiKeys`
    JSON) are Pulumi secrets or None."""
    zones = settings.zones

    network = Network("network", NetworkArgs(settings.network, [z.name for z in zones.network_zones],
                                             zones.subnet_cidrs, [z.name for z in zones.nat_zones]))
    cluster = Cluster("cluster", ClusterArgs(
        settings.cluster, network, control_plane_zones=tuple(z.name for z in zones.control_plane_zones),
        earlier_iam_roles=settings.earlier_iam_roles))
    gcs_store = GcsStore("gcs-store", GcsStoreArgs(settings.cluster.name, network)) \
        if settings.serving.gcs_fault_tolerance else None
    system_nodes = SystemNodeGroup("system-nodes", SystemNodeGroupArgs(
        settings.system_nodes, cluster, network,
        # The Ray head runs on these nodes: only they may reach the GCS store.
        extra_security_group_ids=(gcs_store.client_security_group.id,) if gcs_store else ()))
    gpu_nodes, phase_gpu_nodes = _gpu_node_groups(settings, cluster, network)
    all_gpu_nodes = [gpu_nodes, *phase_gpu_nodes]
    coredns = CoreDns("coredns", CoreDnsArgs(cluster), opts=pulumi.ResourceOptions(depends_on=[system_nodes]))

    charts = settings.charts
    device_plugins = GpuDevicePlugins(
        "gpu-device-plugins",
        GpuDevicePluginsArgs(cluster.provider, charts.nvidia_device_plugin, charts.efa_device_plugin),
        opts=pulumi.ResourceOptions(depends_on=all_gpu_nodes),
    )
    node_autoscaler = _node_autoscaler(settings, cluster, system_nodes, all_gpu_nodes)
    kuberay = KubeRayOperator(
        "kuberay", KubeRayOperatorArgs(cluster.provider, charts.kuberay),
        opts=pulumi.ResourceOptions(depends_on=[system_nodes]),
    )
    # In parallel with the device plugins and KubeRay: the image is on the GPU nodes when the
    # RayService's worker pods land there, and on the system nodes when its head pod does (the workers
    # wait for the head's GCS, so a pull there would come after KubeRay, on the way to the first token).
    image_prepull = RayImagePrePull(
        PREPULL_NAMES["gpu"], RayImagePrePullArgs(cluster.provider, settings.serving.image),
        opts=pulumi.ResourceOptions(depends_on=all_gpu_nodes),
    )
    head_image_prepull = RayImagePrePull(
        PREPULL_NAMES["system"], RayImagePrePullArgs(cluster.provider, settings.serving.image, nodes="system"),
        opts=pulumi.ResourceOptions(depends_on=[system_nodes]),
    )
    model_access = _model_access(settings, cluster)
    inference = InferenceService(
        "inference",
        InferenceServiceArgs(
            provider=cluster.provider, serving=settings.serving, hf_token=hf_token,
            model_reader_role_arn=model_access.role_arn if model_access else None,
            gcs_store=GcsStoreConnection(gcs_store.address, gcs_store.auth_token) if gcs_store else None,
            api_key_table=_api_key_table(settings.front_door, api_keys)),
        # Not on the device plugins' Helm releases: their wait (the DaemonSets ready on the GPU nodes) is the
        # deploy's proof they run, not a gate for the RayService, whose pods wait for the advertised GPUs
        # themselves; the image pre-pull's step counts the plugins' registration beside it.
        opts=pulumi.ResourceOptions(depends_on=[kuberay, image_prepull, head_image_prepull, *all_gpu_nodes]),
    )
    storage, observability = _observability(settings, cluster, system_nodes, (*all_gpu_nodes, device_plugins))
    front_door = FrontDoorNetwork("front-door", FrontDoorArgs(
        cluster=cluster, door=settings.front_door, serving=settings.serving, ray_service=inference.ray_service,
        cluster_name=settings.cluster.name,
        region=settings.region, vpc_id=network.vpc_id, vpc_cidr=str(settings.network.vpc_cidr)),
        opts=pulumi.ResourceOptions(depends_on=[system_nodes, inference.namespace_resource]),
    ) if settings.front_door.enabled else None
    return InferenceStack(
        settings=settings, zones=zones, network=network, cluster=cluster, system_nodes=system_nodes,
        gpu_nodes=gpu_nodes, phase_gpu_nodes=phase_gpu_nodes, coredns=coredns, device_plugins=device_plugins,
        kuberay=kuberay, image_prepull=image_prepull, head_image_prepull=head_image_prepull,
        model_access=model_access, inference=inference,
        storage=storage, observability=observability, gcs_store=gcs_store, node_autoscaler=node_autoscaler,
        front_door=front_door)


def _api_key_table(door: FrontDoor, api_keys: pulumi.Input[str] | None) -> pulumi.Output[str] | None:
    """The key table the ingress reads (salted hashes and limits), a secret; an empty table (every
    request refused) while no key is set."""
    if not door.enabled:
        return None

    def table(text: str | None) -> str:
        keys = json.loads(text) if text else {}
        return key_table_document(door.salt, keys, {name: door.settings.limits(name) for name in keys})

    return pulumi.Output.secret(pulumi.Output.from_input(api_keys).apply(table))


def _gpu_node_groups(settings: StackSettings, cluster: Cluster,
                     network: Network) -> tuple[GpuNodeGroup, tuple[GpuNodeGroup, ...]]:
    """gpuNodeType's group, then each phase's own group (prefill/decodeGpuNodeType)."""
    zones = settings.zones
    shared_spec, *phase_specs = settings.serving.node_groups

    def gpu_node_group(spec: GpuNodeGroupSpec, fabric: GpuFabric | None) -> GpuNodeGroup:
        return GpuNodeGroup(gpu_node_group_resource_name(spec.own_phase), GpuNodeGroupArgs(
            spec, settings.gpu_nodes.disk_gib, settings.cluster.name, cluster, network,
            availability_zone=zones.gpu_zone.name, fabric=fabric))

    gpu_nodes = gpu_node_group(shared_spec, None)
    # A phase's own group: same AZ, same placement group and EFA security group as gpuNodeType's.
    return gpu_nodes, tuple(gpu_node_group(spec, gpu_nodes.fabric) for spec in phase_specs)


def _node_autoscaler(settings: StackSettings, cluster: Cluster, system_nodes: SystemNodeGroup,
                     all_gpu_nodes: list[GpuNodeGroup]) -> ClusterAutoscaler | None:
    """The Cluster Autoscaler, only when a GPU node group can grow."""
    autoscaled = [group for group in all_gpu_nodes if group.autoscaled]
    if not autoscaled:
        return None
    return ClusterAutoscaler(
        "cluster-autoscaler",
        ClusterAutoscalerArgs(
            cluster=cluster, cluster_name=settings.cluster.name, region=settings.region,
            kubernetes_version=settings.cluster.kubernetes_version,
            node_group_names=tuple(group.node_group_name for group in autoscaled if group.node_group_name),
            chart_version=settings.charts.cluster_autoscaler),
        opts=pulumi.ResourceOptions(depends_on=[system_nodes, *autoscaled]),
    )


def workload_policy_purposes(settings: StackSettings) -> tuple[str, ...]:
    """The bootstrap's workload policies the stack attaches (components/cluster.py workload_policy_arn), which
    `pdctl preflight` looks for in the account: the Load Balancer Controller's with the front door, the
    Cluster Autoscaler's where a GPU group may grow, the model reader's with an S3 mirror (and the compile
    cache's with compileCacheInS3)."""
    mirrored = settings.serving.app.config.model.s3_mirror is not None
    return tuple(purpose for purpose, attached in (
        (LOAD_BALANCER_CONTROLLER_POLICY, settings.front_door.enabled),
        (CLUSTER_AUTOSCALER_POLICY, any(spec.autoscaled for spec in settings.serving.node_groups)),
        (MODEL_READER_POLICY, mirrored),
        (COMPILE_CACHE_POLICY, mirrored and settings.serving.ray_service.compile_cache_in_s3)) if attached)


def _model_access(settings: StackSettings, cluster: Cluster) -> ModelReadAccess | None:
    """The S3 model mirror's read-only IAM role, when `modelSource` is one."""
    mirror = settings.serving.app.config.model.s3_mirror
    return None if mirror is None else ModelReadAccess(
        "model-access", ModelReadAccessArgs(bucket=mirror[0], prefix=mirror[1], cluster_name=settings.cluster.name,
                                            namespace=settings.namespace,
                                            oidc_provider_arn=cluster.oidc_provider_arn,
                                            oidc_issuer=cluster.oidc_issuer,
                                            permissions_boundary=cluster.permissions_boundary,
                                            tags=cluster.tags,
                                            compile_cache=settings.serving.ray_service.compile_cache_in_s3))


def _observability(settings: StackSettings, cluster: Cluster, system_nodes: SystemNodeGroup,
                   gpu_nodes: tuple[pulumi.Resource, ...]) -> tuple[BlockStorage, Observability]:
    """The EBS CSI driver and StorageClass, then the monitoring stack whose volume uses it."""
    storage = BlockStorage("block-storage", BlockStorageArgs(cluster),
                           opts=pulumi.ResourceOptions(depends_on=[system_nodes]))
    observability = Observability(
        "observability",
        ObservabilityArgs(provider=cluster.provider, observability=settings.observability, serving=settings.serving,
                          charts=settings.charts, storage_class=storage.storage_class_name,
                          gpu_nodes=gpu_nodes, keep_volume=settings.cluster.protect),
        # After the storage component (the EBS CSI driver) on create, so before it on destroy: the
        # driver must still run to delete Prometheus's volume.
        opts=pulumi.ResourceOptions(depends_on=[system_nodes, storage]),
    )
    return storage, observability
