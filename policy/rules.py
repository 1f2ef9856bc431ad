"""The guardrails of eks-pd-llm as CrossGuard policies, without the PolicyPack.

Each policy stops a mistake that costs money or safety on this system before `pulumi up` makes it:
an EFA node group spread over AZs, KV transfer left on UCX over EFA (100x slower, silently), nodes
with public IPs, IMDSv1 or an IMDS hop limit that lets pods take the node role, unencrypted
Secrets, a world-open API endpoint or an unprotected cluster in production, privileged pods outside
the serving namespace, floating images and charts.

The checks read resource inputs as the engine sees them: camelCase keys, pulumi-eks's components
(`eks:index:*`) and, when the engine shows a component's children in a real preview, the AWS
resources they create (`aws:eks/*`), so a rule holds at either level.

This module neither constructs the PolicyPack nor imports pulumi_policy: `pack.py` turns `RULES`
into pulumi_policy policies and `__main__.py` serves them. pulumi-policy pins protobuf ~=5.29, which
the project's main environment (Ray: protobuf >= 6.33) cannot hold, so the validators here use only
what the analyzer's argument objects carry (`resource_type`, `props`, `urn`, `name`, `opts.protect`,
`get_config()`; stack arguments' `resources` with `dependencies` and `property_dependencies`) and
are unit-tested in the main environment with look-alike objects.

It imports nothing from the Pulumi program either: the pack is versioned and published on its own,
so the few Kubernetes names it shares with `components/scheduling.py` are repeated here and pinned
equal by tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

# pulumi_policy's ReportViolation: (message, urn or None).
ReportViolation = Callable[..., None]
# Duck types of pulumi_policy.ResourceValidationArgs, StackValidationArgs and PolicyResource.
ResourceValidationArgs = Any
StackValidationArgs = Any
PolicyResource = Any

EKS_CLUSTER = "eks:index:Cluster"
EKS_MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
AWS_EKS_CLUSTER = "aws:eks/cluster:Cluster"
AWS_EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
NAMESPACE = "kubernetes:core/v1:Namespace"
RAY_SERVICE = "kubernetes:ray.io/v1:RayService"
HELM_CHART_TYPES = frozenset({
    "kubernetes:helm.sh/v3:Release",
    "kubernetes:helm.sh/v3:Chart",
    "kubernetes:helm.sh/v4:Chart",
})
NODE_GROUP_TYPES = frozenset({EKS_MANAGED_NODE_GROUP, AWS_EKS_NODE_GROUP})
CLUSTER_TYPES = frozenset({EKS_CLUSTER, AWS_EKS_CLUSTER})

# Same strings as components/scheduling.py EFA_RESOURCE and manifests' PSA label (tests pin them).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
PSA_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"

EFA_INTERFACE_TYPES = frozenset({"efa", "efa-only"})
KV_BACKEND_REQUIRED = "LIBFABRIC"
# vLLM's NixlConnector uses UCX when kv_connector_extra_config.backends is absent.
KV_BACKENDS_DEFAULT = ("UCX",)
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
# An IMDSv2 response crosses one hop: the node itself and host-network pods, not pods behind the
# extra hop into their own network namespace.
MAX_IMDS_HOP_LIMIT = 1
DEFAULT_PRODUCTION_STACKS = ("prod",)

# EKS AMI types of accelerated nodes (AL2023_x86_64_NVIDIA, AL2_x86_64_GPU, AL2023_x86_64_NEURON, ...).
GPU_AMI_KINDS = ("NVIDIA", "NEURON", "GPU")
# The most GPU nodes each environment's node groups may grow to, unless the pack's config says
# otherwise: a typo in gpuNodeMaxCount must not let the Cluster Autoscaler buy a rack of GPUs.
DEFAULT_MAX_GPU_NODES: Mapping[str, int] = {"dev": 4, "prod": 16}
DEFAULT_MAX_GPU_NODES_OTHER_STACKS = 4
GPU_NODE_BOUND_CONFIG: Mapping[str, Mapping[str, Any]] = {
    "maxGpuNodes": {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0},
        "default": dict(DEFAULT_MAX_GPU_NODES),
        "description": "Most GPU nodes (all GPU node groups at their maximum size) per stack name.",
    },
    "defaultMaxGpuNodes": {
        "type": "integer",
        "minimum": 0,
        "default": DEFAULT_MAX_GPU_NODES_OTHER_STACKS,
        "description": "Most GPU nodes for a stack maxGpuNodes does not name.",
    },
}

# pulumi_policy.PolicyConfigSchema properties of the rules that treat production differently.
PRODUCTION_CONFIG: Mapping[str, Mapping[str, Any]] = {
    "productionStacks": {
        "type": "array",
        "items": {"type": "string"},
        "default": list(DEFAULT_PRODUCTION_STACKS),
        "description": "Stacks held to production rules.",
    },
}

# An exact chart version: 1.7.0, v0.5.6, 1.7.0-rc.1. No ranges (^1.7, ~1, >=1, 1.x, *).
_EXACT_CHART_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


# ---------------------------------------------------------------------------------------------
# Reading resources
# ---------------------------------------------------------------------------------------------

def stack_of(urn: str) -> str:
    """`urn:pulumi:<stack>::<project>::<type>::<name>` → `<stack>`."""
    return urn.split("::", 1)[0].rsplit(":", 1)[-1]


def is_production(urn: str, config: Mapping[str, Any]) -> bool:
    return stack_of(urn) in config.get("productionStacks", DEFAULT_PRODUCTION_STACKS)


def _truthy(value: Any) -> bool:
    # Launch template booleans are strings in the AWS API ("true"); pulumi-eks's are booleans.
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


@dataclass(frozen=True)
class PodTemplate:
    """One pod spec inside a workload.

    `where` is its path in the object (e.g. `spec.rayClusterConfig.workerGroupSpecs[gpu-workers]`);
    `group` names the pods it makes: `head` or the worker group's name for Ray, "" otherwise.
    """

    where: str
    spec: Mapping[str, Any]
    group: str = ""


def pod_templates(resource_type: str, props: Mapping[str, Any]) -> list[PodTemplate]:
    """The pod templates of a Kubernetes workload, RayService and RayCluster included."""
    kind = resource_type.rsplit(":", 1)[-1]
    spec = props.get("spec")
    if not isinstance(spec, Mapping):
        return []
    if kind == "Pod":
        return [PodTemplate("spec", spec)]
    if kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        return _template(spec.get("template"), "spec.template")
    if kind == "CronJob":
        return _template(_get(spec, "jobTemplate", "spec", "template"), "spec.jobTemplate.spec.template")
    if kind in {"RayService", "RayJob"}:
        cluster_key = "rayClusterConfig" if kind == "RayService" else "rayClusterSpec"
        return _ray_cluster_templates(spec.get(cluster_key), f"spec.{cluster_key}")
    if kind == "RayCluster":
        return _ray_cluster_templates(spec, "spec")
    return []


def _template(template: Any, where: str, group: str = "") -> list[PodTemplate]:
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        return []
    return [PodTemplate(where, template["spec"], group)]


def _ray_cluster_templates(cluster: Any, where: str) -> list[PodTemplate]:
    if not isinstance(cluster, Mapping):
        return []
    found = _template(_get(cluster, "headGroupSpec", "template"), f"{where}.headGroupSpec", "head")
    for group in cluster.get("workerGroupSpecs") or []:
        name = group.get("groupName", "?") if isinstance(group, Mapping) else "?"
        found += _template(_get(group, "template"), f"{where}.workerGroupSpecs[{name}]", name)
    return found


def containers(pod_spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod_spec.get(key) or []:
            if isinstance(container, Mapping):
                yield container


def _namespace_of(props: Mapping[str, Any]) -> str:
    return _get(props, "metadata", "namespace") or "default"


def _dependencies(resource: PolicyResource) -> list[PolicyResource]:
    deps = list(resource.dependencies)
    for more in resource.property_dependencies.values():
        deps += [d for d in more if d not in deps]
    return deps


def node_group_launch_templates(node_group: PolicyResource) -> list[PolicyResource]:
    """The launch templates a node group's inputs came from (its `launchTemplate.id`)."""
    return [d for d in _dependencies(node_group) if d.resource_type == LAUNCH_TEMPLATE]


