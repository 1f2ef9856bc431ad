"""Stack settings: every config key read once, typed, validated and frozen before any resource.

`Pulumi.yaml`'s `config:` block is the one list of settings: this module reads it to learn which
keys exist, their types and their defaults, so a key in a stack file that is not declared there is
refused as a typo (the most common stack-file mistake), and a default is written down once.

`settings_from_config(raw, project=, stack=, ask_cloud=)`: `raw` maps config keys to strings exactly
as `pulumi.Config.get` returns them (arrays as JSON text). Keys of the project namespace may be given
bare (`azCount`) or qualified (`eks-pd-llm:azCount`); other namespaces keep their prefix
(`aws:region`). Each key is checked on its own first; then `ask_cloud` says what EC2 knows of the
region and the node types (the program asks AWS through invokes: components/discovery.py; tests
and tools pass recorded answers) and the model's own config is read (serve_app/model_facts.py),
and the settings are judged against those. Every mistake raises `ConfigError` naming the config key,
the value and what is allowed; a pydantic `ValidationError` never escapes.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, Field, field_validator, model_validator

from components.discovery import REGION_KEY, CloudFacts, CloudQuery, Zone, discover
from components.node_storage import NodeStorage, node_storage
from components.project import project_file
from components.scheduling import RESERVED_NAMESPACES, gpu_node_labels
from components.sizing import WorkerResources, worker_resources
from components.workload_settings import StackSlo, WorkloadSettings, stack_slo
from facts.aws import DOCUMENTATION_ACCOUNT_IDS, EKS_CONTROL_PLANE_REFUSED_ZONE_IDS, is_documentation_cidr
from facts.images import (
    DLC_TAG,
    FLOATING_TAGS,
    PUBLIC_DLC_REPOSITORY,
    ServingStack,
    default_ray_image,
    serving_stack,
    split_image,
)
from facts.instances import InstanceType
from facts.metrics import VLLM_TPOT_BUCKETS_SECONDS, VLLM_TTFT_BUCKETS_SECONDS
from serve_app.checks import CheckedApp, DeploymentTarget, NodeGroupTarget, check_app, phase_node_group_keys
from serve_app.config import HTTP_FRONTS, PHASES, S3_SCHEME, STREAMER_LOAD_FORMATS, HttpFront, Phase
from serve_app.errors import ConfigError, unknown_setting
from serve_app.model_facts import ModelFacts, read_model_facts
from serve_app.settings import ServeAppSettings
from serve_app.slo_sizing import Targets
from serve_app.stack_keys import StackKeyModel, from_stack_keys

HF_TOKEN_KEY = "hfToken"

# EKS Kubernetes versions in standard support (EKS version calendar, read 2026-11). The node AMIs
# (AL2023 standard and NVIDIA) are published for exactly these.
SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35")

# The Ray head pod requests 2 CPU / 8 GiB (limits 3 CPU / 12 GiB) beside the KubeRay operator,
# CoreDNS and the node's own reservations on these nodes.
MIN_SYSTEM_NODE_VCPUS = 4
MIN_SYSTEM_NODE_MEMORY_GIB = 16
# The node AMIs (AL2023_x86_64_STANDARD, AL2023_x86_64_NVIDIA in components/node_groups.py) are x86_64.
NODE_ARCHITECTURE = "x86_64"

_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
_AVAILABILITY_ZONE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d[a-z]$")
_ZONE_ID = re.compile(r"^[a-z]{3,7}\d-az\d+$")
# EKS access entries take IAM roles and users (not STS assumed-role session ARNs).
_IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}$")
_IAM_POLICY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:policy/[\w+=,.@/-]{1,512}$")
_CHART_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


# ── The declared keys (Pulumi.yaml) ───────────────────────────────────────────────────────────

ConfigType = Literal["string", "integer", "boolean", "array"]


@dataclass(frozen=True)
class DeclaredKey:
    """One `config:` entry of Pulumi.yaml; `default` is in the string form Config.get returns."""

    name: str
    type: ConfigType
    default: str | None
    description: str


def as_config_string(value: Any) -> str:
    """A YAML value in the string form the Pulumi SDK hands a program (JSON for arrays and objects)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: the plain
    loader keeps the last one silently (the Pulumi CLI's Go YAML reader refuses it too)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, str) and key in seen:
                raise ConfigError(key, f"set on lines {seen[key]} and {line} of {node.start_mark.name}",
                                  "each key once", "YAML would silently keep the last one")
            seen.setdefault(key, line)
        return super().construct_mapping(node, deep)


def load_yaml_strictly(path: Path) -> Any:
    """A YAML file as data; a key set twice in one mapping is refused (ConfigError naming it)."""
    with path.open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: safe


def declared_keys(path: Path | None = None) -> Mapping[str, DeclaredKey]:
    """The settings Pulumi.yaml declares, by the name a stack file uses (bare for the project);
    `path` defaults to the project's own (components/project.py finds it)."""
    return _declared_keys(path or project_file())


@functools.cache
def _declared_keys(path: Path) -> Mapping[str, DeclaredKey]:
    config = load_yaml_strictly(path)["config"]
    keys: dict[str, DeclaredKey] = {}
    for name, entry in config.items():
        if not isinstance(entry, dict):  # `key: value` short form
            entry = {"value": entry}
        default = entry.get("default", entry.get("value"))
        keys[name] = DeclaredKey(
            name=name,
            type=entry.get("type", "string"),
            default=None if default is None else as_config_string(default),
            description=" ".join(str(entry.get("description", "")).split()),
        )
    return keys


def project_name(path: Path | None = None) -> str:
    return load_yaml_strictly(path or project_file())["name"]


@functools.cache
def provider_config_keys(package: str) -> frozenset[str]:
    """The config keys a Pulumi provider SDK reads (`pulumi_aws` → region, profile, …), taken from
    its generated `config/vars.py` (every `__config__.get*('<key>')` call), so the list follows the
    installed SDK version instead of a copy here. Empty (no check) where the SDK is not installed: the
    lab reads the stack's serving settings on a GPU host without the Pulumi SDKs."""
    try:
        spec = importlib.util.find_spec(f"{package}.config.vars")
    except ModuleNotFoundError:
        return frozenset()
    if spec is None or spec.origin is None:
        return frozenset()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return frozenset(
        node.args[0].value for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "__config__"
        and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


# Provider namespaces whose keys are checked against their SDK's own list.
CHECKED_PROVIDER_NAMESPACES = {"aws": "pulumi_aws"}
# The namespaces besides the project's that something in this program reads: its providers'
# (aws, eks, kubernetes) and the engine's own (pulumi:tags, …). A key in any other goes unread.
READ_NAMESPACES = frozenset({"aws", "eks", "kubernetes", "pulumi"})


# ── Typed slices ──────────────────────────────────────────────────────────────────────────────
# Each field's alias is the config key it comes from, so a validation error names that key; each
# field's description says what is allowed (it becomes ConfigError.allowed).

_Settings = StackKeyModel


def _cluster_name(value: str) -> str:
    # IAM role and security group names are derived from it and must stay within AWS limits.
    if len(value) > 40 or not _DNS_1035_LABEL.match(value):
        raise ValueError("not a DNS-1035 label of at most 40 characters")
    return value


ClusterName = Annotated[str, AfterValidator(_cluster_name)]


class NetworkSettings(_Settings):
    """The VPC: its CIDR, how many AZs it spans and how private subnets reach the internet."""

    cluster_name: ClusterName = Field(alias="clusterName", description="a DNS-1035 label, at most 40 characters")
    vpc_cidr: ipaddress.IPv4Network = Field(
        alias="vpcCidr", description="a private (RFC 1918) IPv4 network, prefix /16 to /20, no host bits set")
    az_count: int = Field(alias="azCount", ge=2, le=6, description="an integer from 2 to 6")
    nat_mode: Literal["single", "perAz"] = Field(alias="natMode", description="single or perAz")
    protect: bool = Field(alias="deletionProtection", description="true or false")

    @field_validator("vpc_cidr", mode="before")
    @classmethod
    def _strict_network(cls, value: Any) -> Any:
        # ip_network's default (strict) refuses host bits: 10.0.0.1/16 is a typo, not a network.
        return ipaddress.IPv4Network(value) if isinstance(value, str) else value

    @field_validator("vpc_cidr")
    @classmethod
    def _private_and_sized(cls, value: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if not any(value.subnet_of(block) for block in _RFC1918):
            raise ValueError("not inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
        if not 16 <= value.prefixlen <= 20:
            raise ValueError(f"/{value.prefixlen} leaves no room for the subnets (allowed /16 to /20)")
        return value

    def subnet_cidrs(self) -> list[tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]]:
        """(private, public) CIDR per AZ, in network AZ order.

        Private subnets take 1/8 of the VPC each (VPC CNI gives every pod a VPC address); public
        subnets only hold NAT gateways and load balancers, so they share the last eighth in 1/64ths.
        """
        eighths = list(self.vpc_cidr.subnets(prefixlen_diff=3))
        public = list(eighths[-1].subnets(prefixlen_diff=3))
        return [(eighths[i], public[i]) for i in range(self.az_count)]


_RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


class ClusterSettings(_Settings):
    """The EKS control plane: version, who administers it, who can reach its API."""

    name: ClusterName = Field(alias="clusterName", description="a DNS-1035 label, at most 40 characters")
    kubernetes_version: str = Field(
        alias="kubernetesVersion", description=", ".join(SUPPORTED_KUBERNETES_VERSIONS))
    admin_principal_arns: tuple[str, ...] = Field(
        alias="adminPrincipalArns",
        description="IAM role or user ARNs (arn:aws:iam::<12-digit account>:role/<name> or :user/<name>)")
    api_public_access_cidrs: tuple[str, ...] = Field(
        alias="apiPublicAccessCidrs",
        description="IPv4 CIDRs that may reach the API (your office or CI egress), e.g. [\"198.18.0.0/24\"]; "
                    "[] (private only) needs deployFromInsideVpc: true")
    deploy_from_inside_vpc: bool = Field(alias="deployFromInsideVpc", description="true or false")
    protect: bool = Field(alias="deletionProtection", description="true or false")
    iam_permissions_boundary_arn: str | None = Field(
        alias="iamPermissionsBoundaryArn",
        description='"" or a customer managed policy ARN (arn:aws:iam::<12-digit account>:policy/<name>)')
    keep_earlier_iam_roles: bool = Field(alias="keepEarlierIamRoles", description="true or false")

    @field_validator("iam_permissions_boundary_arn", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None

    @field_validator("iam_permissions_boundary_arn")
    @classmethod
    def _policy_arn(cls, value: str | None) -> str | None:
        if value is not None and not _IAM_POLICY_ARN.match(value):
            raise ValueError("not a customer managed IAM policy ARN")
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            why = "not a Kubernetes version EKS supports (a minor version like 1.35)"
            if re.fullmatch(r"\d+\.[1-9]", value):
                # YAML reads an unquoted 1.30 as the number 1.3: the trailing zero is gone before
                # the program sees the value.
                why += (f'; if the stack file says {value}0 unquoted, YAML read it as the number {value}: '
                        f'quote it ("{value}0")')
            raise ValueError(why)
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principal_arns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arn in value:
            if not _IAM_PRINCIPAL_ARN.match(arn):
                raise ValueError(f"{arn!r} is not an IAM role or user ARN")
        if len(set(value)) != len(value):
            raise ValueError("an ARN is listed twice")
        return value

    @field_validator("api_public_access_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for cidr in value:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError as error:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR ({error})") from None
        return value

    @model_validator(mode="after")
    def _reachable_by_pulumi_up(self) -> ClusterSettings:
        # Private-only is a valid endpoint, but the Helm releases and the RayService are applied
        # through it by `pulumi up` itself: from a laptop or a hosted CI runner that fails after
        # the VPC, the cluster and both node groups exist (about 25 minutes of GPUs billed).
        if not self.api_public_access_cidrs and not self.deploy_from_inside_vpc:
            raise ConfigError(
                self.key("api_public_access_cidrs"), [], "the CIDRs `pulumi up` and kubectl connect from, "
                f"or [] with {self.key('deploy_from_inside_vpc')}: true",
                "[] makes the API endpoint private: `pulumi up` from outside the VPC would build the VPC, cluster "
                "and GPU nodes, then fail at the first Helm release")
        return self

    @property
    def endpoint_public_access(self) -> bool:
        return bool(self.api_public_access_cidrs)


class SystemNodeSettings(_Settings):
    """The CPU node group for the KubeRay operator, the Ray head and cluster add-ons."""

    instance_type: str = Field(alias="systemNodeType", min_length=1, description=(
        f"an {NODE_ARCHITECTURE} EC2 type with at least {MIN_SYSTEM_NODE_VCPUS} vCPUs and "
        f"{MIN_SYSTEM_NODE_MEMORY_GIB} GiB of memory"))
    count: int = Field(alias="systemNodeCount", ge=1, le=10, description="an integer from 1 to 10")

    def check(self, instance: InstanceType) -> InstanceType:
        """Refuse a type EC2 describes as too small for what runs there, or of another architecture."""
        key, allowed = self.key("instance_type"), type(self).model_fields["instance_type"].description or ""
        if NODE_ARCHITECTURE not in instance.architectures:
            raise ConfigError(key, instance.name, allowed,
                              f"EC2 says it is {'/'.join(instance.architectures)}; the node AMI is {NODE_ARCHITECTURE}")
        if instance.vcpus < MIN_SYSTEM_NODE_VCPUS or instance.memory_gib < MIN_SYSTEM_NODE_MEMORY_GIB:
            raise ConfigError(key, instance.name, allowed,
                              f"EC2 says {instance.vcpus} vCPUs and {instance.memory_gib} GiB; the Ray head requests "
                              "2 CPU / 8 GiB (limit 12 GiB) next to the KubeRay operator and CoreDNS")
        return instance


class GpuNodeSettings(_Settings):
    """The EFA GPU node group prefill and decode run on."""

    instance_type: str = Field(alias="gpuNodeType", min_length=1, description=(
        f"an {NODE_ARCHITECTURE} EC2 type with NVIDIA GPUs and EFA support "
        "(e.g. g6.8xlarge, g6e.12xlarge, p5.48xlarge)"))
    count: int = Field(alias="gpuNodeCount", ge=1, le=64, description="an integer from 1 to 64")
    max_count: int = Field(
        alias="gpuNodeMaxCount", ge=0, le=64,
        description="0 (fixed at gpuNodeCount) or an integer from gpuNodeCount to 64")
    availability_zone: str | None = Field(
        alias="gpuAvailabilityZone",
        description='"" or an AZ of the region by name (us-west-2b) or zone ID (usw2-az2)')
    disk_gib: int = Field(alias="gpuDiskGiB", ge=100, le=16384, description="an integer from 100 to 16384")

    @field_validator("availability_zone", mode="before")
    @classmethod
    def _empty_is_auto(cls, value: Any) -> Any:
        return value or None

    @field_validator("availability_zone")
    @classmethod
    def _az_name_or_id(cls, value: str | None) -> str | None:
        if value is not None and not (_AVAILABILITY_ZONE.match(value) or _ZONE_ID.match(value)):
            raise ValueError("not an availability zone name or zone ID")
        return value

    @model_validator(mode="after")
    def _bounds_ordered(self) -> GpuNodeSettings:
        if self.max_count and self.max_count < self.count:
            raise ConfigError(self.key("max_count"), self.max_count,
                              f"0 (fixed) or ≥ {self.key('count')} ({self.count})",
                              "the node group's maximum cannot be below its minimum")
        return self

    def check(self, instance: InstanceType) -> InstanceType:
        """Refuse a type EC2 describes without an NVIDIA GPU or without EFA, naming what it lacks."""
        return check_gpu_instance(instance, self.key("instance_type"),
                                  type(self).model_fields["instance_type"].description or "")

    @property
    def autoscaled(self) -> bool:
        """Whether the Cluster Autoscaler may grow the group past `count`."""
        return self.max_count > self.count

    @property
    def most(self) -> int:
        return max(self.count, self.max_count)


def check_gpu_instance(instance: InstanceType, key: str, allowed: str) -> InstanceType:
    """Refuse a GPU node type (the one `key` names) EC2 describes without an NVIDIA GPU, without EFA
    or of another architecture, naming what it lacks."""
    if not instance.has_gpu:
        raise ConfigError(key, instance.name, allowed, "EC2 says it has no NVIDIA GPU; the vLLM engines need one")
    if not instance.efa_capable:
        raise ConfigError(key, instance.name, allowed,
                          "EC2 says it does not support EFA; prefill/decode KV transfer needs it")
    if NODE_ARCHITECTURE not in instance.architectures:
        raise ConfigError(key, instance.name, allowed, f"EC2 says it is {'/'.join(instance.architectures)}; "
                          f"the GPU node AMI is {NODE_ARCHITECTURE}")
    return instance


_PREFILL, _DECODE = phase_node_group_keys("prefill"), phase_node_group_keys("decode")


def _phase_type_allowed(phase: Phase) -> str:
    return (f'"" ({phase} runs on gpuNodeType\'s group) or an {NODE_ARCHITECTURE} EC2 type with NVIDIA GPUs and '
            "EFA support, offered in the GPU AZ")


class PhaseGpuNodeSettings(_Settings):
    """A GPU node group of one phase's own (say prefill on a compute-heavier type than decode): in the
    GPU AZ and the same cluster placement group, joined to gpuNodeType's group by EFA. Both types
    empty: both phases share gpuNodeType's group."""

    prefill_instance_type: str | None = Field(alias=_PREFILL.instance_type, description=_phase_type_allowed("prefill"))
    prefill_count: int = Field(alias=_PREFILL.count, ge=1, le=64, description="an integer from 1 to 64")
    prefill_max_count: int = Field(
        alias=_PREFILL.max_count, ge=0, le=64,
        description=f"0 (fixed at {_PREFILL.count}) or an integer from {_PREFILL.count} to 64")
    decode_instance_type: str | None = Field(alias=_DECODE.instance_type, description=_phase_type_allowed("decode"))
    decode_count: int = Field(alias=_DECODE.count, ge=1, le=64, description="an integer from 1 to 64")
    decode_max_count: int = Field(
        alias=_DECODE.max_count, ge=0, le=64,
        description=f"0 (fixed at {_DECODE.count}) or an integer from {_DECODE.count} to 64")

    @field_validator("prefill_instance_type", "decode_instance_type", mode="before")
    @classmethod
    def _empty_is_shared(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> PhaseGpuNodeSettings:
        for phase in PHASES:
            type_key = self.key(f"{phase}_instance_type")
            count, max_count = getattr(self, f"{phase}_count"), getattr(self, f"{phase}_max_count")
            if self.instance_type(phase) is None:
                # Bounds of a group that is not built: refused rather than silently ignored.
                for field_name, value in ((f"{phase}_count", count), (f"{phase}_max_count", max_count)):
                    default = declared_keys()[self.key(field_name)].default
                    if str(value) != default:
                        raise ConfigError(self.key(field_name), value, f"{default} while {type_key} is \"\"",
                                          f"it bounds {phase}'s own GPU node group, which only {type_key} creates")
            elif max_count and max_count < count:
                raise ConfigError(self.key(f"{phase}_max_count"), max_count,
                                  f"0 (fixed) or ≥ {self.key(f'{phase}_count')} ({count})",
                                  "the node group's maximum cannot be below its minimum")
        if self.prefill_instance_type and self.decode_instance_type:
            raise ConfigError(
                self.key("decode_instance_type"), self.decode_instance_type,
                f'"" while {self.key("prefill_instance_type")} is set (decode then runs on gpuNodeType\'s group)',
                "one phase runs on gpuNodeType's group: set gpuNodeType to the type you want for it")
        return self

    def instance_type(self, phase: Phase) -> str | None:
        """The type of `phase`'s own node group; None: the phase runs on gpuNodeType's."""
        return getattr(self, f"{phase}_instance_type")

    def queried_types(self) -> dict[str, str]:
        """The phases' own types by the key naming each, for discovery (CloudQuery)."""
        return {self.key(f"{phase}_instance_type"): name for phase in PHASES
                if (name := self.instance_type(phase)) is not None}

    def targets(self, described: Mapping[str, InstanceType]) -> dict[str, NodeGroupTarget]:
        """Each phase's own node group, its type (`described`: as EC2 describes it, by key) refused
        like gpuNodeType's when it lacks an NVIDIA GPU or EFA."""
        targets: dict[str, NodeGroupTarget] = {}
        for phase in PHASES:
            field_name = f"{phase}_instance_type"
            if self.instance_type(phase) is None:
                continue
            key = self.key(field_name)
            instance = check_gpu_instance(described[key], key, type(self).model_fields[field_name].description or "")
            count, max_count = getattr(self, f"{phase}_count"), getattr(self, f"{phase}_max_count")
            targets[phase] = NodeGroupTarget(instance, count, instance.efa_capable,
                                             max_count if max_count > count else None, own_phase=phase)
        return targets


@dataclass(frozen=True)
class GpuNodeGroupSpec:
    """One GPU managed node group as the stack builds it: the phases whose worker pods it holds, its
    type and bounds as the app was checked against (`target`) and the worker pod each node gets."""

    phases: tuple[Phase, ...]
    target: NodeGroupTarget
    worker: WorkerResources

    @property
    def own_phase(self) -> Phase | None:
        """The phase whose own group this is (prefillGpuNodeType, ...); None: gpuNodeType's group."""
        return self.target.own_phase

    @property
    def instance(self) -> InstanceType:
        return self.target.instance

    @property
    def count(self) -> int:
        return self.target.node_count

    @property
    def most(self) -> int:
        return self.target.max_nodes

    @property
    def autoscaled(self) -> bool:
        """Whether the Cluster Autoscaler may grow the group past `count`."""
        return self.most > self.count

    @property
    def labels(self) -> dict[str, str]:
        """Its nodes' labels, which its phases' worker pods select (components/scheduling.py)."""
        return gpu_node_labels(self.phases)

    @property
    def storage(self) -> NodeStorage:
        """Where its nodes keep images and the model cache (decided by the instance type)."""
        return node_storage(self.instance)


def _chart_version(value: str) -> str:
    if not _CHART_VERSION.match(value):
        raise ValueError("not a pinned chart version")
    return value


ChartVersion = Annotated[str, AfterValidator(_chart_version)]


class ChartSettings(_Settings):
    """Pinned Helm chart versions (never a range, never latest)."""

    kuberay: ChartVersion = Field(alias="kuberayChartVersion", description="an exact chart version like 1.7.0")
    nvidia_device_plugin: ChartVersion = Field(
        alias="nvidiaDevicePluginChartVersion", description="an exact chart version like 0.20.0")
    efa_device_plugin: ChartVersion = Field(
        alias="efaDevicePluginChartVersion", description="an exact chart version like v0.5.30")
    kube_prometheus_stack: ChartVersion = Field(
        alias="kubePrometheusStackChartVersion", description="an exact chart version like 88.5.3")
    dcgm_exporter: ChartVersion = Field(
        alias="dcgmExporterChartVersion", description="an exact chart version like 4.8.2")
    cluster_autoscaler: ChartVersion = Field(
        alias="clusterAutoscalerChartVersion", description="an exact chart version like 9.59.0")


# Prometheus keeps this share of its volume for blocks (`retentionSize`) and deletes the oldest
# beyond it: the WAL and the head block live outside that budget, and the Prometheus storage docs
# advise a size limit well below the disk (they suggest 80-85 %), so the volume never fills first.
METRICS_RETENTION_SIZE_SHARE = 0.8
# The slow SLO burn alerts look back 6 h and the dashboards default to a day: less retention
# would leave them blind.
MIN_METRICS_RETENTION_DAYS = 1
MAX_METRICS_RETENTION_DAYS = 366
_PROMETHEUS_RETENTION = re.compile(r"^([1-9]\d*)([dw])$")
# A fraction of requests the TTFT/TPOT SLOs promise; the burn-rate alerts (14.4x / 6x of the error
# budget, the SRE workbook's multiwindow alerts) need a budget small enough to burn.
MIN_SLO_OBJECTIVE = 0.9
MAX_SLO_OBJECTIVE = 0.9999


def retention_days(value: str) -> int | None:
    """Days in a Prometheus retention of whole days or weeks ("15d", "2w"), None if not one."""
    match = _PROMETHEUS_RETENTION.match(value)
    if match is None:
        return None
    return int(match.group(1)) * (7 if match.group(2) == "w" else 1)


def _bucket_bound(value: float, bounds: tuple[float, ...], setting: str, histogram: str) -> float:
    # An SLO threshold between two bucket bounds cannot be counted exactly from a classic histogram:
    # the burn rate would be an interpolation, not a count of requests over the threshold.
    if value not in bounds:
        raise ConfigError(setting, value, "one of " + ", ".join(f"{b:g}" for b in bounds),
                          f"the SLO is counted from vLLM's {histogram} histogram, whose buckets end at these bounds")
    return value


class ObservabilitySettings(_Settings):
    """How long Prometheus keeps metrics and on how much disk, and the SLOs the alerts hold the
    endpoint to."""

    retention: str = Field(alias="metricsRetention", description=(
        f"whole days or weeks as Prometheus writes them, {MIN_METRICS_RETENTION_DAYS}d to "
        f"{MAX_METRICS_RETENTION_DAYS}d, e.g. 15d or 2w"))
    storage_gib: int = Field(alias="metricsStorageGiB", ge=10, le=16384, description="an integer from 10 to 16384")
    ttft_slo_seconds: float = Field(alias="ttftSloSeconds", description=(
        "one of vLLM's time-to-first-token bucket bounds, as a string: "
        + ", ".join(f"{b:g}" for b in VLLM_TTFT_BUCKETS_SECONDS)))
    tpot_slo_seconds: float = Field(alias="tpotSloSeconds", description=(
        "one of vLLM's time-per-output-token bucket bounds, as a string: "
        + ", ".join(f"{b:g}" for b in VLLM_TPOT_BUCKETS_SECONDS)))
    slo_objective: float = Field(alias="sloObjective", ge=MIN_SLO_OBJECTIVE, le=MAX_SLO_OBJECTIVE, description=(
        f'a fraction from {MIN_SLO_OBJECTIVE} to {MAX_SLO_OBJECTIVE} as a string, e.g. "0.99"'))

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        days = retention_days(value)
        if days is None or not MIN_METRICS_RETENTION_DAYS <= days <= MAX_METRICS_RETENTION_DAYS:
            raise ConfigError(cls.key("retention"), value, cls.model_fields["retention"].description or "",
                              "the slow SLO burn alerts look back 6 hours and the dashboards a day")
        return value

    @field_validator("ttft_slo_seconds")
    @classmethod
    def _ttft_bound(cls, value: float) -> float:
        return _bucket_bound(value, VLLM_TTFT_BUCKETS_SECONDS, cls.key("ttft_slo_seconds"), "time_to_first_token")

    @field_validator("tpot_slo_seconds")
    @classmethod
    def _tpot_bound(cls, value: float) -> float:
        return _bucket_bound(value, VLLM_TPOT_BUCKETS_SECONDS, cls.key("tpot_slo_seconds"),
                             "request_time_per_output_token")

    @property
    def retention_size(self) -> str:
        """Prometheus `retentionSize` (its GB are GiB) for the volume."""
        return f"{int(self.storage_gib * METRICS_RETENTION_SIZE_SHARE)}GB"

    @property
    def error_budget(self) -> float:
        return 1 - self.slo_objective


# KubeRay's ValidateRayServiceMetadata: at most 47 characters and a DNS-1035 label, because it
# derives Service and RayCluster names from it.
MAX_RAY_SERVICE_NAME_LENGTH = 47
INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
# The first start pulls a multi-GB Ray LLM image on three nodes and loads the checkpoint (about
# 145 s for the reference model); past the timeout the RayService is terminal until recreated.
MIN_INITIALIZING_TIMEOUT_SECONDS = 10 * 60
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_DURATION_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
# KubeRay accepts None, NewCluster and NewClusterWithIncrementalUpgrade. Default None: the GPU node
# group is fixed (desired = min = max), so NewCluster's blue/green upgrade would park a second
# RayCluster Pending until someone adds GPU nodes, while `pulumi up` reports success. With None,
# serveConfigV2 changes are applied in place by Ray Serve, and the InferenceService component
# replaces the RayService when the cluster spec changes (a short, visible outage instead of a
# silent stuck upgrade).
UPGRADE_STRATEGIES_THIS_STACK_RUNS = ("None", "NewCluster")


def duration_seconds(value: str) -> float | None:
    """Seconds in a Go duration ("30m", "1h30m") or integer seconds, as KubeRay parses the annotation."""
    if re.fullmatch(r"\d+", value):
        return float(value)
    parts = _GO_DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * _GO_DURATION_UNIT_SECONDS[unit] for number, unit in parts)


class RayServiceSettings(_Settings):
    """Where the RayService runs, which image it starts and how it starts and upgrades."""

    namespace: str = Field(alias="namespace", description=(
        "a DNS-1123 label of at most 63 characters, other than " + ", ".join(RESERVED_NAMESPACES)))
    name: str = Field(alias="rayServiceName", description=(
        f"a DNS-1035 label of at most {MAX_RAY_SERVICE_NAME_LENGTH} characters (lowercase letters, digits "
        "and '-', starting with a letter, not ending with '-')"))
    image: str = Field(alias="rayImage", description=(
        f'"" (the Ray LLM DLC image of the region) or an image pinned by a version tag or @sha256 digest, '
        f"e.g. {PUBLIC_DLC_REPOSITORY}:{DLC_TAG}"))
    ray_version: str = Field(alias="rayVersion", description=(
        '"" (the version of a known image) or the Ray release inside the image, e.g. 2.58.0'))
    initializing_timeout: str = Field(alias="initializingTimeout", description=(
        f"a Go duration (e.g. '30m', '1h') or integer seconds, at least {MIN_INITIALIZING_TIMEOUT_SECONDS // 60}m"))
    upgrade_strategy: str = Field(alias="upgradeStrategy", description=", ".join(UPGRADE_STRATEGIES_THIS_STACK_RUNS))
    image_carries_runai_streamer: bool = Field(alias="rayImageCarriesRunaiStreamer", description="true or false")
    gcs_fault_tolerance: bool = Field(alias="gcsFaultTolerance", description="true or false")
    # Every Ray container's environment, so it is the cluster's setting, not the serve app's.
    http_front: HttpFront = Field(alias="httpFront", description=" or ".join(HTTP_FRONTS))

    @field_validator("namespace")
    @classmethod
    def _serving_namespace(cls, value: str) -> str:
        if len(value) > 63 or not _DNS_1123_LABEL.match(value) or value in RESERVED_NAMESPACES:
            raise ConfigError(cls.key("namespace"), value, cls.model_fields["namespace"].description or "",
                              "the stack creates this namespace and labels it to admit privileged EFA workers")
        return value

    @field_validator("name")
    @classmethod
    def _ray_service_name(cls, value: str) -> str:
        if len(value) > MAX_RAY_SERVICE_NAME_LENGTH or not _DNS_1035_LABEL.match(value):
            raise ConfigError(cls.key("name"), value, cls.model_fields["name"].description or "",
                              "KubeRay refuses other names and derives Service and RayCluster names from it")
        return value

    @field_validator("initializing_timeout")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        seconds = duration_seconds(value)
        if seconds is None:
            raise ValueError("not a duration")
        if seconds < MIN_INITIALIZING_TIMEOUT_SECONDS:
            raise ConfigError(
                cls.key("initializing_timeout"), value, cls.model_fields["initializing_timeout"].description or "",
                "the first start pulls the Ray LLM image and loads the model; past the timeout KubeRay marks "
                "the RayService failed for good and it must be recreated")
        return value

    @field_validator("upgrade_strategy")
    @classmethod
    def _strategy_this_stack_runs(cls, value: str) -> str:
        if value not in UPGRADE_STRATEGIES_THIS_STACK_RUNS:
            why = None
            if value == "NewClusterWithIncrementalUpgrade":
                why = ("it needs the Ray autoscaler, a Gateway API implementation and clusterUpgradeOptions, "
                       "none of which this stack deploys")
            raise ConfigError(cls.key("upgrade_strategy"), value, ", ".join(UPGRADE_STRATEGIES_THIS_STACK_RUNS), why)
        return value

    @field_validator("image", "ray_version", mode="before")
    @classmethod
    def _trimmed(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    def resolved(self, region: str) -> RayServiceSettings:
        """The same settings with the image ("" = the region's DLC) and its Ray version filled in;
        refuses an unpinned image and a Ray version the image does not carry."""
        image = self.image or default_ray_image(region)
        stack = _image_serving_stack(image, self.ray_version or None)
        return self.model_copy(update={"image": image, "ray_version": stack.ray if stack else self.ray_version})


def _image_serving_stack(image: str, ray_version: str | None) -> ServingStack | None:
    """Refuse unpinned images and Ray versions that disagree with the image; the image's known
    serving stack, or None for an image this project has no facts for (its version was given)."""
    image_key, version_key = RayServiceSettings.key("image"), RayServiceSettings.key("ray_version")
    repository, tag, digest = split_image(image)
    if not repository or any(c.isspace() for c in image):
        raise ConfigError(image_key, image, f"an image reference such as {PUBLIC_DLC_REPOSITORY}:{DLC_TAG}")
    if digest is None and (tag is None or tag in FLOATING_TAGS):
        raise ConfigError(
            image_key, image, "an image pinned by a version tag or @sha256 digest",
            f"tag {tag or '(none)'} moves to new builds; a node restart could bring up a different Ray")
    if ray_version is not None and not re.fullmatch(r"\d+\.\d+\.\d+", ray_version):
        raise ConfigError(version_key, ray_version, "a Ray release such as 2.60.0")
    stack = serving_stack(image)
    if stack is None and ray_version is None:
        raise ConfigError(version_key, "", "the Ray version inside the image, e.g. 2.58.0",
                          f"{image} is not an image this project knows, so its Ray version must be given")
    if stack is not None and ray_version is not None and ray_version != stack.ray:
        raise ConfigError(version_key, ray_version, f"{stack.ray} (or empty)", f"{image} contains Ray {stack.ray}")
    return stack


@dataclass(frozen=True)
class ServingSettings:
    """Everything the serving namespace and the RayService are built from, checked once: the
    RayService settings, the PD app checked against the GPU nodes (its serveConfigV2 rendered once,
    its capacity report) and the worker pod sized for the node."""

    ray_service: RayServiceSettings
    app: CheckedApp
    node_groups: tuple[GpuNodeGroupSpec, ...]  # gpuNodeType's group first, then a phase's own
    hf_token_configured: bool
    region: str
    model_gated: bool = False  # the Hub says the model is gated: the engines need hfToken to download it

    def node_group(self, phase: Phase) -> GpuNodeGroupSpec:
        """The GPU node group `phase`'s worker pods run on."""
        return next(group for group in self.node_groups if phase in group.phases)

    @property
    def gpu_instance(self) -> InstanceType:
        """gpuNodeType, as EC2 describes it."""
        return self.node_groups[0].instance

    @property
    def worker(self) -> WorkerResources:
        """The worker pod on a node of gpuNodeType's group."""
        return self.node_groups[0].worker

    @property
    def name(self) -> str:
        return self.ray_service.name

    @property
    def namespace(self) -> str:
        return self.ray_service.namespace

    @property
    def image(self) -> str:
        return self.ray_service.image

    @property
    def ray_version(self) -> str:
        return self.ray_service.ray_version

    @property
    def initializing_timeout(self) -> str:
        return self.ray_service.initializing_timeout

    @property
    def upgrade_strategy(self) -> str:
        return self.ray_service.upgrade_strategy

    @property
    def gcs_fault_tolerance(self) -> bool:
        return self.ray_service.gcs_fault_tolerance

    @property
    def http_front(self) -> HttpFront:
        return self.ray_service.http_front

    @property
    def serve_config_v2(self) -> Mapping[str, Any]:
        return self.app.serve_config_v2

    @property
    def hybrid_model(self) -> bool:
        # Hybrid (linear-attention + attention) models such as Qwen3.5 need the DS conv-state layout
        # for NIXL to transfer their recurrent state (AWS sample: "required by NIXL for hybrid models").
        return bool(self.app.model and self.app.model.hybrid)

    @property
    def autoscaling(self) -> bool:
        """Whether Ray Serve may scale either phase, so the Ray autoscaler must add and remove pods."""
        return any(self.app.config.phase(phase).replicas.autoscaling for phase in PHASES)

    @property
    def serve_service_name(self) -> str:
        return f"{self.name}-serve-svc"

    @property
    def storage(self) -> NodeStorage:
        """Where the nodes of gpuNodeType's group keep images and the model cache."""
        return self.node_groups[0].storage


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
    slo: StackSlo | None = None  # the SLO sizing (components/workload_settings.py)
    # Placeholders the offline plan lets through (a real preview refuses them): warned.
    findings: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return self.serving.namespace

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the preview could not check, found wasteful or short of the SLO, and says so
        (pulumi.log.warn; `pdctl plan --strict` fails)."""
        from components.findings import stack_findings  # it reads these settings' types: imported here

        return (*self.serving.app.warnings, *(self.slo.warnings if self.slo else ()), *self.findings,
                *stack_findings(self))


# ── Raw strings → typed values ────────────────────────────────────────────────────────────────

def _parse(key: DeclaredKey, text: str) -> Any:
    if key.type == "integer":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(key.name, text, "a whole number") from None
    if key.type == "boolean":
        if text.lower() not in ("true", "false"):
            raise ConfigError(key.name, text, "true or false")
        return text.lower() == "true"
    if key.type == "array":
        try:
            items = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            items = None
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ConfigError(key.name, text, 'a JSON array of strings, e.g. ["a", "b"]')
        return tuple(items)
    return text


# Settings this project no longer reads, with why: a stack file that still sets one is told, not
# given a long list of every key.
RETIRED_KEYS = dict.fromkeys(
    ("prefillEngineId", "decodeEngineId"),
    "Ray Serve LLM now names each NIXL engine at its start, so decode hand-shakes with a restarted prefill "
    "engine instead of reusing its stale peer (serve_app/config.py); delete it from the stack file")


def _normalized(raw: Mapping[str, str], project: str) -> dict[str, str]:
    """Bare names for the project's keys, and only the keys this program reads."""
    known = declared_keys()
    values: dict[str, str] = {}
    for name, text in raw.items():
        namespace, _, bare = name.rpartition(":")
        if namespace and namespace != project:
            if namespace not in READ_NAMESPACES:
                # `eks-pd-lm:gpuNodeCount`: no provider reads it, so the stack would deploy the default.
                readers = sorted({project, *READ_NAMESPACES})
                raise unknown_setting(name, text, [f"{ns}:{bare}" for ns in readers], what="namespace in")
            if namespace in CHECKED_PROVIDER_NAMESPACES:
                _known_provider_key(namespace, bare, text)
            if name in known:
                values[name] = text
            continue  # other providers' settings (aws:profile, …) are theirs to use
        if bare in RETIRED_KEYS:
            raise ConfigError(bare, text, "nothing: the setting was removed", RETIRED_KEYS[bare])
        if bare not in known:
            raise unknown_setting(bare, text, sorted(k for k in known if ":" not in k))
        values[bare] = text
    return values


def _known_provider_key(namespace: str, key: str, text: str) -> None:
    """Refuse `aws:regoin`: the provider would ignore a key it does not read, and the stack would
    deploy with the default it meant to change."""
    keys = provider_config_keys(CHECKED_PROVIDER_NAMESPACES[namespace])
    if keys and key not in keys:
        raise unknown_setting(f"{namespace}:{key}", text, sorted(f"{namespace}:{k}" for k in keys))


def read_config(raw: Mapping[str, str], *, project: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(typed values, texts) by stack key: `raw` over Pulumi.yaml's defaults, each value parsed by its
    declared type; the texts are what the user wrote, for error messages."""
    known = declared_keys()
    texts = {name: key.default for name, key in known.items() if key.default is not None}
    texts.update(_normalized(raw, project))
    missing = sorted(name for name in known if name not in texts)
    if missing:
        raise ConfigError(missing[0], None, "a value", "required and has no default")
    return {name: _parse(known[name], text) for name, text in texts.items()}, texts


def settings_from_config(raw: Mapping[str, str], *, project: str, stack: str,
                         ask_cloud: Callable[[CloudQuery], CloudFacts] = discover) -> StackSettings:
    """Validate and type a stack's configuration (Pulumi.yaml defaults fill what `raw` lacks).

    Every key is checked on its own first; then `ask_cloud` (the program: EC2 through invokes; tests
    and the offline plan: recorded answers) says what the region, its AZs and the node types are, and
    the settings are judged against that answer."""
    typed, texts = read_config(raw, project=project)

    region = typed[REGION_KEY]
    if not _REGION.match(region):
        raise ConfigError(REGION_KEY, region, "an AWS region name, e.g. us-west-2")
    network = from_stack_keys(NetworkSettings, typed, texts)
    cluster = from_stack_keys(ClusterSettings, typed, texts)
    system_nodes = from_stack_keys(SystemNodeSettings, typed, texts)
    gpu_nodes = from_stack_keys(GpuNodeSettings, typed, texts)
    phase_gpu_nodes = from_stack_keys(PhaseGpuNodeSettings, typed, texts)
    zone = gpu_nodes.availability_zone
    if zone and _AVAILABILITY_ZONE.match(zone) and not zone.startswith(region):
        raise ConfigError("gpuAvailabilityZone", zone, f"an AZ of {region}, or \"\"")
    charts = from_stack_keys(ChartSettings, typed, texts)
    ray_service = from_stack_keys(RayServiceSettings, typed, texts).resolved(region)
    app_settings = from_stack_keys(ServeAppSettings, typed, texts)
    workload = from_stack_keys(WorkloadSettings, typed, texts)
    observability = from_stack_keys(ObservabilitySettings, typed, texts)

    cloud = ask_cloud(CloudQuery(region=region, gpu_node_type=gpu_nodes.instance_type,
                                 system_node_type=system_nodes.instance_type,
                                 phase_gpu_node_types=phase_gpu_nodes.queried_types()))
    system_nodes.check(cloud.system_instance)
    gpu_instance = gpu_nodes.check(cloud.gpu_instance)
    phase_groups = phase_gpu_nodes.targets(cloud.phase_gpu_instances)
    placeholders = _placeholders(cluster)
    if placeholders and not cloud.offline:
        raise placeholders[0]
    hf_token_configured = bool(texts.get(HF_TOKEN_KEY))
    serving = _serving(ray_service, app_settings, gpu_instance, gpu_nodes, phase_groups, hf_token_configured, region)
    targets = Targets(observability.ttft_slo_seconds, observability.tpot_slo_seconds, observability.slo_objective)
    slo = stack_slo(workload, targets, serving.app, {p: serving.node_group(p).instance for p in PHASES})
    settings = StackSettings(
        project=project,
        stack=stack,
        region=region,
        network=network,
        cluster=cluster,
        system_nodes=system_nodes,
        gpu_nodes=gpu_nodes,
        charts=charts,
        zones=plan_availability_zones(network.az_count, gpu_nodes, cloud),
        serving=serving,
        observability=observability,
        hf_token_configured=hf_token_configured,
        slo=slo,
    )
    return replace(settings, findings=tuple(str(p) for p in placeholders))


def _placeholders(cluster: ClusterSettings) -> list[ConfigError]:
    """The documentation values a stack file ships with (facts/aws.py): a real preview refuses the
    first; the offline plan warns about each (and `--strict` fails)."""
    found = []
    for cidr in cluster.api_public_access_cidrs:
        if is_documentation_cidr(cidr):
            found.append(ConfigError(cluster.key("api_public_access_cidrs"), list(cluster.api_public_access_cidrs),
                                     "the CIDRs `pulumi up` and kubectl really connect from",
                                     f"{cidr} is a documentation range (RFC 5737), a placeholder to replace"))
    for arn in cluster.admin_principal_arns:
        account = arn.split(":")[4]
        if account in DOCUMENTATION_ACCOUNT_IDS:
            found.append(ConfigError(cluster.key("admin_principal_arns"), list(cluster.admin_principal_arns),
                                     "the IAM roles or users that operate the cluster",
                                     f"account {account} is AWS's documentation example, a placeholder to replace"))
    return found


def _serving(ray_service: RayServiceSettings, app_settings: ServeAppSettings, instance: InstanceType,
             gpu_nodes: GpuNodeSettings, phase_groups: Mapping[str, NodeGroupTarget], hf_token_configured: bool,
             region: str) -> ServingSettings:
    """serve_app's PD app checked against the GPU node groups it runs on (gpuNodeType's, and a phase's
    own where one is set), with the model's own facts."""
    image_stack = serving_stack(ray_service.image)
    _check_image_streams_weights(app_settings, ray_service, image_stack)
    model = read_model_facts(app_settings.model_source)
    if model.missing:
        raise ConfigError(ServeAppSettings.key("model_source"), app_settings.model_source,
                          "a model id on the Hugging Face Hub (org/name), an s3:// mirror or a local directory",
                          model.problem)
    target = DeploymentTarget(
        gpu_instance=instance, gpu_node_count=gpu_nodes.count,
        gpu_node_max_count=gpu_nodes.max_count if gpu_nodes.autoscaled else None,
        efa=instance.efa_capable,
        accept_ucx_on_efa=app_settings.accept_ucx_on_efa, ray_version=ray_service.ray_version,
        http_front=ray_service.http_front,
        vllm_version=image_stack.vllm if image_stack else None, phase_node_groups=phase_groups)
    app = check_app(app_settings.app(), target, model=model.architecture)
    app = _with_model_notes(app, model, ServeAppSettings.key("model_source"))
    model_bytes = app.model.weight_bytes("auto") if app.model else None
    return ServingSettings(
        ray_service=ray_service,
        app=app,
        # Each group's worker pod sized now, so a node it cannot fit stops the run before any resource.
        node_groups=tuple(
            GpuNodeGroupSpec(phases, group, worker_resources(group.instance, model_bytes, group.keys.instance_type))
            for group, phases in target.node_groups()),
        hf_token_configured=hf_token_configured,
        region=region,
        model_gated=model.gated,
    )


def _check_image_streams_weights(app_settings: ServeAppSettings, ray_service: RayServiceSettings,
                                 image_stack: ServingStack | None) -> None:
    """An s3:// model, or extraEngineKwargs' load_format runai_streamer, is loaded by vLLM's Run:ai
    Model Streamer, which must be in the image: refuse an image known not to carry it, and one not
    known to carry it unless the user says it does. Refused rather than warned: the missing package
    shows only as DEPLOY_FAILED once the GPU nodes are up and billing."""
    on_s3 = app_settings.model_source.startswith(S3_SCHEME)
    load_format = app_settings.extra_engine_kwargs.get("load_format")
    if not on_s3 and load_format not in STREAMER_LOAD_FORMATS:
        return
    source_key, declared_key = ServeAppSettings.key("model_source"), RayServiceSettings.key(
        "image_carries_runai_streamer")
    asked_by = (f"{source_key} is an S3 mirror" if on_s3
                else f"{ServeAppSettings.key('extra_engine_kwargs')} sets load_format {load_format}")
    carries = image_stack.runai_model_streamer if image_stack else None
    if carries is False:
        raise ConfigError(RayServiceSettings.key("image"), ray_service.image,
                          "an image with vllm[runai] (runai-model-streamer, runai-model-streamer-s3)",
                          f"{asked_by} and this image has no Run:ai Model Streamer")
    if carries is None and not ray_service.image_carries_runai_streamer:
        instead = f"set {source_key} to a Hugging Face id" if on_s3 else "drop that load_format"
        raise ConfigError(declared_key, False, "true, once rayImage carries vllm[runai] (runai-model-streamer, "
                          "runai-model-streamer-s3)",
                          f"{asked_by}, loaded with the Run:ai Model Streamer, and {ray_service.image} is not "
                          f"known to carry it; or {instead}")


def _with_model_notes(app: CheckedApp, model: ModelFacts, key: str) -> CheckedApp:
    """Say where the sized architecture came from; warn when the model's facts could not be read."""
    if model.architecture is not None:
        return replace(app, notes=(f"model facts: {model.origin}", *app.notes))
    if app.model is not None:  # check_app fell back to the shipped facts
        return replace(app, notes=(f"model facts: shipped facts/models.py, not the model's own files "
                                   f"({model.problem})", *app.notes))
    warning = (f"{key} {model.source!r}: its config.json could not be read ({model.problem}), so the GPU fit is "
               "not checked; make it readable (HF_TOKEN for a gated repo, network or a filled HF cache)")
    return replace(app, notes=(warning, *app.notes), warnings=(*app.warnings, warning))


# ── AZ choice (pure; the program feeds it what EC2 reports) ───────────────────────────────────

@dataclass(frozen=True)
class AvailabilityZonePlan:
    gpu_zone: Zone
    network_zones: tuple[Zone, ...]  # gpu_zone first
    control_plane_zones: tuple[Zone, ...]  # the network zones EKS takes control-plane subnets in

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": {"name": self.gpu_zone.name, "id": self.gpu_zone.zone_id},
                "network": [{"name": z.name, "id": z.zone_id, "control_plane": z in self.control_plane_zones}
                            for z in self.network_zones]}


def plan_availability_zones(az_count: int, gpu: GpuNodeSettings, cloud: CloudFacts) -> AvailabilityZonePlan:
    """Pick AZs by zone ID (names differ per account): the GPU AZ (the configured one, by name or ID,
    or the first by ID that offers the GPU type) and the VPC's AZs, `azCount` in all: the GPU AZ, then
    the next ones by ID, those EKS accepts for its control plane first (facts/aws.py). The control
    plane gets the subnets of the accepted ones; the GPU node group may sit in a refused one."""
    region = cloud.region
    zones = sorted(cloud.zones, key=lambda z: z.zone_id)
    offering = [z for z in zones if z.name in cloud.zones_offering_gpu]
    # Every GPU node group shares the one AZ (and placement group): rather one that offers each
    # phase's own type as well.
    offering_all = [z for z in offering if all(z.name in names for names in cloud.zones_offering_phase_gpu.values())]
    if gpu.availability_zone is not None:
        wanted = next((z for z in offering if gpu.availability_zone in (z.name, z.zone_id)), None)
        if wanted is None:
            raise ConfigError("gpuAvailabilityZone", gpu.availability_zone,
                              ", ".join(map(str, offering)) or f"none: no AZ of {region} offers {gpu.instance_type}",
                              f"{gpu.instance_type} is not offered there")
        gpu_zone = wanted
    elif offering:
        gpu_zone = (offering_all or offering)[0]
    else:
        raise ConfigError("gpuNodeType", gpu.instance_type, "a GPU type offered in some AZ of " + region,
                          f"no AZ of {region} offers it")
    for key, names in cloud.zones_offering_phase_gpu.items():
        if gpu_zone.name not in names:
            name = cloud.phase_gpu_instances[key].name
            elsewhere = ", ".join(str(z) for z in zones if z.name in names) or f"no AZ of {region}"
            raise ConfigError(key, name, f"a GPU type offered in {gpu_zone}, the GPU AZ",
                              f"{name} is offered in {elsewhere}; all GPU nodes share one AZ and placement group (EFA)")
    if az_count > len(zones):
        raise ConfigError("azCount", az_count, f"at most {len(zones)} ({region} has {', '.join(map(str, zones))})")
    others = sorted((z for z in zones if z != gpu_zone),
                    key=lambda z: (z.zone_id in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS, z.zone_id))
    network_zones = (gpu_zone, *others[: az_count - 1])
    control_plane = tuple(z for z in network_zones if z.zone_id not in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS)
    if len(control_plane) < 2:
        raise ConfigError("azCount", az_count, f"at least {az_count + 1} in {region}",
                          f"EKS needs control-plane subnets in 2 AZs and refuses {gpu_zone} for them")
    return AvailabilityZonePlan(gpu_zone=gpu_zone, network_zones=network_zones, control_plane_zones=control_plane)


# ── Reading the running stack's config ────────────────────────────────────────────────────────

def load_settings() -> StackSettings:
    """Read the running program's configuration (what the CLI merged) and validate it."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    project = pulumi.get_project()
    entries = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | {
        k for k in entries if runtime_config.is_config_secret(k)}
    token_key = f"{project}:{HF_TOKEN_KEY}"
    if entries.get(token_key) and token_key not in secret_keys:
        raise ConfigError(HF_TOKEN_KEY, "<plaintext value>", "a secret: pulumi config set --secret hfToken <token>",
                          "a plaintext token would sit unencrypted in the stack file and state")
    raw = {key: str(value) for key, value in entries.items()}
    return settings_from_config(raw, project=project, stack=pulumi.get_stack())
