"""What a stack will create, cost and need, from the resources the real program registers offline.

`build_plan(run, ...)` turns an `OfflineRun` into plain data (`Plan.to_dict()` is the `--output json`
document, which `pdctl.plan_diff` compares between two branches); `pdctl.views.render_plan` draws it
for a terminal. Nothing here calls Pulumi or AWS.

The same program must give the same plan, byte for byte: the engine hands maps over in no fixed
order and numbers as floats, so every value goes through `canonical` and every list of resources is
sorted. Values the offline mock cloud made up (ids, ARNs, AZ names) are marked as such, and secret
inputs are masked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from components.manifests.image_prepull import PREPULL_NAMES
from components.node_groups import gpu_node_group_resource_name
from facts.durations import CreateDuration
from facts.fault_tolerance import HEAD_RESTART, HeadRestart
from facts.replacements import NODE_GROUP_TYPES
from pdctl.cold_start import (
    CONTROL_PLANE_TO_FIRST_TOKEN_TARGET_MINUTES,
    DEPLOY_TARGET_MINUTES,
    ColdStart,
    Verdict,
    cold_start,
)
from pdctl.cost import CostEstimate, CostInputs, NodeGroupCost, VolumeCost, hourly_cost
from pdctl.critical_path import CriticalPath, critical_path
from pdctl.policy_check import Violation, policy_resources, run_rules
from pdctl.slo_cost import phase_nodes_cost, slo_section_extras
from pdctl.update_traffic import stack_updates
from serve_app.capacity import CapacityReport
from serve_app.checks import CheckedApp

SECRET_MASK = "[secret]"
LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate"
NAT_GATEWAY_TYPE = "aws:ec2/natGateway:NatGateway"
CLUSTER_TYPES = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
SUBNET_TYPE = "aws:ec2/subnet:Subnet"
RAY_SERVICE_TYPE = "kubernetes:ray.io/v1:RayService"
# The stack's DaemonSets outside Helm: the Ray image pre-pulls (components/manifests/image_prepull.py).
PREPULL_TYPE = "kubernetes:apps/v1:DaemonSet"
SERVICE_TYPE = "kubernetes:core/v1:Service"
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
REPLICATION_GROUP_TYPE = "aws:elasticache/replicationGroup:ReplicationGroup"
# EKS gives a managed node group without a launch-template disk a 20 GiB root volume.
EKS_DEFAULT_DISK_GIB = 20.0

# The settings a reviewer checks, per resource type: (label, dotted path into the inputs).
KEY_SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "aws:ec2/vpc:Vpc": (("cidr", "cidrBlock"),),
    SUBNET_TYPE: (("az", "availabilityZone"), ("cidr", "cidrBlock"),
                  ("public IPs", "mapPublicIpOnLaunch")),
    NAT_GATEWAY_TYPE: (("connectivity", "connectivityType"),),
    "eks:index:Cluster": (("version", "version"), ("public access", "endpointPublicAccess"),
                          ("public CIDRs", "publicAccessCidrs"),
                          ("private access", "endpointPrivateAccess"),
                          ("auth", "authenticationMode"), ("OIDC", "createOidcProvider"),
                          ("secrets KMS key", "encryptionConfigKeyArn"),
                          ("deletion protection", "deletionProtection"),
                          ("access entries", "accessEntries")),
    "aws:kms/key:Key": (("rotation", "enableKeyRotation"), ("deletion window days", "deletionWindowInDays")),
    "eks:index:ManagedNodeGroup": (("instance types", "instanceTypes"), ("capacity", "capacityType"),
                                   ("ami", "amiType"), ("desired", "scalingConfig.desiredSize"),
                                   ("min", "scalingConfig.minSize"), ("max", "scalingConfig.maxSize"),
                                   ("disk GiB", "diskSize"), ("subnets", "subnetIds"),
                                   ("labels", "labels"), ("taints", "taints")),
    LAUNCH_TEMPLATE_TYPE: (("instance type", "instanceType"),
                           ("IMDS tokens", "metadataOptions.httpTokens"),
                           ("hop limit", "metadataOptions.httpPutResponseHopLimit"),
                           ("interfaces", "networkInterfaces.*.interfaceType"),
                           ("placement group", "placement.groupName"),
                           ("disk GiB", "blockDeviceMappings.*.ebs.volumeSize"),
                           ("disk type", "blockDeviceMappings.*.ebs.volumeType"),
                           ("encrypted", "blockDeviceMappings.*.ebs.encrypted")),
    "aws:ec2/placementGroup:PlacementGroup": (("strategy", "strategy"),),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (("protocol", "ipProtocol"),),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (("protocol", "ipProtocol"),),
    "kubernetes:helm.sh/v3:Release": (("chart", "chart"), ("version", "version"),
                                      ("repo", "repositoryOpts.repo"), ("namespace", "namespace")),
    "kubernetes:core/v1:Namespace": (("name", "metadata.name"), ("labels", "metadata.labels")),
    REPLICATION_GROUP_TYPE: (
        ("engine", "engine"), ("version", "engineVersion"), ("node type", "nodeType"),
        ("nodes", "numCacheClusters"), ("multi-AZ", "multiAzEnabled"), ("TLS", "transitEncryptionMode"),
        ("encrypted at rest", "atRestEncryptionEnabled")),
    RAY_SERVICE_TYPE: (("name", "metadata.name"), ("namespace", "metadata.namespace"),
                       ("annotations", "metadata.annotations"),
                       ("upgrade", "spec.upgradeStrategy.type"),
                       ("ray", "spec.rayClusterConfig.rayVersion"),
                       ("image", "spec.rayClusterConfig.headGroupSpec.template.spec.containers.0.image"),
                       ("worker replicas", "spec.rayClusterConfig.workerGroupSpecs.*.replicas"),
                       ("GCS store", "spec.rayClusterConfig.gcsFaultToleranceOptions.redisAddress")),
}


def lookup(data: Any, path: str) -> Any:
    """Value at a dotted path; `*` maps over a list, a number indexes one. None when absent."""
    head, _, rest = path.partition(".")
    if isinstance(data, list):
        if head == "*":
            values = [lookup(item, rest) if rest else item for item in data]
            values = [v for v in values if v is not None]
            return values or None
        if head.isdigit() and int(head) < len(data):
            data = data[int(head)]
        else:
            return None
    elif isinstance(data, dict):
        data = data.get(head)
    else:
        return None
    if not rest or data is None:
        return data
    return lookup(data, rest)


def canonical(value: Any) -> Any:
    """Whole numbers as ints (the engine hands ints over as floats) and mapping keys sorted (it hands
    maps over in no fixed order), recursively: one program, one plan, byte for byte."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def masked(inputs: dict, secret_paths: Iterable[str]) -> dict:
    """`inputs` with every secret the engine marked (paths as the harness records them: `a.b[0].c`)
    replaced by SECRET_MASK."""
    secret = set(secret_paths)

    def walk(value: Any, path: str) -> Any:
        if path in secret:
            return SECRET_MASK
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    return walk(inputs, "")


