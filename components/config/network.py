"""The VPC's settings: its CIDR, how many AZs it spans and how private subnets reach the internet; the
subnets' CIDRs per zone."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from components.config.names import ClusterName
from components.discovery import DeployedSubnet
from serve_app.stack_keys import StackKeyModel


@dataclass(frozen=True)
class SubnetCidrs:
    """One AZ's subnets."""

    private: ipaddress.IPv4Network
    public: ipaddress.IPv4Network


class NetworkSettings(StackKeyModel):
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

    def subnet_cidrs(self, zone_ids: Sequence[str], deployed: Iterable[DeployedSubnet] = ()) -> tuple[SubnetCidrs, ...]:
        """(private, public) CIDRs per zone ID, in `zone_ids`' order.

        Private subnets take 1/8 of the VPC each (VPC CNI gives every pod a VPC address); public
        subnets only hold NAT gateways and load balancers, so they share the last eighth in 1/64ths.
        A zone's slot is its zone ID's number (usw2-az3: the third), so the addressing does not
        follow the GPU type or the AZ order. A deployed subnet keeps its CIDR (a new CIDR is a new
        subnet), and no slot a deployed subnet overlaps is given to another zone.
        """
        eighths = list(self.vpc_cidr.subnets(prefixlen_diff=3))
        slots = {False: eighths[:-1], True: list(eighths[-1].subnets(prefixlen_diff=3))}
        kept = {(s.zone_id, s.public): ipaddress.IPv4Network(s.cidr) for s in deployed
                if ipaddress.IPv4Network(s.cidr).subnet_of(self.vpc_cidr)}
        taken = list(kept.values())

        def cidr(zone_id: str, public: bool) -> ipaddress.IPv4Network:
            if (zone_id, public) in kept:
                return kept[(zone_id, public)]
            number = re.search(r"(\d+)$", zone_id)
            own = int(number.group(1)) - 1 if number else -1
            free = [c for c in slots[public] if not any(c.overlaps(t) for t in taken)]
            chosen = slots[public][own] if 0 <= own < len(slots[public]) and slots[public][own] in free else free[0]
            taken.append(chosen)
            return chosen

        return tuple(SubnetCidrs(cidr(z, False), cidr(z, True)) for z in zone_ids)


_RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
