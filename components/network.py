"""The VPC the cluster lives in, from pulumi-aws primitives so every piece shows in previews and tests.

Per AZ: one public subnet (NAT gateways, internet-facing load balancers) and one private subnet
(nodes and pods; the VPC CNI gives every pod a VPC address, hence the large private subnets). Private
subnets reach the internet through NAT: one gateway (`natMode: single`: in the GPU AZ, or where a
deployed stack has it), or one per AZ (`perAz`) so losing an AZ does not cut the others' egress.
Model weights and image layers come from S3, so an S3 gateway endpoint on the private route tables
keeps them off the NAT bill. Subnet CIDRs and NAT AZs come decided (components/config/zones.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.config.names import INTERNAL_ELB_TAG, PUBLIC_ELB_TAG, cluster_tag, stack_tags
from components.config.network import NetworkSettings, SubnetCidrs


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of `Network`.

    settings: validated VPC settings (CIDR, AZ count, NAT mode, protection).
    availability_zones: the VPC's AZs, GPU AZ first, decided from EC2's offerings and the deployed
        stack before any resource exists (`config.zones.plan_availability_zones`); `len == settings.az_count`.
    subnet_cidrs: each AZ's subnets, in `availability_zones`' order.
    nat_zones: the AZs with a NAT gateway: one (natMode single) or each of `availability_zones`.
    """

    settings: NetworkSettings
    availability_zones: Sequence[str]
    subnet_cidrs: Sequence[SubnetCidrs]
    nat_zones: Sequence[str]


def _tags(settings: NetworkSettings, name: str) -> dict[str, str]:
    """A network resource's tags: its name under the cluster's, and the stack tag, which the deploy
    role's EC2 grants require (bootstrap/deploy_permissions/)."""
    return {"Name": f"{settings.cluster_name}-{name}", **stack_tags(settings.cluster_name)}


class Network(pulumi.ComponentResource):
    """VPC, internet gateway, public + private subnet per AZ, NAT, routes and an S3 gateway endpoint."""

    vpc: aws.ec2.Vpc
    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    private_subnet_id_by_az: dict[str, pulumi.Output[str]]
    public_subnet_id_by_az: dict[str, pulumi.Output[str]]
    nat_gateways: dict[str, aws.ec2.NatGateway]  # by AZ

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:network:Network", name, None, opts)
        settings = args.settings
        zones = list(args.availability_zones)
        if len(zones) != settings.az_count:
            raise ValueError(f"NetworkArgs: {len(zones)} AZs given for azCount {settings.az_count}")
        # AZ names are the region's name plus a letter.
        region = zones[0][:-1]
        child = pulumi.ResourceOptions(parent=self)

        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=str(settings.vpc_cidr),
            enable_dns_support=True,
            enable_dns_hostnames=True,  # EKS private endpoint and the S3 endpoint need DNS names
            tags=_tags(settings, "vpc"),
            opts=pulumi.ResourceOptions(parent=self, protect=settings.protect),
        )
        self.vpc_id = self.vpc.id
        internet_gateway, public_routes = self._internet_route(name, settings, child)
        public_subnets, private_subnets = self._subnets(name, settings, zones, args.subnet_cidrs, public_routes, child)
        self.nat_gateways = self._nat_gateways(
            name, settings, args.nat_zones, dict(zip(zones, public_subnets, strict=True)), internet_gateway, child)
        private_route_tables = self._private_routes(name, settings, zones, private_subnets, child)
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=self.vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[table.id for table in private_route_tables],
            tags=_tags(settings, "s3"),
            opts=child,
        )

        self.public_subnet_ids = [subnet.id for subnet in public_subnets]
        self.private_subnet_ids = [subnet.id for subnet in private_subnets]
        self.private_subnet_id_by_az = {zone: subnet.id for zone, subnet in zip(zones, private_subnets, strict=True)}
        self.public_subnet_id_by_az = {zone: subnet.id for zone, subnet in zip(zones, public_subnets, strict=True)}
        self.register_outputs({
            "vpc_id": self.vpc_id,
            "public_subnet_ids": self.public_subnet_ids,
            "private_subnet_ids": self.private_subnet_ids,
        })

    def _internet_route(self, name: str, settings: NetworkSettings, child: pulumi.ResourceOptions,
                        ) -> tuple[aws.ec2.InternetGateway, aws.ec2.RouteTable]:
        """The internet gateway and the public subnets' route table through it."""
        internet_gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=self.vpc.id, tags=_tags(settings, "igw"), opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=internet_gateway.id)],
            tags=_tags(settings, "public"),
            opts=child,
        )
        return internet_gateway, public_routes

    def _subnets(self, name: str, settings: NetworkSettings, zones: list[str], cidrs: Sequence[SubnetCidrs],
                 public_routes: aws.ec2.RouteTable, child: pulumi.ResourceOptions,
                 ) -> tuple[list[aws.ec2.Subnet], list[aws.ec2.Subnet]]:
        """A public subnet (on the public route table) and a private one per AZ: (public, private)."""
        shared = {cluster_tag(settings.cluster_name): "shared"}
        public_subnets: list[aws.ec2.Subnet] = []
        private_subnets: list[aws.ec2.Subnet] = []
        for zone, zone_cidrs in zip(zones, cidrs, strict=True):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=str(zone_cidrs.public),
                availability_zone=zone,
                map_public_ip_on_launch=False,  # only NAT gateways and load balancers live here
                tags={**_tags(settings, f"public-{zone}"), PUBLIC_ELB_TAG: "1", **shared},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_routes.id, opts=child)
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=str(zone_cidrs.private),
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={**_tags(settings, f"private-{zone}"), INTERNAL_ELB_TAG: "1", **shared},
                opts=child,
            )
            public_subnets.append(public)
            private_subnets.append(private)
        return public_subnets, private_subnets

    def _nat_gateways(self, name: str, settings: NetworkSettings, nat_zones: Sequence[str],
                      public_subnet_by_az: dict[str, aws.ec2.Subnet], internet_gateway: aws.ec2.InternetGateway,
                      child: pulumi.ResourceOptions) -> dict[str, aws.ec2.NatGateway]:
        nat_gateways = {}
        for zone in nat_zones:
            public = public_subnet_by_az[zone]
            address = aws.ec2.Eip(
                f"{name}-nat-{zone}", domain="vpc", tags=_tags(settings, f"nat-{zone}"), opts=child)
            nat_gateways[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                allocation_id=address.allocation_id,
                subnet_id=public.id,
                connectivity_type="public",
                tags=_tags(settings, f"nat-{zone}"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[internet_gateway]),
            )
        return nat_gateways

    def _private_routes(self, name: str, settings: NetworkSettings, zones: list[str],
                        private_subnets: list[aws.ec2.Subnet], child: pulumi.ResourceOptions,
                        ) -> list[aws.ec2.RouteTable]:
        """Each private subnet's route table: to the internet through its AZ's NAT, or the one NAT."""
        private_route_tables: list[aws.ec2.RouteTable] = []
        for zone, private in zip(zones, private_subnets, strict=True):
            # Its own AZ's NAT (perAz), else the one NAT.
            nat = self.nat_gateways.get(zone) or next(iter(self.nat_gateways.values()))
            routes = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags=_tags(settings, f"private-{zone}"),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=routes.id, opts=child)
            private_route_tables.append(routes)
        return private_route_tables