def string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in string_leaves(v)]
    return []


class OfflineValues:
    """Which plan values the offline mock cloud made up, from its record (`OfflineRun.invented`).

    A value counts when one of its strings is a made-up value, or contains a long made-up id (an ARN
    holds the account id, a kubeconfig the endpoint). Short made-up values match whole strings only,
    so a value that merely contains "us-west-2a" as text is not marked."""

    LONG_ID = 12

    def __init__(self, invented: dict[str, str]):
        self.exact = dict(invented)
        self.embedded = sorted((v, why) for v, why in invented.items()
                               if len(v) >= self.LONG_ID and any(c.isdigit() for c in v))

    def why(self, value: Any) -> str | None:
        for text in string_leaves(value):
            if text in self.exact:
                return self.exact[text]
            for token, why in self.embedded:
                if token in text:
                    return why
        return None

    def marks(self, values: dict[str, Any]) -> dict[str, str]:
        """{key: why} for the entries of `values` that hold a made-up value."""
        return {key: why for key, value in values.items() if (why := self.why(value)) is not None}


def key_settings(resource) -> dict[str, Any]:
    settings = {}
    for label, path in KEY_SETTINGS.get(resource.type, ()):
        value = lookup(resource.inputs, path)
        if value not in (None, [], {}, ""):
            settings[label] = canonical(value)
    if resource.type == RAY_SERVICE_TYPE:
        settings.update(serve_config_essentials(resource.inputs))
    return settings  # labels in KEY_SETTINGS order (fixed); each value canonical


