"""The region, and the AZ plan (pure; the program feeds it what EC2 reports): the GPU AZ, the VPC's AZs and those
EKS takes control-plane subnets in, by zone ID."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from components.config.names import REGION
from components.config.network import NetworkSettings
from components.config.nodes import GpuNodeSettings, gpu_node_group_settings
from components.discovery import CloudFacts, Zone
from facts.aws import EKS_CONTROL_PLANE_REFUSED_ZONE_IDS
from serve_app.stack_keys import StackKeyModel


class RegionSettings(StackKeyModel):
    """The AWS region the stack deploys to (the aws provider's own key)."""

    region: str = Field(alias="aws:region", description="an AWS region name, e.g. us-west-2")

    @field_validator("region")
    @classmethod
    def _region_name(cls, value: str) -> str:
        if not REGION.match(value):
            raise cls.field("region").refuse(value)
        return value


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
            raise gpu.field("availability_zone").refuse(
                gpu.availability_zone,
                ", ".join(map(str, offering)) or f"none: no AZ of {region} offers {gpu.instance_type}",
                f"{gpu.instance_type} is not offered there")
        gpu_zone = wanted
    elif offering:
        gpu_zone = (offering_all or offering)[0]
    else:
        raise gpu.field("instance_type").refuse(gpu.instance_type, "a GPU type offered in some AZ of " + region,
                                                f"no AZ of {region} offers it")
    for phase, names in cloud.zones_offering_phase_gpu.items():
        if gpu_zone.name not in names:
            name = cloud.phase_gpu_instances[phase].name
            elsewhere = ", ".join(str(z) for z in zones if z.name in names) or f"no AZ of {region}"
            raise gpu_node_group_settings(phase).instance_type.refuse(
                name, f"a GPU type offered in {gpu_zone}, the GPU AZ",
                f"{name} is offered in {elsewhere}; all GPU nodes share one AZ and placement group (EFA)")
    az_count_setting = NetworkSettings.field("az_count")
    if az_count > len(zones):
        raise az_count_setting.refuse(az_count, f"at most {len(zones)} ({region} has {', '.join(map(str, zones))})")
    others = sorted((z for z in zones if z != gpu_zone),
                    key=lambda z: (z.zone_id in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS, z.zone_id))
    network_zones = (gpu_zone, *others[: az_count - 1])
    control_plane = tuple(z for z in network_zones if z.zone_id not in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS)
    if len(control_plane) < 2:
        raise az_count_setting.refuse(az_count, f"at least {az_count + 1} in {region}",
                                      f"EKS needs control-plane subnets in 2 AZs and refuses {gpu_zone} for them")
    return AvailabilityZonePlan(gpu_zone=gpu_zone, network_zones=network_zones, control_plane_zones=control_plane)