def launch_template_has_efa(props: Mapping[str, Any]) -> bool:
    return any(isinstance(nic, Mapping) and nic.get("interfaceType") in EFA_INTERFACE_TYPES
               for nic in props.get("networkInterfaces") or [])


def node_group_uses_efa(node_group: PolicyResource) -> bool:
    if _truthy(node_group.props.get("enableEfaSupport")):
        return True
    return any(launch_template_has_efa(lt.props) for lt in node_group_launch_templates(node_group))


def node_group_availability_zones(node_group: PolicyResource) -> set[str] | None:
    """AZs of the subnets a node group launches into, or None where they cannot be told.

    A subnet id alone says nothing about its AZ, so the AZs come from the Subnet resources the
    node group's inputs depend on; without those, one subnet id means one AZ.
    """
    props = node_group.props
    if _truthy(props.get("enableEfaSupport")) and props.get("placementGroupAvailabilityZone"):
        # pulumi-eks then launches only into the placement group's AZ.
        return {props["placementGroupAvailabilityZone"]}
    subnets = [d for d in _dependencies(node_group) if d.resource_type == SUBNET]
    azs = {s.props.get("availabilityZone") for s in subnets}
    if subnets and None not in azs:
        return azs
    subnet_ids = props.get("subnetIds") or []
    return {"<the only subnet's AZ>"} if len(subnet_ids) == 1 else None