def serve_applications(ray_service_inputs: dict) -> list[dict]:
    """The Serve applications of a RayService's serveConfigV2 (a YAML string in the spec)."""
    text = lookup(ray_service_inputs, "spec.serveConfigV2")
    return (yaml.safe_load(text) or {}).get("applications", []) if text else []


def phase_configs(application: dict) -> dict[str, dict]:
    """{"prefill": LLMConfig dict, "decode": ...} of a build_pd_openai_app application."""
    args = application.get("args") or {}
    return {p.removesuffix("_config"): args[p] for p in ("prefill_config", "decode_config")
            if isinstance(args.get(p), dict)}


def serve_config_essentials(ray_service_inputs: dict) -> dict[str, Any]:
    """Per application and phase: import path, model, engine id, KV connector + backends, replicas."""
    out: dict[str, Any] = {}
    for app in serve_applications(ray_service_inputs):
        out[f"app {app.get('name')}"] = f"{app.get('import_path')} at {app.get('route_prefix', '/')}"
        for phase, config in phase_configs(app).items():
            engine = config.get("engine_kwargs") or {}
            kv = engine.get("kv_transfer_config") or {}
            deployment = config.get("deployment_config") or {}
            auto = deployment.get("autoscaling_config")
            out[phase] = {
                "model": lookup(config, "model_loading_config.model_id"),
                "source": lookup(config, "model_loading_config.model_source"),
                "accelerator": config.get("accelerator_type"),
                "kv": f"{kv.get('kv_connector')} {kv.get('kv_role')}",
                "backends": lookup(kv, "kv_connector_extra_config.backends"),
                "replicas": (f"{auto.get('min_replicas')}..{auto.get('max_replicas')}"
                             if auto else deployment.get("num_replicas")),
                "max_model_len": engine.get("max_model_len"),
                "gpu_memory_utilization": engine.get("gpu_memory_utilization"),
            }
    return out


@dataclass(frozen=True)
class ResourceOptions:
    """The resource options a reviewer must see: what `pulumi destroy` refuses, what replaces."""

    protect: bool = False  # `pulumi destroy` (and a replacement) refuse while set
    replace_on_changes: tuple[str, ...] = ()  # input paths whose change replaces the resource
    delete_before_replace: bool = False  # a replacement deletes the old one first: a gap

    def to_dict(self) -> dict:
        return {"protect": self.protect, "replace_on_changes": sorted(self.replace_on_changes),
                "delete_before_replace": self.delete_before_replace}


@dataclass(frozen=True)
class TreeNode:
    type: str
    name: str
    settings: dict[str, Any]
    children: list[TreeNode]
    options: ResourceOptions = ResourceOptions()
    inputs: dict[str, Any] | None = None  # all inputs, secrets masked: what `plan --diff` compares
    offline: dict[str, str] | None = None  # setting label -> which made-up value it holds

    def to_dict(self) -> dict:
        return {"type": self.type, "name": self.name, "settings": self.settings,
                "options": self.options.to_dict(), "inputs": self.inputs or {},
                "offline": self.offline or {}, "children": [c.to_dict() for c in self.children]}


def resource_tree(resources: list, offline: OfflineValues | None = None) -> list[TreeNode]:
    """Resources nested under their parents (roots: the Stack), siblings sorted by name then type:
    registration order changes from run to run, and the JSON plan must diff cleanly."""
    offline = offline or OfflineValues({})
    by_urn = {r.urn: r for r in resources}
    children: dict[str | None, list] = {}
    for r in resources:
        parent = r.parent if r.parent in by_urn else None
        children.setdefault(parent, []).append(r)

    def node(r) -> TreeNode:
        settings = key_settings(r)
        options = ResourceOptions(protect=r.protect, replace_on_changes=tuple(r.replace_on_changes),
                                  delete_before_replace=r.delete_before_replace)
        inputs = canonical(masked(r.inputs, r.secret_paths))
        return TreeNode(r.type, r.name, settings, [node(c) for c in children.get(r.urn, [])],
                        options=options, inputs=inputs, offline=offline.marks(settings))

    for siblings in children.values():
        siblings.sort(key=lambda r: (r.name, r.type))
    return [node(r) for r in children.get(None, [])]


def resource_counts(resources: Iterable) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in resources:
        counts[r.type] = counts.get(r.type, 0) + 1
    return dict(sorted(counts.items()))


