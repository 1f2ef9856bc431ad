"""The plan's resource tree: each resource nested under its parent, with the settings a reviewer checks,
its resource options and all its inputs (secrets masked, made-up values marked)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from pdctl.resources import (
    LAUNCH_TEMPLATE_TYPE,
    NAT_GATEWAY_TYPE,
    RAY_SERVICE_TYPE,
    REPLICATION_GROUP_TYPE,
    SUBNET_TYPE,
    OfflineValues,
    canonical,
    lookup,
    masked,
)

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