def kv_backends_by_phase(serve_config_v2: Any) -> Iterator[tuple[str, Any]]:
    """(`<app>.<phase>`, backends) for each PD phase in a RayService's serveConfigV2.

    backends is a list, or None where the phase's config is not inline (a YAML path the policy
    cannot open). A missing `kv_connector_extra_config.backends` means vLLM's default, UCX.
    """
    document = yaml.safe_load(serve_config_v2) if isinstance(serve_config_v2, str) else serve_config_v2
    for app in _get(document, "applications") or []:
        if not isinstance(app, Mapping) or not str(app.get("import_path", "")).endswith("build_pd_openai_app"):
            continue
        for phase in ("prefill_config", "decode_config"):
            config = _get(app, "args", phase)
            where = f"{app.get('name', '?')}.{phase}"
            if not isinstance(config, Mapping):
                yield where, None
                continue
            transfer = _get(config, "engine_kwargs", "kv_transfer_config") or {}
            backends = _get(transfer, "kv_connector_extra_config", "backends")
            yield where, list(backends) if backends else list(KV_BACKENDS_DEFAULT)


def image_pin_problem(image: Any) -> str | None:
    """Why an image reference floats, or None when it names one tag (not latest) or a digest."""
    if not isinstance(image, str) or not image:
        return "no image"
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "no tag (means latest)"
    if last.rsplit(":", 1)[1] == "latest":
        return "tag latest"
    return None


# ---------------------------------------------------------------------------------------------
# Resource policies
# ---------------------------------------------------------------------------------------------