def region_of(resources: Iterable, config_region: str | None) -> str | None:
    """The stack's region: its `aws:region` config, else the one its subnets' AZs are in."""
    if config_region:
        return config_region
    for r in resources:
        if r.type == SUBNET_TYPE and r.inputs.get("availabilityZone"):
            return r.inputs["availabilityZone"][:-1]
    return None


def cost_inputs(resources: list, region: str, size: str = "desiredSize") -> CostInputs:
    """What the stack bills for, with each node group at `size` (desiredSize: as created, which is
    its minimum; maxSize: as far as the node autoscaler may grow it)."""
    by_urn = {r.urn: r for r in resources}
    groups = []
    for r in sorted(resources, key=lambda r: (r.name, r.type)):
        if r.type not in NODE_GROUP_TYPES:
            continue
        template = next((by_urn[d] for d in r.dependencies
                         if d in by_urn and by_urn[d].type == LAUNCH_TEMPLATE_TYPE), None)
        template_inputs = template.inputs if template else {}
        instance_type = (lookup(r.inputs, "instanceTypes.0")
                         or template_inputs.get("instanceType") or "unknown")
        disks = lookup(template_inputs, "blockDeviceMappings.*.ebs") or []
        disk_gib = sum(float(d.get("volumeSize", 0)) for d in disks)
        volume_type = disks[0].get("volumeType", "gp3") if disks else "gp3"
        if not disk_gib:
            disk_gib = float(r.inputs.get("diskSize") or EKS_DEFAULT_DISK_GIB)
        groups.append(NodeGroupCost(
            name=r.name, instance_type=instance_type,
            count=int(lookup(r.inputs, f"scalingConfig.{size}") or 0),
            disk_gib=disk_gib, volume_type=volume_type,
        ))
    clusters = sum(1 for r in resources if r.type == CLUSTER_TYPES[0]) or sum(
        1 for r in resources if r.type == CLUSTER_TYPES[1])
    cache_nodes: dict[str, int] = {}
    for r in resources:
        if r.type == REPLICATION_GROUP_TYPE:
            node_type = r.inputs.get("nodeType", "unknown")
            cache_nodes[node_type] = cache_nodes.get(node_type, 0) + int(r.inputs.get("numCacheClusters") or 1)
    return CostInputs(
        region=region, node_groups=groups,
        nat_gateways=sum(1 for r in resources if r.type == NAT_GATEWAY_TYPE),
        eks_clusters=clusters,
        volumes=prometheus_volumes(resources),
        cache_nodes=cache_nodes,
        # A LoadBalancer Service is an NLB the AWS Load Balancer Controller creates (components/front_door.py).
        load_balancers=sum(1 for r in resources if r.type == SERVICE_TYPE
                           and (r.inputs.get("spec") or {}).get("type") == "LoadBalancer"),
    )


# Where kube-prometheus-stack's values claim Prometheus's volume (components/manifests/helm_values.py).
PROMETHEUS_CLAIM = "values.prometheus.prometheusSpec.storageSpec.volumeClaimTemplate.spec"


def prometheus_volumes(resources: list) -> list[VolumeCost]:
    """The Prometheus volume each kube-prometheus-stack release claims (all gp3: the stack's class)."""
    volumes = []
    for r in resources:
        if r.type != HELM_RELEASE_TYPE or r.inputs.get("chart") != "kube-prometheus-stack":
            continue
        claim = lookup(r.inputs, PROMETHEUS_CLAIM) or {}
        size = str(lookup(claim, "resources.requests.storage") or "")
        if size.endswith("Gi"):
            volumes.append(VolumeCost(name=f"{r.name} Prometheus", gib=float(size[:-2])))
    return volumes


def head_restart(resources: Iterable) -> HeadRestart | None:
    """What a head restart does to requests, for the RayService the stack registers (None: none)."""
    found = [r for r in resources if r.type == RAY_SERVICE_TYPE]
    if not found:
        return None
    return HEAD_RESTART[lookup(found[0].inputs, "spec.rayClusterConfig.gcsFaultToleranceOptions") is not None]


def checked_app(run) -> CheckedApp | None:
    """The PD app as the program checked it (capacity included): the `stack` __main__.py built."""
    stack = run.program.get("stack")
    return stack.settings.serving.app if stack is not None else None


def availability_zones(run) -> dict:
    """The AZs the program chose, by name and zone ID (names differ per account; IDs do not)."""
    stack = run.program.get("stack")
    return stack.settings.zones.to_dict() if stack is not None else {}


