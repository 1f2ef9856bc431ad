"""Hourly cost ESTIMATE of a stack, from what it registers and the price data in `facts.prices`."""

from __future__ import annotations

from dataclasses import dataclass, field

from facts import prices as price_data


@dataclass(frozen=True)
class NodeGroupCost:
    name: str
    instance_type: str
    count: int
    disk_gib: float
    volume_type: str = "gp3"


@dataclass(frozen=True)
class VolumeCost:
    """A persistent volume a workload claims (Prometheus's TSDB), billed like any EBS volume."""

    name: str
    gib: float
    volume_type: str = "gp3"


@dataclass(frozen=True)
class CostInputs:
    region: str
    node_groups: list[NodeGroupCost]
    nat_gateways: int
    eks_clusters: int
    volumes: list[VolumeCost] = field(default_factory=list)
    cache_nodes: dict[str, int] = field(default_factory=dict)  # ElastiCache node type → count
    load_balancers: int = 0  # the front door's Network Load Balancer


@dataclass(frozen=True)
class CostLine:
    item: str
    quantity: float
    unit: str
    unit_price_per_hour: float | None  # None: no price recorded for it

    @property
    def per_hour(self) -> float | None:
        if self.unit_price_per_hour is None:
            return None
        return self.quantity * self.unit_price_per_hour


@dataclass(frozen=True)
class CostEstimate:
    region: str
    lines: list[CostLine]
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def per_hour(self) -> float | None:
        """Sum of the lines, or None when one has no price (`missing` says which): a total that
        leaves a GPU node or a whole region out would read as a price, and it is not one."""
        if not self.complete:
            return None
        return sum(line.per_hour for line in self.lines if line.per_hour is not None)

    def to_dict(self) -> dict:
        return {
            "label": price_data.LABEL,
            "currency": "USD",
            "region": self.region,
            # False when a line has no price: per_hour and per_month are then null ("n/a").
            "complete": self.complete,
            "per_hour": None if self.per_hour is None else round(self.per_hour, 4),
            "per_month": None if self.per_hour is None else round(self.per_hour * price_data.HOURS_PER_MONTH, 2),
            "lines": [
                {"item": line.item, "quantity": line.quantity, "unit": line.unit,
                 "unit_price_per_hour": line.unit_price_per_hour,
                 "per_hour": None if line.per_hour is None else round(line.per_hour, 4)}
                for line in self.lines
            ],
            "missing": self.missing,
            "source": price_data.SOURCE,
            "as_of": price_data.AS_OF,
            "excludes": price_data.EXCLUDES,
        }


def hourly_cost(inputs: CostInputs, prices: dict[str, price_data.RegionPrices] | None = None) -> CostEstimate:
    table_source = price_data.PRICES if prices is None else prices
    table = table_source.get(inputs.region)
    if table is None:
        return CostEstimate(
            region=inputs.region, lines=[],
            missing=[f"region {inputs.region}: no prices recorded (recorded: {', '.join(sorted(table_source))}; "
                     f"`python -m tools.refresh_prices --region {inputs.region}` records it)"],
        )
    lines: list[CostLine] = []
    missing: list[str] = []
    for group in inputs.node_groups:
        ec2 = table.ec2_on_demand_per_hour.get(group.instance_type)
        if ec2 is None:
            why = price_data.SNAPSHOT.ec2_without_on_demand_price.get(group.instance_type)
            missing.append(f"EC2 {group.instance_type} in {inputs.region}" + (f" ({why})" if why else ""))
        lines.append(CostLine(f"EC2 {group.instance_type} ({group.name})", group.count,
                              "instance", ec2))
        gb_month = table.ebs_per_gb_month.get(group.volume_type)
        if gb_month is None:
            missing.append(f"EBS {group.volume_type} in {inputs.region}")
        lines.append(CostLine(
            f"EBS {group.volume_type} root volumes ({group.name})", group.count * group.disk_gib,
            "GiB", None if gb_month is None else gb_month / price_data.HOURS_PER_MONTH,
        ))
    for volume in inputs.volumes:
        gb_month = table.ebs_per_gb_month.get(volume.volume_type)
        if gb_month is None:
            missing.append(f"EBS {volume.volume_type} in {inputs.region}")
        lines.append(CostLine(f"EBS {volume.volume_type} volume ({volume.name})", volume.gib, "GiB",
                              None if gb_month is None else gb_month / price_data.HOURS_PER_MONTH))
    if inputs.nat_gateways:
        lines.append(CostLine("NAT gateway", inputs.nat_gateways, "gateway",
                              table.nat_gateway_per_hour))
        # Each NAT gateway holds one Elastic IP: a public IPv4 address, billed hourly since 2024.
        lines.append(CostLine("Public IPv4 address (NAT EIP)", inputs.nat_gateways, "address",
                              table.public_ipv4_per_hour))
    if inputs.eks_clusters:
        lines.append(CostLine("EKS control plane", inputs.eks_clusters, "cluster",
                              table.eks_cluster_per_hour))
    if inputs.load_balancers:
        if table.nlb_per_hour is None:
            missing.append(f"Network Load Balancer in {inputs.region}")
        lines.append(CostLine("Network Load Balancer (front door)", inputs.load_balancers, "load balancer",
                              table.nlb_per_hour))
    for node_type, count in sorted(inputs.cache_nodes.items()):
        price = table.elasticache_node_per_hour.get(node_type)
        if price is None:
            missing.append(f"ElastiCache {node_type} in {inputs.region}")
        lines.append(CostLine(f"ElastiCache {node_type} (GCS store)", count, "node", price))
    return CostEstimate(region=inputs.region, lines=lines, missing=missing)
