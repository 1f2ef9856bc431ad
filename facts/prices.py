"""AWS list prices the plan's hourly cost estimate is computed from: a dated offline snapshot.

The numbers live in facts/aws_prices.json (docs/SOURCES.md#aws-prices), written by
`python -m tools.refresh_prices` from the AWS Price List (Query API or bulk offer files); each group names
its source and the date it was read (`SNAPSHOT.sources`). Prices are USD, On-Demand, Linux, shared
tenancy, and exclude taxes, data transfer, NAT data processing ($/GB), EKS extended support and any
Savings Plan or Spot discount: the plan labels its figure an estimate for exactly these reasons. A
region or item missing here is reported as "not recorded" rather than guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DATA_FILE = Path(__file__).with_name("aws_prices.json")
LABEL = "estimate"
HOURS_PER_MONTH = 730  # AWS's own convention for turning GB-month prices into hourly ones
EXCLUDES = "taxes, data transfer, NAT data processing, EKS extended support, discounts"


@dataclass(frozen=True)
class PriceSource:
    """Where one group of prices was read, and when."""

    source: str
    as_of: str


@dataclass(frozen=True)
class RegionPrices:
    """Unit prices in one region (USD)."""

    ec2_on_demand_per_hour: dict[str, float]
    nat_gateway_per_hour: float
    public_ipv4_per_hour: float
    eks_cluster_per_hour: float
    ebs_per_gb_month: dict[str, float]  # by EBS volume type
    elasticache_node_per_hour: dict[str, float] = field(default_factory=dict)  # by node type
    # The front door's Network Load Balancer hour (its traffic-dependent NLCU-hours are not counted).
    # Recorded from the pricing page, not yet by tools.refresh_prices: a refresh drops it, and the
    # plan then names it missing instead of pricing the door at nothing.
    nlb_per_hour: float | None = None


def region_prices(entry: dict) -> RegionPrices:
    """One region's entry of the data file as `RegionPrices`."""
    return RegionPrices(
        ec2_on_demand_per_hour=dict(entry["ec2_on_demand_per_hour"]),
        nat_gateway_per_hour=float(entry["nat_gateway_per_hour"]),
        public_ipv4_per_hour=float(entry["public_ipv4_per_hour"]),
        eks_cluster_per_hour=float(entry["eks_cluster_per_hour"]),
        ebs_per_gb_month=dict(entry["ebs_per_gb_month"]),
        elasticache_node_per_hour=dict(entry.get("elasticache_node_per_hour", {})),
        nlb_per_hour=float(entry["nlb_per_hour"]) if "nlb_per_hour" in entry else None,
    )


@dataclass(frozen=True)
class PriceSnapshot:
    """The data file as read: where each group of prices came from, and the prices by region."""

    sources: dict[str, PriceSource]
    prices: dict[str, RegionPrices]
    carried: dict[str, str]  # region -> the region whose price list it carries (`same_as`)
    ec2_without_on_demand_price: dict[str, str]  # instance type -> why the Price List has no On-Demand price


def load(path: Path = DATA_FILE) -> PriceSnapshot:
    data = json.loads(path.read_text())
    entries = data["regions"]
    carried = {region: entry["same_as"] for region, entry in entries.items() if "same_as" in entry}
    return PriceSnapshot(
        sources={name: PriceSource(**spec) for name, spec in data["sources"].items()},
        prices={region: region_prices(entries[carried.get(region, region)]) for region in entries},
        carried=carried,
        ec2_without_on_demand_price=dict(data.get("ec2_without_on_demand_price", {})),
    )


SNAPSHOT = load()
PRICES = SNAPSHOT.prices
_DATES = sorted(source.as_of for source in SNAPSHOT.sources.values())
AS_OF = _DATES[0] if _DATES[0] == _DATES[-1] else f"{_DATES[0]} to {_DATES[-1]}"
SOURCE = "AWS Price List (facts/aws_prices.json; " + ", ".join(
    f"{name} {source.as_of}" for name, source in SNAPSHOT.sources.items() if name != "same_as") + ")"
