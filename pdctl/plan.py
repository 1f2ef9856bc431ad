"""What a stack will create, cost and need, from the resources the real program registers offline.

`build_plan(run, ...)` turns an `OfflineRun` into plain data (`Plan.to_dict()` is the `--output json`
document, which `pdctl.plan_diff` compares between two branches); `pdctl.views.render_plan` draws it
for a terminal. Nothing here calls Pulumi or AWS.

The same program must give the same plan, byte for byte: the engine hands maps over in no fixed
order and numbers as floats, so every value goes through `canonical` and every list of resources is
sorted. Values the offline mock cloud made up (ids, ARNs, AZ names) are marked as such, and secret
inputs are masked (pdctl/resources.py). The resource tree is pdctl/resource_tree.py's, what the stack
bills for pdctl/cost.py's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from components.manifests.image_prepull import PREPULL_NAMES
from components.node_groups import gpu_node_group_resource_name
from facts.durations import CreateDuration
from facts.fault_tolerance import HEAD_RESTART, HeadRestart
from pdctl.cold_start import (
    CONTROL_PLANE_TO_FIRST_TOKEN_TARGET_MINUTES,
    DEPLOY_TARGET_MINUTES,
    ColdStart,
    Verdict,
    cold_start,
)
from pdctl.cost import CostEstimate, cost_inputs, hourly_cost, node_group_costs
from pdctl.critical_path import CriticalPath, critical_path
from pdctl.policy_check import Violation, policy_resources, run_rules
from pdctl.resource_tree import TreeNode, resource_counts, resource_tree
from pdctl.resources import (
    CLUSTER_TYPES,
    PREPULL_TYPE,
    RAY_SERVICE_TYPE,
    SECRET_MASK,
    SUBNET_TYPE,
    OfflineValues,
    canonical,
    lookup,
)
from pdctl.slo_cost import phase_nodes_cost, slo_section_extras
from pdctl.update_traffic import stack_updates
from serve_app.capacity import CapacityReport
from serve_app.checks import CheckedApp


def region_of(resources: Iterable, config_region: str | None) -> str | None:
    """The stack's region: its `aws:region` config, else the one its subnets' AZs are in."""
    if config_region:
        return config_region
    for r in resources:
        if r.type == SUBNET_TYPE and r.inputs.get("availabilityZone"):
            return r.inputs["availabilityZone"][:-1]
    return None


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
