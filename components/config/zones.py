"""The region, and the AZ plan (pure; the program feeds it what EC2 reports): the GPU AZ, the VPC's AZs, their
subnets' CIDRs, the NAT's AZs and those EKS takes control-plane subnets in, by zone ID.

A deployed stack keeps what it has (`DeployedStack`, as AWS reports it): its zones, its subnets' CIDRs,
its GPU zone and its NAT's zone, since a change of any replaces subnets, the NAT, node groups or the
cluster's subnets. Only a new zone gets a new CIDR, the slot of its zone ID (network.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from components.config.names import REGION
from components.config.network import NetworkSettings, SubnetCidrs
from components.config.nodes import GpuNodeSettings, gpu_node_group_settings
from components.discovery import CloudFacts, DeployedStack, Zone
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
    subnet_cidrs: tuple[SubnetCidrs, ...]  # per network zone, in its order
    nat_zones: tuple[Zone, ...]  # natMode single: one (the deployed NAT's, else the GPU AZ); perAz: every one

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": {"name": self.gpu_zone.name, "id": self.gpu_zone.zone_id},
                "network": [{"name": z.name, "id": z.zone_id, "control_plane": z in self.control_plane_zones,
                             "private_cidr": str(cidrs.private), "public_cidr": str(cidrs.public),
                             "nat": z in self.nat_zones}
                            for z, cidrs in zip(self.network_zones, self.subnet_cidrs, strict=True)]}


def plan_availability_zones(network: NetworkSettings, gpu: GpuNodeSettings, cloud: CloudFacts) -> AvailabilityZonePlan:
    """Pick AZs by zone ID (names differ per account): the GPU AZ (the configured one, by name or ID;
    else the deployed GPU nodes' one; else the first by ID that offers the GPU type, one the stack
    has subnets in first) and the VPC's AZs, `azCount` in all: the GPU AZ, then the stack's deployed
    ones, then the next ones by ID, those EKS accepts for its control plane first (facts/aws.py). The
    control plane gets the subnets of the accepted ones; the GPU node group may sit in a refused one."""
    region, az_count = cloud.region, network.az_count
    zones = sorted(cloud.zones, key=lambda z: z.zone_id)
    deployed = cloud.deployed or DeployedStack(cluster_name=network.cluster_name)
    gpu_zone = _gpu_zone(gpu, cloud, zones, deployed)
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
                    key=lambda z: (z.zone_id not in deployed.zone_ids, z.zone_id in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS,
                                   z.zone_id))
    network_zones = (gpu_zone, *others[: az_count - 1])
    control_plane = tuple(z for z in network_zones if z.zone_id not in EKS_CONTROL_PLANE_REFUSED_ZONE_IDS)
    if len(control_plane) < 2:
        raise az_count_setting.refuse(az_count, f"at least {az_count + 1} in {region}",
                                      f"EKS needs control-plane subnets in 2 AZs and refuses {gpu_zone} for them")
    kept_nat = [z for z in network_zones if z.zone_id in deployed.nat_zone_ids]
    nat_zones = network_zones if network.nat_mode == "perAz" else (kept_nat or [gpu_zone])[:1]
    return AvailabilityZonePlan(
        gpu_zone=gpu_zone, network_zones=network_zones, control_plane_zones=control_plane,
        subnet_cidrs=network.subnet_cidrs([z.zone_id for z in network_zones], deployed.subnets),
        nat_zones=tuple(nat_zones))


def _gpu_zone(gpu: GpuNodeSettings, cloud: CloudFacts, zones: list[Zone], deployed: DeployedStack) -> Zone:
    """The configured GPU AZ; else the one the deployed GPU nodes are in, which must offer the type (a
    move replaces every GPU node group, so only gpuAvailabilityZone makes it); else the first by ID
    offering every GPU type, one the stack already has subnets in first."""
    region = cloud.region
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
        return wanted
    if not offering:
        raise gpu.field("instance_type").refuse(gpu.instance_type, "a GPU type offered in some AZ of " + region,
                                                f"no AZ of {region} offers it")
    kept = next((z for z in zones if z.zone_id in deployed.gpu_zone_ids), None)
    if kept is not None:
        if kept not in offering:
            raise gpu.field("instance_type").refuse(
                gpu.instance_type, f"a GPU type offered in {kept}, where the stack's GPU nodes are",
                f"or set {gpu.key('availability_zone')} to {', '.join(map(str, offering))}, which replaces "
                "the GPU node groups there")
        return kept
    candidates = offering_all or offering
    return next((z for z in candidates if z.zone_id in deployed.zone_ids), candidates[0])
