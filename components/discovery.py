"""What AWS says, asked once at preview before any resource: `discover(query) -> CloudFacts`.

The region (is it one the account has?), its AZs by name and zone ID, which AZs offer the GPU type,
what EC2 says about the GPU and system node types, and who the caller is. The settings are judged
against these answers (components/config/), the way `pulumi preview` on a real account would;
the offline plan gets the same invokes answered from recorded data (offline/mock_cloud.py).

An invoke that fails is a user's mistake here (a region the account does not have, a type EC2 does
not know): it becomes a ConfigError naming the setting, with the error AWS gave. pulumi_aws is
imported only when AWS is asked: the data classes travel where Pulumi is not installed (the lab).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from facts.aws import OFFLINE_ACCOUNT_ID, OFFLINE_REFUSAL
from facts.instances import Ec2Gpu, Ec2InstanceType, InstanceType, instance_type
from serve_app.config import Phase
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackField

Answer = TypeVar("Answer")


@dataclass(frozen=True)
class NodeTypeQuestion:
    """A node type as the user wrote it (`name`) and the setting naming it, which a refusal names."""

    setting: StackField
    name: str


@dataclass(frozen=True)
class CloudQuery:
    """The settings discovery needs, as the user wrote them, each with the field naming it."""

    region: str
    region_setting: StackField
    gpu_node_type: NodeTypeQuestion
    system_node_type: NodeTypeQuestion
    # A phase's own GPU node type (prefillGpuNodeType: p5.48xlarge): described and offered like gpuNodeType.
    phase_gpu_node_types: Mapping[Phase, NodeTypeQuestion] = field(default_factory=dict)


@dataclass(frozen=True)
class Zone:
    name: str  # account-specific: us-east-1a is not the same AZ in two accounts
    zone_id: str  # the same AZ in every account (use1-az3)

    def __str__(self) -> str:
        return f"{self.name} ({self.zone_id})"


@dataclass(frozen=True)
class CloudFacts:
    region: str
    zones: tuple[Zone, ...]  # available AZs that need no opt-in, in EC2's order
    zones_offering_gpu: frozenset[str]  # names of the AZs that offer the GPU node type
    gpu_instance: InstanceType
    system_instance: InstanceType
    account_id: str
    # By the phase whose own GPU type each is (CloudQuery.phase_gpu_node_types).
    phase_gpu_instances: Mapping[Phase, InstanceType] = field(default_factory=dict)
    zones_offering_phase_gpu: Mapping[Phase, frozenset[str]] = field(default_factory=dict)

    @property
    def offline(self) -> bool:
        """The caller is the offline mock cloud's account (facts/aws.py says why that is safe)."""
        return self.account_id == OFFLINE_ACCOUNT_ID


def _first_line(error: Exception) -> str:
    """The provider's reason, without the SDK's `invoke of <token> failed: <reason> (<property>)` wrapping."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    wrapped = re.fullmatch(r"invoke of \S+ failed: (.*?)(?: \(\w+\))?", line)
    return (wrapped.group(1) if wrapped else line)[:300]


def _ask(setting: StackField, value: str, allowed: str, call: Callable[[], Answer]) -> Answer:
    try:
        return call()
    except ConfigError:
        raise
    except Exception as error:  # the provider's error, handed to the user in one line
        reason = _first_line(error)
        said = reason if reason.startswith(OFFLINE_REFUSAL) else f"AWS says: {reason}"
        raise setting.refuse(value, allowed, said) from None


def _get(item: Any, name: str) -> Any:
    """A field of an invoke result's nested object (typed output class or plain dict alike)."""
    return item.get(name) if isinstance(item, dict) and name in item else getattr(item, name, None)


def _ec2_instance_type(result: Any) -> Ec2InstanceType:
    return Ec2InstanceType(
        name=result.instance_type,
        vcpus=int(result.default_vcpus or 0),
        memory_mib=int(result.memory_size or 0),
        architectures=tuple(result.supported_architectures or ()),
        gpus=tuple(Ec2Gpu(name=str(_get(g, "name")), manufacturer=str(_get(g, "manufacturer")),
                          count=int(_get(g, "count") or 0), memory_mib=int(_get(g, "memory_size") or 0))
                   for g in result.gpuses or ()),
        efa_supported=bool(result.efa_supported),
        efa_maximum_interfaces=int(result.efa_maximum_interfaces or 0),
        network_cards_gbps=tuple(float(_get(c, "baseline_bandwidth") or 0) for c in result.network_cards or ()),
        instance_storage_gb=int(result.total_instance_storage or 0),
    )


def describe_instance_type(question: NodeTypeQuestion, region: str) -> InstanceType:
    import pulumi_aws as aws

    result = _ask(question.setting, question.name, f"an EC2 instance type offered in {region}",
                  lambda: aws.ec2.get_instance_type(instance_type=question.name))
    return instance_type(_ec2_instance_type(result))


def discover(query: CloudQuery) -> CloudFacts:
    """Ask AWS what the settings need; a failed answer is a ConfigError naming the setting."""
    import pulumi_aws as aws

    region, region_setting = query.region, query.region_setting
    regions = _ask(region_setting, region, "an AWS region", lambda: aws.get_regions().names)
    if region not in regions:
        raise region_setting.refuse(region, "a region enabled for this account: " + ", ".join(sorted(regions)),
                                    "EC2 does not list it")
    zones = _ask(region_setting, region, "a region enabled for this account", lambda: aws.get_availability_zones(
        state="available",
        # Local Zones and Wavelength Zones need opting in and have no GPU capacity to speak of.
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    ))
    gpu = describe_instance_type(query.gpu_node_type, region)
    system = describe_instance_type(query.system_node_type, region)
    offered = _zones_offering(query.gpu_node_type, region)
    phase_gpus = {phase: describe_instance_type(asked, region) for phase, asked in query.phase_gpu_node_types.items()}
    phase_offered = {phase: _zones_offering(asked, region) for phase, asked in query.phase_gpu_node_types.items()}
    identity = _ask(region_setting, region, "a region the caller's credentials reach", aws.get_caller_identity)
    return CloudFacts(
        region=region,
        zones=tuple(Zone(name, zone_id) for name, zone_id in zip(zones.names, zones.zone_ids, strict=True)),
        zones_offering_gpu=offered,
        gpu_instance=gpu,
        system_instance=system,
        account_id=identity.account_id,
        phase_gpu_instances=phase_gpus,
        zones_offering_phase_gpu=phase_offered,
    )


def _zones_offering(question: NodeTypeQuestion, region: str) -> frozenset[str]:
    """The AZs (by name) of `region` that offer the instance type asked about."""
    import pulumi_aws as aws

    name = question.name
    offerings = _ask(question.setting, name, f"an instance type offered in {region}",
                     lambda: aws.ec2.get_instance_type_offerings(
                         location_type="availability-zone",
                         filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[name])]))
    return frozenset(offerings.locations)
