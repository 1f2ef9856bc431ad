"""The stack's settings assembled: every config key read once, typed, validated and frozen before any resource.

`settings_from_config(raw, project=, stack=, ask_cloud=)`: `raw` maps config keys to strings exactly
as `pulumi.Config.get` returns them (arrays as JSON text). Keys of the project namespace may be given
bare (`azCount`) or qualified (`eks-pd-llm:azCount`); other namespaces keep their prefix
(`aws:region`). Each key is checked on its own first (read.py, the slices); then `ask_cloud` says
what EC2 knows of the region and the node types (the program asks AWS through invokes:
components/discovery.py; tests and tools pass recorded answers) and the model's own config is read
(serve_app/model_facts.py), and the settings are judged against those. Every mistake raises
`ConfigError` naming the config key, the value and what is allowed; a pydantic `ValidationError`
never escapes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from components.config.charts import ChartSettings
from components.config.cluster import ClusterSettings, documentation_placeholders
from components.config.declared import declared_keys
from components.config.front_door import API_KEYS_KEY, FrontDoor, FrontDoorSettings, api_key_names
from components.config.names import AVAILABILITY_ZONE
from components.config.network import NetworkSettings
from components.config.nodes import GpuNodeSettings, PhaseGpuNodeSettings, SystemNodeSettings
from components.config.observability import ObservabilitySettings
from components.config.ray_service import RayServiceSettings
from components.config.read import read_config
from components.config.serving import ServingSettings, serving_settings
from components.config.workload import StackSlo, WorkloadSettings, stack_slo
from components.config.zones import AvailabilityZonePlan, RegionSettings, plan_availability_zones
from components.discovery import CloudFacts, CloudQuery, NodeTypeQuestion, discover
from components.findings import stack_findings
from serve_app.config import PHASES
from serve_app.settings import ServeAppSettings
from serve_app.slo_sizing import Targets
from serve_app.stack_keys import from_stack_keys

HF_TOKEN_KEY = "hfToken"

@dataclass(frozen=True)
class StackSettings:
    """Everything the program needs, validated."""

    project: str
    stack: str
    region: str
    network: NetworkSettings
    cluster: ClusterSettings
    system_nodes: SystemNodeSettings
    gpu_nodes: GpuNodeSettings
    charts: ChartSettings
    zones: AvailabilityZonePlan
    serving: ServingSettings
    observability: ObservabilitySettings
    hf_token_configured: bool
    front_door: FrontDoor
    slo: StackSlo | None = None  # the SLO sizing (components/config/workload.py)
    # The deployed cluster runs with the IAM roles of stacks created before the stack made its own under
    # its path (DeployedStack.earlier_iam_roles): they are kept, since a new one replaces the cluster.
    earlier_iam_roles: bool = False
    # Placeholders the offline plan lets through (a real preview refuses them): warned.
    findings: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return self.serving.namespace

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the preview could not check, found wasteful or short of the SLO, and says so
        (pulumi.log.warn; `pdctl plan --strict` fails)."""
        return (*self.serving.app.warnings, *(self.slo.warnings if self.slo else ()), *self.findings,
                *stack_findings(self.serving, self.charts))