def _require_imdsv2(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if args.resource_type == LAUNCH_TEMPLATE:
        if _get(props, "metadataOptions", "httpTokens") != "required":
            report("launch template must set metadataOptions.httpTokens = \"required\" (IMDSv2): "
                   "with IMDSv1 any pod that can reach 169.254.169.254 can take the node role")
        hop_limit = _get(props, "metadataOptions", "httpPutResponseHopLimit")
        if not isinstance(hop_limit, (int, float)) or isinstance(hop_limit, bool) or hop_limit > MAX_IMDS_HOP_LIMIT:
            report(f"launch template must set metadataOptions.httpPutResponseHopLimit <= {MAX_IMDS_HOP_LIMIT}, got "
                   f"{hop_limit!r} (unset: the AMI's or account's default): with 2 hops an IMDSv2 token reaches "
                   "pods in their own network namespace, and with it the node role's credentials")
    elif args.resource_type == EKS_MANAGED_NODE_GROUP:
        if not props.get("launchTemplate"):
            report("managed node group must use a launch template that requires IMDSv2 with hop limit "
                   f"{MAX_IMDS_HOP_LIMIT}: enableIMDSv2 alone sets hop limit 2, and without either EKS allows IMDSv1")
    elif args.resource_type == AWS_EKS_NODE_GROUP and not props.get("launchTemplate"):
        report("EKS node group without a launch template gets EKS's default one, which allows IMDSv1")


def _require_secrets_encryption(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    if args.resource_type == EKS_CLUSTER:
        if not props.get("encryptionConfigKeyArn"):
            report("EKS cluster must set encryptionConfigKeyArn: Kubernetes Secrets (the HF token) "
                   "are otherwise stored unencrypted by a customer key in etcd")
    elif args.resource_type == AWS_EKS_CLUSTER:
        configs = props.get("encryptionConfig")
        configs = configs if isinstance(configs, list) else [configs] if configs else []
        if not any("secrets" in (c.get("resources") or []) and _get(c, "provider", "keyArn") for c in configs):
            report("EKS cluster must encrypt the `secrets` resource with a KMS key (encryptionConfig)")


def _endpoint_settings(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any]:
    return props if resource_type == EKS_CLUSTER else (props.get("vpcConfig") or {})


def _restrict_api_endpoint_in_production(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in CLUSTER_TYPES or not is_production(args.urn, args.get_config()):
        return
    endpoint = _endpoint_settings(args.resource_type, args.props)
    if endpoint.get("endpointPublicAccess") is False:
        return
    cidrs = endpoint.get("publicAccessCidrs") or []
    # A public endpoint with no CIDR list is open to 0.0.0.0/0 (the EKS default).
    open_to = sorted(WORLD_CIDRS.intersection(cidrs)) or ([] if cidrs else ["0.0.0.0/0 (EKS default)"])
    if open_to:
        report(f"production EKS API endpoint is open to {', '.join(open_to)}: set endpointPublicAccess "
               "false (apiPublicAccessCidrs [] with deployFromInsideVpc: true) or list the operator CIDRs")


def _require_deletion_protection_in_production(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in CLUSTER_TYPES or not is_production(args.urn, args.get_config()):
        return
    if _truthy(args.props.get("deletionProtection")) or (args.opts is not None and args.opts.protect):
        return
    report("production EKS cluster must have deletion protection (deletionProtection: true or the "
           "protect resource option): deleting it takes the endpoint down and costs ~30 min to rebuild")


def _require_pinned_images(args: ResourceValidationArgs, report: ReportViolation) -> None:
    for template in pod_templates(args.resource_type, args.props):
        for container in containers(template.spec):
            problem = image_pin_problem(container.get("image"))
            if problem:
                report(f"{template.where} container {container.get('name', '?')!r}: image "
                       f"{container.get('image')!r} is not pinned ({problem}); name a version tag or a digest")


def _require_pinned_charts(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in HELM_CHART_TYPES:
        return
    version = args.props.get("version")
    if not isinstance(version, str) or not _EXACT_CHART_VERSION.match(version):
        report(f"Helm chart {args.props.get('chart', '?')!r} must pin an exact version, got {version!r}: "
               "an unpinned chart changes what the cluster runs on the next `pulumi up` without a diff")


# ---------------------------------------------------------------------------------------------
# Stack policies (they need more than one resource)
# ---------------------------------------------------------------------------------------------

def _efa_node_groups(resources: Iterable[PolicyResource]) -> list[PolicyResource]:
    return [r for r in resources if r.resource_type in NODE_GROUP_TYPES and node_group_uses_efa(r)]


def _efa_node_groups_single_az(args: StackValidationArgs, report: ReportViolation) -> None:
    for node_group in _efa_node_groups(args.resources):
        azs = node_group_availability_zones(node_group)
        if azs is None or len(azs) != 1:
            seen = f"AZs {sorted(azs)}" if azs else f"{len(node_group.props.get('subnetIds') or [])} subnets"
            report(f"EFA node group {node_group.name!r} must launch into one AZ (got {seen}): EFA traffic "
                   "does not cross AZs and the cluster placement group lives in one", node_group.urn)


def _efa_kv_transfer_over_libfabric(args: StackValidationArgs, report: ReportViolation) -> None:
    if not _efa_node_groups(args.resources):
        return
    for service in (r for r in args.resources if r.resource_type == RAY_SERVICE):
        for where, backends in kv_backends_by_phase(_get(service.props, "spec", "serveConfigV2")):
            if backends is None:
                report(f"{where}: KV transfer backends cannot be checked (config is not inline); "
                       "inline it so the policy can see LIBFABRIC", service.urn)
            elif backends != [KV_BACKEND_REQUIRED]:
                report(f"{where}: GPU nodes have EFA but KV transfer backends are {backends}; only "
                       "[\"LIBFABRIC\"] uses EFA (UCX over EFA runs at TCP speed, ~100x slower TTFT, "
                       "and fails silently)", service.urn)


def _privileged_pods_only_for_efa_serving(args: StackValidationArgs, report: ReportViolation) -> None:
    serving = {_namespace_of(r.props) for r in args.resources if r.resource_type == RAY_SERVICE}
    for resource in args.resources:
        if resource.resource_type == NAMESPACE:
            name = _get(resource.props, "metadata", "name")
            if _get(resource.props, "metadata", "labels", PSA_ENFORCE_LABEL) == "privileged" and name not in serving:
                report(f"namespace {name!r} allows privileged pods but serves no RayService; "
                       "only the serving namespace may (EFA memory registration)", resource.urn)
            continue
        for template in pod_templates(resource.resource_type, resource.props):
            for container in containers(template.spec):
                if not _truthy(_get(container, "securityContext", "privileged")):
                    continue
                label = f"{resource.name} {template.where} container {container.get('name', '?')!r}"
                if _namespace_of(resource.props) not in serving:
                    report(f"{label} is privileged outside the serving namespace {sorted(serving)}", resource.urn)
                elif EFA_RESOURCE not in (_get(container, "resources", "limits") or {}):
                    report(f"{label} is privileged without requesting {EFA_RESOURCE}: privileged is "
                           "allowed only for EFA memory registration", resource.urn)


def gpu_node_groups(resources: Iterable[PolicyResource]) -> list[PolicyResource]:
    """Node groups of GPU nodes: a GPU AMI type (EKS's *_NVIDIA / *_NEURON / *_GPU) or EFA."""
    return [r for r in resources if r.resource_type in NODE_GROUP_TYPES and (
        any(kind in str(r.props.get("amiType") or "").upper() for kind in GPU_AMI_KINDS) or node_group_uses_efa(r))]


def most_nodes(node_group: PolicyResource) -> int | None:
    """How many nodes the group may grow to (scalingConfig.maxSize; desiredSize when no max)."""
    scaling = node_group.props.get("scalingConfig") or {}
    value = scaling.get("maxSize", scaling.get("desiredSize"))
    return int(value) if isinstance(value, (int, float)) else None


def max_gpu_nodes(stack: str, config: Mapping[str, Any]) -> int:
    by_stack = config.get("maxGpuNodes", DEFAULT_MAX_GPU_NODES)
    return int(by_stack.get(stack, config.get("defaultMaxGpuNodes", DEFAULT_MAX_GPU_NODES_OTHER_STACKS)))


def _gpu_nodes_bounded_per_environment(args: StackValidationArgs, report: ReportViolation) -> None:
    groups = gpu_node_groups(args.resources)
    if not groups:
        return
    stack = stack_of(groups[0].urn)
    bound = max_gpu_nodes(stack, args.get_config())
    total = 0
    for group in groups:
        most = most_nodes(group)
        if most is None:
            report(f"GPU node group {group.name!r} has no known maximum size (scalingConfig.maxSize): the "
                   f"bound of {bound} GPU nodes for stack {stack!r} cannot be checked", group.urn)
            return
        total += most
    if total > bound:
        report(f"GPU node groups {[g.name for g in groups]} may grow to {total} nodes; stack {stack!r} allows "
               f"at most {bound} (policy config maxGpuNodes): lower gpuNodeMaxCount or raise the bound", groups[0].urn)


def _nodes_without_public_ips(args: StackValidationArgs, report: ReportViolation) -> None:
    for resource in args.resources:
        props = resource.props
        if resource.resource_type == LAUNCH_TEMPLATE:
            for nic in props.get("networkInterfaces") or []:
                if isinstance(nic, Mapping) and _truthy(nic.get("associatePublicIpAddress")):
                    report(f"launch template {resource.name!r} gives nodes a public IP "
                           "(networkInterfaces.associatePublicIpAddress)", resource.urn)
        elif resource.resource_type == EKS_CLUSTER:
            default_group = not _truthy(props.get("skipDefaultNodeGroup"))
            if default_group and props.get("nodeAssociatePublicIpAddress") is not False:
                report("eks.Cluster's default node group gets public IPs: set skipDefaultNodeGroup "
                       "(node groups are separate) or nodeAssociatePublicIpAddress false", resource.urn)
        elif resource.resource_type in NODE_GROUP_TYPES:
            public = [s.name for s in _dependencies(resource)
                      if s.resource_type == SUBNET and _truthy(s.props.get("mapPublicIpOnLaunch"))]
            if public:
                report(f"node group {resource.name!r} launches into public subnets {public}; "
                       "nodes belong in private subnets behind NAT", resource.urn)


@dataclass(frozen=True)
class Rule:
    """One policy of the pack: `pack.py` makes it a Resource- or StackValidationPolicy (mandatory)."""

    name: str
    description: str
    scope: Literal["resource", "stack"]
    validate: Callable[[Any, ReportViolation], None]
    config: Mapping[str, Mapping[str, Any]] | None = None


RULES: tuple[Rule, ...] = (
    Rule("efa-node-group-single-az",
         "A node group with EFA launches into exactly one availability zone.",
         "stack", _efa_node_groups_single_az),
    Rule("efa-kv-transfer-libfabric",
         "With EFA GPU nodes, every RayService PD phase sends KV over LIBFABRIC, never UCX.",
         "stack", _efa_kv_transfer_over_libfabric),
    Rule("gpu-nodes-bounded-per-environment",
         "The GPU node groups' maximum size stays within the environment's bound (maxGpuNodes).",
         "stack", _gpu_nodes_bounded_per_environment, GPU_NODE_BOUND_CONFIG),
    Rule("nodes-no-public-ip",
         "Worker nodes get no public IP addresses.",
         "stack", _nodes_without_public_ips),
    Rule("imdsv2-required",
         "Node launch templates require IMDSv2 (httpTokens required) with a hop limit of 1, so pods "
         "cannot fetch the node role's credentials.",
         "resource", _require_imdsv2),
    Rule("eks-secrets-encrypted",
         "EKS encrypts Kubernetes Secrets with a KMS key.",
         "resource", _require_secrets_encryption),
    Rule("prod-api-endpoint-not-public",
         "In production the EKS API endpoint is private or limited to listed CIDRs, never 0.0.0.0/0.",
         "resource", _restrict_api_endpoint_in_production, PRODUCTION_CONFIG),
    Rule("privileged-pods-only-for-efa-serving",
         "Privileged containers only in the RayService namespace and only with an EFA device.",
         "stack", _privileged_pods_only_for_efa_serving),
    Rule("images-pinned",
         "Every container image names a version tag (not latest) or a digest.",
         "resource", _require_pinned_images),
    Rule("helm-charts-pinned",
         "Every Helm chart pins an exact version.",
         "resource", _require_pinned_charts),
    Rule("prod-deletion-protection",
         "In production the EKS cluster has deletion protection.",
         "resource", _require_deletion_protection_in_production, PRODUCTION_CONFIG),
)