def plan_warnings(run) -> list[str]:
    """What the program warned about at preview (facts it could not read, placeholders, waste, what
    it left out): `plan --strict` fails on them."""
    stack = run.program.get("stack")
    found = list(stack.settings.warnings) if stack is not None else []
    # The program logs these, and warns about more (an alert it could not create, ...): each once.
    return found + [w for w in dict.fromkeys(getattr(run, "warnings", ())) if w not in found]


def stack_slo_section(run, region: str) -> dict[str, Any] | None:
    """The SLO verdict the program's settings reached, with each phase's needed GPU nodes priced; None
    without a stack."""
    stack = run.program.get("stack")
    if stack is None or stack.settings.slo is None:
        return None
    slo = stack.settings.slo
    section = slo.to_dict()
    for phase in slo.phases:
        cost = phase_nodes_cost(region, phase.instance_type, phase.needed_nodes, stack.settings.gpu_nodes.disk_gib)
        section["phases"][phase.phase]["needed_cost_per_hour"] = None if cost is None else round(cost, 4)
    return {**section, **slo_section_extras(stack.settings, region)}


def front_door_section(run) -> dict[str, Any] | None:
    """The front door the program built: its reach, port, keys' names and default limits, and what the
    preview says about it (components/config/front_door.py); None without one."""
    stack = run.program.get("stack")
    door = stack.settings.front_door if stack is not None else None
    if door is None or not door.enabled:
        return None
    settings = door.settings
    return {"scheme": settings.scheme, "port": door.port, "tls": door.tls,
            "allowed_cidrs": list(settings.allowed_cidrs), "key_names": list(door.key_names),
            "requests_per_minute": settings.requests_per_minute, "tokens_per_minute": settings.tokens_per_minute,
            "notes": list(door.notes)}


def capacity_reports(app: CheckedApp | None) -> tuple[dict[str, CapacityReport], str | None]:
    """Capacity per phase as the program's preview check computed it. (reports, why there are none)."""
    if app is None:
        return {}, "the program built no serving stack"
    if not app.capacity:
        if app.warnings:  # printed once, as warnings
            return {}, "the model's facts could not be read (see the warning)"
        return {}, "; ".join(app.notes) or "no capacity report"
    return dict(app.capacity), None


def access_entries(cluster_inputs: dict) -> list[dict]:
    """A pulumi-eks Cluster's access entries: who gets in, with which access policies at which scope."""
    entries = []
    for name, entry in sorted((cluster_inputs.get("accessEntries") or {}).items()):
        policies = [{"name": policy_name, "policy_arn": policy.get("policyArn"),
                     "scope": lookup(policy, "accessScope.type"),
                     "namespaces": sorted(lookup(policy, "accessScope.namespaces") or [])}
                    for policy_name, policy in sorted((entry.get("accessPolicies") or {}).items())]
        entries.append({"name": name, "principal_arn": entry.get("principalArn"),
                        "kubernetes_groups": sorted(entry.get("kubernetesGroups") or []), "policies": policies})
    return entries


def protections(resources: Iterable) -> dict:
    """What stands between a mistake and a deleted or exposed production system: Pulumi `protect`
    per resource, and per EKS cluster its deletion protection, API endpoint reach and access entries."""
    resources = list(resources)
    clusters = []
    for r in sorted((r for r in resources if r.type == CLUSTER_TYPES[0]), key=lambda r: r.name):
        inputs = r.inputs
        clusters.append({
            "name": r.name,
            "deletion_protection": bool(inputs.get("deletionProtection")),
            "endpoint_private_access": bool(inputs.get("endpointPrivateAccess")),
            # pulumi-eks (like EKS) leaves the public endpoint on unless told otherwise.
            "endpoint_public_access": inputs.get("endpointPublicAccess", True) is not False,
            "public_access_cidrs": sorted(inputs.get("publicAccessCidrs") or []),
            "authentication_mode": inputs.get("authenticationMode"),
            "access_entries": access_entries(inputs),
        })
    protected = sorted(((r.type, r.name) for r in resources if r.protect),
                       key=lambda t: (t[1], t[0]))
    return {"protected": [{"type": t, "name": n} for t, n in protected], "eks_clusters": clusters}