def settings_from_config(raw: Mapping[str, str], *, project: str, stack: str,
                         ask_cloud: Callable[[CloudQuery], CloudFacts] = discover) -> StackSettings:
    """Validate and type a stack's configuration (Pulumi.yaml defaults fill what `raw` lacks).

    Every key is checked on its own first; then `ask_cloud` (the program: EC2 through invokes; tests
    and the offline plan: recorded answers) says what the region, its AZs and the node types are, and
    the settings are judged against that answer."""
    typed, texts = read_config(raw, project=project)

    region = from_stack_keys(RegionSettings, typed, texts).region
    network = from_stack_keys(NetworkSettings, typed, texts)
    cluster = from_stack_keys(ClusterSettings, typed, texts)
    system_nodes = from_stack_keys(SystemNodeSettings, typed, texts)
    gpu_nodes = from_stack_keys(GpuNodeSettings, typed, texts)
    phase_gpu_nodes = from_stack_keys(PhaseGpuNodeSettings, typed, texts)
    _check_gpu_zone_in_region(gpu_nodes, region)
    gpu_nodes.image_snapshot_id(region)
    charts = from_stack_keys(ChartSettings, typed, texts)
    ray_service = from_stack_keys(RayServiceSettings, typed, texts).resolved(region)
    app_settings = from_stack_keys(ServeAppSettings, typed, texts)
    app_settings.refuse_unused_cuda_graphs(declared_keys()[ServeAppSettings.key("cuda_graph_max_batch_size")].default)
    workload = from_stack_keys(WorkloadSettings, typed, texts)
    observability = from_stack_keys(ObservabilitySettings, typed, texts)
    front_door = _front_door(from_stack_keys(FrontDoorSettings, typed, texts), texts,
                             region, salt_of=f"{project}/{stack}/{cluster.name}")

    cloud = ask_cloud(_cloud_query(region, cluster, system_nodes, gpu_nodes, phase_gpu_nodes))
    system_nodes.check(cloud.system_instance)
    gpu_instance = gpu_nodes.check(cloud.gpu_instance)
    phase_groups = phase_gpu_nodes.targets(cloud.phase_gpu_instances)
    placeholders = documentation_placeholders(cluster)
    if placeholders and not cloud.offline:
        raise placeholders[0]
    hf_token_configured = bool(texts.get(HF_TOKEN_KEY))
    serving = serving_settings(ray_service, app_settings, gpu_instance, gpu_nodes, phase_groups,
                               hf_token_configured, region,
                               None if app_settings.pd_direct_streaming else front_door.keyed_ingress)
    if front_door.enabled and app_settings.pd_direct_streaming:  # after the checks of direct streaming itself
        raise FrontDoorSettings.field("scheme").refuse(
            front_door.settings.scheme, '"none", or pdDirectStreaming false',
            "with direct streaming decode serves the API itself: there is no ingress to check keys")
    targets = Targets(observability.ttft_slo_seconds, observability.tpot_slo_seconds, observability.slo_objective)
    slo = stack_slo(workload, targets, serving.app, {p: serving.node_group(p).instance for p in PHASES})
    return StackSettings(
        project=project, stack=stack, region=region, network=network, cluster=cluster, system_nodes=system_nodes,
        gpu_nodes=gpu_nodes, charts=charts, zones=plan_availability_zones(network, gpu_nodes, cloud),
        serving=serving, observability=observability, hf_token_configured=hf_token_configured,
        front_door=front_door, slo=slo,
        findings=tuple(str(p) for p in placeholders),
        earlier_iam_roles=cloud.deployed is not None and cloud.deployed.earlier_iam_roles)


def _front_door(settings: FrontDoorSettings, texts: Mapping[str, str], region: str, *, salt_of: str) -> FrontDoor:
    """The door as configured: its certificate in the region, its keys' names (never the keys)."""
    settings.check_certificate(region)
    # One salt per stack, stable across updates (a new salt would rewrite every hash on each `up`).
    salt = hashlib.sha256(salt_of.encode()).hexdigest()[:32]
    return FrontDoor(settings, api_key_names(str(texts.get(API_KEYS_KEY) or ""), settings), salt)


def _check_gpu_zone_in_region(gpu_nodes: GpuNodeSettings, region: str) -> None:
    zone = gpu_nodes.availability_zone
    if zone and AVAILABILITY_ZONE.match(zone) and not zone.startswith(region):
        raise gpu_nodes.field("availability_zone").refuse(zone, f"an AZ of {region}, or \"\"")


def _cloud_query(region: str, cluster: ClusterSettings, system_nodes: SystemNodeSettings,
                 gpu_nodes: GpuNodeSettings, phase_gpu_nodes: PhaseGpuNodeSettings) -> CloudQuery:
    """What to ask EC2 and EKS: the region, each node type the settings name, and the deployed stack."""
    return CloudQuery(
        cluster=NodeTypeQuestion(cluster.field("name"), cluster.name),
        region=region, region_setting=RegionSettings.field("region"),
        gpu_node_type=NodeTypeQuestion(gpu_nodes.field("instance_type"), gpu_nodes.instance_type),
        system_node_type=NodeTypeQuestion(system_nodes.field("instance_type"), system_nodes.instance_type),
        phase_gpu_node_types=phase_gpu_nodes.questions())
