"""Hourly cost ESTIMATE of a stack, from what it registers and the price data in `facts.prices`."""

from __future__ import annotations

from dataclasses import dataclass, field

from facts import prices as price_data
from facts.replacements import NODE_GROUP_TYPES
from pdctl.resources import (
    CLUSTER_TYPES,
    HELM_RELEASE_TYPE,
    LAUNCH_TEMPLATE_TYPE,
    NAT_GATEWAY_TYPE,
    REPLICATION_GROUP_TYPE,
    SERVICE_TYPE,
    lookup,
)


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


# EKS gives a managed node group without a launch-template disk a 20 GiB root volume.
EKS_DEFAULT_DISK_GIB = 20.0


def cost_inputs(resources: list, region: str, size: str = "desiredSize") -> CostInputs:
    """What the stack bills for, with each node group at `size` (desiredSize: as created, which is
    its minimum; maxSize: as far as the node autoscaler may grow it)."""
    by_urn = {r.urn: r for r in resources}
    groups = []
    for r in sorted(resources, key=lambda r: (r.name, r.type)):
        if r.type not in NODE_GROUP_TYPES:
            continue
        template = next((by_urn[d] for d in r.dependencies
                         if d in by_urn and by_urn[d].type == LAUNCH_TEMPLATE_TYPE), None)
        template_inputs = template.inputs if template else {}
        instance_type = (lookup(r.inputs, "instanceTypes.0")
                         or template_inputs.get("instanceType") or "unknown")
        disks = lookup(template_inputs, "blockDeviceMappings.*.ebs") or []
        disk_gib = sum(float(d.get("volumeSize", 0)) for d in disks)
        volume_type = disks[0].get("volumeType", "gp3") if disks else "gp3"
        if not disk_gib:
            disk_gib = float(r.inputs.get("diskSize") or EKS_DEFAULT_DISK_GIB)
        groups.append(NodeGroupCost(
            name=r.name, instance_type=instance_type,
            count=int(lookup(r.inputs, f"scalingConfig.{size}") or 0),
            disk_gib=disk_gib, volume_type=volume_type,
        ))
    clusters = sum(1 for r in resources if r.type == CLUSTER_TYPES[0]) or sum(
        1 for r in resources if r.type == CLUSTER_TYPES[1])
    cache_nodes: dict[str, int] = {}
    for r in resources:
        if r.type == REPLICATION_GROUP_TYPE:
            node_type = r.inputs.get("nodeType", "unknown")
            cache_nodes[node_type] = cache_nodes.get(node_type, 0) + int(r.inputs.get("numCacheClusters") or 1)
    return CostInputs(
        region=region, node_groups=groups,
        nat_gateways=sum(1 for r in resources if r.type == NAT_GATEWAY_TYPE),
        eks_clusters=clusters,
        volumes=prometheus_volumes(resources),
        cache_nodes=cache_nodes,
        # A LoadBalancer Service is an NLB the AWS Load Balancer Controller creates (components/front_door.py).
        load_balancers=sum(1 for r in resources if r.type == SERVICE_TYPE
                           and (r.inputs.get("spec") or {}).get("type") == "LoadBalancer"),
    )


# Where kube-prometheus-stack's values claim Prometheus's volume (components/manifests/helm_values.py).
PROMETHEUS_CLAIM = "values.prometheus.prometheusSpec.storageSpec.volumeClaimTemplate.spec"


def prometheus_volumes(resources: list) -> list[VolumeCost]:
    """The Prometheus volume each kube-prometheus-stack release claims (all gp3: the stack's class)."""
    volumes = []
    for r in resources:
        if r.type != HELM_RELEASE_TYPE or r.inputs.get("chart") != "kube-prometheus-stack":
            continue
        claim = lookup(r.inputs, PROMETHEUS_CLAIM) or {}
        size = str(lookup(claim, "resources.requests.storage") or "")
        if size.endswith("Gi"):
            volumes.append(VolumeCost(name=f"{r.name} Prometheus", gib=float(size[:-2])))
    return volumes


def node_group_costs(at_min: CostInputs, at_max: CostInputs) -> dict[str, dict[str, float | None]]:
    """Each node group's own hourly cost (its instances and root volumes) at its min and max size,
    by its resource name; None where its type has no price."""
    def alone(inputs: CostInputs, group: NodeGroupCost) -> float | None:
        return hourly_cost(CostInputs(region=inputs.region, node_groups=[group], nat_gateways=0,
                                      eks_clusters=0)).per_hour

    maxima = {group.name: group for group in at_max.node_groups}
    return {group.name: {"min": alone(at_min, group), "max": alone(at_max, maxima[group.name])}
            for group in at_min.node_groups}