def node_group_costs(at_min: CostInputs, at_max: CostInputs) -> dict[str, dict[str, float | None]]:
    """Each node group's own hourly cost (its instances and root volumes) at its min and max size,
    by its resource name; None where its type has no price."""
    def alone(inputs: CostInputs, group: NodeGroupCost) -> float | None:
        return hourly_cost(CostInputs(region=inputs.region, node_groups=[group], nat_gateways=0,
                                      eks_clusters=0)).per_hour

    maxima = {group.name: group for group in at_max.node_groups}
    return {group.name: {"min": alone(at_min, group), "max": alone(at_max, maxima[group.name])}
            for group in at_min.node_groups}


def scaling_bounds(run, costs: dict[str, dict[str, float | None]]) -> dict[str, Any] | None:
    """Both ends of what the stack may scale: replicas and worker pods per phase, GPU nodes, and
    whether a node autoscaler runs; with a phase's own GPU node group, each group with its phases
    and its cost per hour at both ends (`costs`: node_group_costs). None when the program built no
    serving stack."""
    stack = run.program.get("stack")
    if stack is None:
        return None
    settings = stack.settings
    app = settings.serving.app
    phases = {}
    for phase, nodes in app.nodes.items():
        replicas = app.config.phase(phase).replicas
        phases[phase] = {"replicas": {"min": replicas.min_replicas, "max": replicas.most},
                         "worker_pods": {"min": nodes.min_nodes, "max": nodes.max_nodes},
                         "autoscaling": replicas.autoscaling}
    gpu = settings.gpu_nodes
    groups = settings.serving.node_groups
    bounds: dict[str, Any] = {
        "phases": phases,
        "gpu_nodes": {"min": gpu.count, "max": gpu.most, "instance_type": gpu.instance_type},
        "node_autoscaler": "cluster-autoscaler" if any(group.autoscaled for group in groups) else None}
    if len(groups) > 1:
        bounds["gpu_node_groups"] = [
            {"name": name, "phases": list(group.phases), "instance_type": group.instance.name,
             "min": group.count, "max": group.most,
             "cost_per_hour": {end: None if v is None else round(v, 4) for end, v in costs[name].items()}}
            for group in groups for name in [gpu_node_group_resource_name(group.own_phase)]]
    return bounds


@dataclass(frozen=True)
class Plan:
    stack: str
    region: str | None
    zones: dict
    counts: dict[str, int]
    tree: list[TreeNode]
    capacity: dict[str, CapacityReport]
    capacity_note: str | None
    cost: CostEstimate
    critical_path: CriticalPath
    outputs: dict
    protections: dict
    offline_outputs: dict[str, str]  # output key -> which made-up value it holds
    policy_violations: list[Violation]
    warnings: list[str]
    notes: list[str]
    cold_start: ColdStart | None = None
    # Minutes from the EKS control plane ready to the RayService serving, against its start-time target.
    control_plane_to_first_token: Verdict | None = None
    head_restart: HeadRestart | None = None
    scaling: dict[str, Any] | None = None
    cost_at_max: CostEstimate | None = None  # every node group at its maximum
    slo: dict[str, Any] | None = None  # replicas the workload needs for the latency targets (pdctl/slo_cost.py)
    front_door: dict[str, Any] | None = None  # the endpoint's load balancer and keys (front_door_section)
    updates: dict[str, Any] | None = None  # how a change reaches traffic (pdctl/update_traffic.py)

    def to_dict(self) -> dict:
        return {
            "stack": self.stack,
            "region": self.region,
            "availability_zones": self.zones,
            "resources": {"total": sum(self.counts.values()), "by_type": self.counts},
            "tree": [n.to_dict() for n in self.tree],
            "protections": self.protections,
            "capacity": {"per_phase": {p: r.to_dict() for p, r in sorted(self.capacity.items())},
                         "note": self.capacity_note},
            "cost": self.cost.to_dict(),
            "scaling": self._scaling_dict(),
            "slo": self.slo,
            "critical_path": self._critical_path_dict(),
            "cold_start": self.cold_start.to_dict() if self.cold_start else None,
            "head_restart": self.head_restart.to_dict() if self.head_restart else None,
            "updates": self.updates,
            "front_door": self.front_door,
            "outputs": self.outputs,
            "offline_outputs": self.offline_outputs,
            "policy": {"violations": [v.to_dict() for v in self.policy_violations]},
            "warnings": self.warnings,
            "notes": self.notes,
        }

    @property
    def deploy_target(self) -> Verdict:
        return Verdict(self.critical_path.minutes, DEPLOY_TARGET_MINUTES, "min")

    def _critical_path_dict(self) -> dict[str, Any]:
        path = {**self.critical_path.to_dict(), "target": self.deploy_target.to_dict()}
        if self.control_plane_to_first_token is not None:
            path["control_plane_to_first_token"] = {
                "minutes": round(self.control_plane_to_first_token.figure, 3),
                "target": self.control_plane_to_first_token.to_dict()}
        return path

    def _scaling_dict(self) -> dict[str, Any] | None:
        if self.scaling is None:
            return None
        # None where a line has no price (the estimates say which): no partial sum passes for a price.
        ends = {"min": self.cost.per_hour, "max": self.cost_at_max.per_hour if self.cost_at_max else None}
        return {**self.scaling, "cost_per_hour": {end: None if v is None else round(v, 4) for end, v in ends.items()}}

