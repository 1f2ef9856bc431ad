"""The node groups' settings: the system node group, gpuNodeType's EFA GPU group and a phase's own
GPU group; each node type judged by what EC2 says of it; a GPU group as the stack builds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from components.config.declared import declared_keys
from components.config.names import AVAILABILITY_ZONE, SNAPSHOT_ARN, SNAPSHOT_ID, ZONE_ID
from components.discovery import NodeTypeQuestion
from components.node_storage import NodeStorage, node_storage
from components.scheduling import gpu_node_labels
from components.sizing import WorkerResources
from facts.instances import InstanceType
from serve_app.config import PHASES, Phase
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackField, StackKeyModel
from serve_app.targets import NodeGroupSettings, NodeGroupTarget

# The Ray head pod requests 2 CPU / 8 GiB (limits 3 CPU / 12 GiB) beside the KubeRay operator,
# CoreDNS and the node's own reservations on these nodes.
MIN_SYSTEM_NODE_VCPUS = 4
MIN_SYSTEM_NODE_MEMORY_GIB = 16
# The node AMIs (AL2023_x86_64_STANDARD, AL2023_x86_64_NVIDIA in components/node_groups.py) are x86_64.
NODE_ARCHITECTURE = "x86_64"

class SystemNodeSettings(StackKeyModel):
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


# The forms a GPU node setting written as an AWS name or ID takes, and what to call them in a refusal.
_FORMS = {
    "availability_zone": ((AVAILABILITY_ZONE, ZONE_ID), "an availability zone name or zone ID"),
    "image_snapshot": ((SNAPSHOT_ID, SNAPSHOT_ARN), "an EBS snapshot ID (snap- and 17 hex digits) or snapshot ARN"),
}


class GpuNodeSettings(StackKeyModel):
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
    image_snapshot: str | None = Field(
        alias="gpuImageSnapshotId",
        description='"" or the EBS snapshot `pdctl image-snapshot` made of the Ray image, by ID '
                    "(snap-0123456789abcdef0) or ARN, in the stack's region")

    @field_validator("availability_zone", "image_snapshot", mode="before")
    @classmethod
    def _empty_is_auto(cls, value: Any) -> Any:
        return value or None

    def image_snapshot_id(self, region: str) -> str | None:
        """The snapshot's ID; refused when its ARN names another region than the stack's."""
        arn = SNAPSHOT_ARN.match(self.image_snapshot or "")
        if arn and arn[1] != region:
            raise self.field("image_snapshot").refuse(
                self.image_snapshot, f"a snapshot in {region}, or \"\"",
                f"EBS snapshots are regional: copy it to {region} (aws ec2 copy-snapshot) or make one there "
                "with `pdctl image-snapshot`")
        return arn[2] if arn else self.image_snapshot

    @field_validator("availability_zone", "image_snapshot")
    @classmethod
    def _of_its_forms(cls, value: str | None, info: ValidationInfo) -> str | None:
        forms, what = _FORMS[str(info.field_name)]
        if value is not None and not any(form.match(value) for form in forms):
            raise ValueError(f"not {what}")
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
        return check_gpu_instance(instance, self.field("instance_type"))

    @property
    def autoscaled(self) -> bool:
        """Whether the Cluster Autoscaler may grow the group past `count`."""
        return self.max_count > self.count

    @property
    def most(self) -> int:
        return max(self.count, self.max_count)


def check_gpu_instance(instance: InstanceType, setting: StackField) -> InstanceType:
    """Refuse a GPU node type (the one `setting` names) EC2 describes without an NVIDIA GPU, without
    EFA or of another architecture, naming what it lacks."""
    if not instance.has_gpu:
        raise setting.refuse(instance.name, why="EC2 says it has no NVIDIA GPU; the vLLM engines need one")
    if not instance.efa_capable:
        raise setting.refuse(instance.name, why="EC2 says it does not support EFA; prefill/decode KV transfer needs it")
    if NODE_ARCHITECTURE not in instance.architectures:
        raise setting.refuse(instance.name, why=f"EC2 says it is {'/'.join(instance.architectures)}; "
                             f"the GPU node AMI is {NODE_ARCHITECTURE}")
    return instance


def _phase_type_allowed(phase: Phase) -> str:
    return (f'"" ({phase} runs on gpuNodeType\'s group) or an {NODE_ARCHITECTURE} EC2 type with NVIDIA GPUs and '
            "EFA support, offered in the GPU AZ")


class PhaseGpuNodeSettings(StackKeyModel):
    """A GPU node group of one phase's own (say prefill on a compute-heavier type than decode): in the
    GPU AZ and the same cluster placement group, joined to gpuNodeType's group by EFA. Both types
    empty: both phases share gpuNodeType's group."""

    prefill_instance_type: str | None = Field(alias="prefillGpuNodeType", description=_phase_type_allowed("prefill"))
    prefill_count: int = Field(alias="prefillGpuNodeCount", ge=1, le=64, description="an integer from 1 to 64")
    prefill_max_count: int = Field(
        alias="prefillGpuNodeMaxCount", ge=0, le=64,
        description="0 (fixed at prefillGpuNodeCount) or an integer from prefillGpuNodeCount to 64")
    decode_instance_type: str | None = Field(alias="decodeGpuNodeType", description=_phase_type_allowed("decode"))
    decode_count: int = Field(alias="decodeGpuNodeCount", ge=1, le=64, description="an integer from 1 to 64")
    decode_max_count: int = Field(
        alias="decodeGpuNodeMaxCount", ge=0, le=64,
        description="0 (fixed at decodeGpuNodeCount) or an integer from decodeGpuNodeCount to 64")

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

    def questions(self) -> dict[Phase, NodeTypeQuestion]:
        """The phases' own types, each with the field naming it, for discovery (CloudQuery)."""
        return {phase: NodeTypeQuestion(gpu_node_group_settings(phase).instance_type, name) for phase in PHASES
                if (name := self.instance_type(phase)) is not None}

    def targets(self, described: Mapping[Phase, InstanceType]) -> dict[str, NodeGroupTarget]:
        """Each phase's own node group, its type (`described`: as EC2 describes it, by phase) refused
        like gpuNodeType's when it lacks an NVIDIA GPU or EFA."""
        targets: dict[str, NodeGroupTarget] = {}
        for phase in PHASES:
            if self.instance_type(phase) is None:
                continue
            settings = gpu_node_group_settings(phase)
            instance = check_gpu_instance(described[phase], settings.instance_type)
            count, max_count = getattr(self, f"{phase}_count"), getattr(self, f"{phase}_max_count")
            targets[phase] = NodeGroupTarget(instance, count, instance.efa_capable, settings,
                                             max_count if max_count > count else None, own_phase=phase)
        return targets


def gpu_node_group_settings(own_phase: Phase | None) -> NodeGroupSettings:
    """The settings of a GPU node group's type and bounds: `own_phase`'s own (prefillGpuNodeType,
    ...), or gpuNodeType's for the shared group (None)."""
    if own_phase is None:
        return NodeGroupSettings(*(GpuNodeSettings.field(name) for name in ("instance_type", "count", "max_count")))
    return NodeGroupSettings(*(PhaseGpuNodeSettings.field(f"{own_phase}_{name}")
                               for name in ("instance_type", "count", "max_count")))


@dataclass(frozen=True)
class GpuNodeGroupSpec:
    """One GPU managed node group as the stack builds it: the phases whose worker pods it holds, its
    type and bounds as the app was checked against (`target`) and the worker pod each node gets."""

    phases: tuple[Phase, ...]
    target: NodeGroupTarget
    worker: WorkerResources
    image_snapshot_id: str | None = None  # gpuImageSnapshotId, its bare ID

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
        """Where its nodes keep images and the model cache (decided by the instance type and
        gpuImageSnapshotId)."""
        return node_storage(self.instance, self.image_snapshot_id)