def stack_cold_start(run) -> ColdStart | None:
    """The cold-start figures of the serving settings the program built, when it built a stack."""
    stack = run.program.get("stack")
    return cold_start(stack.settings.serving) if stack is not None else None


def control_plane_to_first_token(resources: list, path: CriticalPath) -> Verdict | None:
    """From the EKS control plane ready to the RayService serving (its first token), as the deploy's
    critical path times them, against its start-time target; None without a cluster or a RayService."""
    ready = [path.finished_at[r.urn] for r in resources if r.type in CLUSTER_TYPES]
    serving = [path.finished_at[r.urn] for r in resources if r.type == RAY_SERVICE_TYPE]
    if not ready or not serving:
        return None
    return Verdict(max(serving) - min(ready), CONTROL_PLANE_TO_FIRST_TOKEN_TARGET_MINUTES, "min")


def create_time_overrides(resources: list, start: ColdStart) -> dict[str, CreateDuration]:
    """By URN, the create times this stack's cold-start path decides: the RayService's follows the load
    path (its image is pre-pulled), the GPU nodes' pre-pull DaemonSet's the image path (pulled, or on the
    node's snapshot volume). The system nodes' pre-pull, for the Ray head, keeps the generic pull."""
    ray_service = CreateDuration(start.ray_service_minutes, "cold-start steps: " + ", ".join(sorted(
        {s.duration.source for s in start.ray_service})))
    gpu_image = CreateDuration(start.image_minutes, f"cold-start step: {start.image.duration.source}")
    overrides = {}
    for r in resources:
        if r.type == RAY_SERVICE_TYPE:
            overrides[r.urn] = ray_service
        elif r.type == PREPULL_TYPE and r.name == PREPULL_NAMES["gpu"]:
            overrides[r.urn] = gpu_image
    return overrides


def build_plan(run, *, stack: str, config_region: str | None = None) -> Plan:
    resources = list(run.resources)
    start = stack_cold_start(run)
    overrides = None if start is None else create_time_overrides(resources, start)
    region = region_of(resources, config_region)
    app = checked_app(run)
    reports, capacity_note = capacity_reports(app)
    secret = set(getattr(run, "secret_outputs", ()) or ())
    outputs = {k: (SECRET_MASK if k in secret else canonical(v)) for k, v in sorted(run.outputs.items())}
    offline = OfflineValues(run.invented)
    at_min = cost_inputs(resources, region or "unknown")
    at_max = cost_inputs(resources, region or "unknown", size="maxSize")
    path = critical_path(resources, overrides)
    return Plan(
        stack=stack,
        region=region,
        zones=availability_zones(run),
        counts=resource_counts(resources),
        tree=resource_tree(resources, offline),
        capacity=reports,
        capacity_note=capacity_note,
        cost=hourly_cost(at_min),
        cost_at_max=hourly_cost(at_max),
        scaling=scaling_bounds(run, node_group_costs(at_min, at_max)),
        critical_path=path,
        outputs=outputs,
        protections=protections(resources),
        offline_outputs=offline.marks({k: v for k, v in outputs.items() if k not in secret}),
        policy_violations=run_rules(policy_resources(run)),
        warnings=plan_warnings(run),
        slo=stack_slo_section(run, region or "unknown"),
        front_door=front_door_section(run),
        notes=list(app.notes) if app is not None else [],
        cold_start=start,
        control_plane_to_first_token=control_plane_to_first_token(resources, path),
        head_restart=head_restart(resources),
        updates=stack_updates(run, start, region or "unknown"),
    )
