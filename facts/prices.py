"""AWS list prices the plan's hourly cost ESTIMATE is computed from, as data.

Source: AWS public pricing pages (Amazon EC2 On-Demand, Linux, shared tenancy; Amazon VPC NAT
gateway and public IPv4 address charges; Amazon EKS cluster standard-support fee; Amazon EBS gp3
storage), read 2026-11, in USD. US East (N. Virginia), US East (Ohio) and US West (Oregon) share
one price list for every item here. Prices exclude taxes, data transfer, NAT data processing
($/GB), EKS extended support and any Savings Plan or Spot discount: the plan labels its figure an
estimate for exactly these reasons. A region or type missing here is reported as "no price data"
rather than guessed. Revisit when AWS changes a price.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SOURCE = (
    "AWS public pricing pages (EC2 On-Demand Linux, VPC NAT gateway + public IPv4, EKS standard "
    "support, EBS gp3), USD"
)
AS_OF = "2026-11"
LABEL = "estimate"
HOURS_PER_MONTH = 730  # AWS's own convention for turning GB-month prices into hourly ones


@dataclass(frozen=True)
class RegionPrices:
    """Unit prices in one region (USD)."""

    ec2_on_demand_per_hour: dict[str, float]
    nat_gateway_per_hour: float
    public_ipv4_per_hour: float
    eks_cluster_per_hour: float
    ebs_per_gb_month: dict[str, float]  # by EBS volume type
    # ElastiCache on-demand nodes by node type; none read from AWS's price list yet, so the GCS
    # store's nodes are reported as not priced rather than guessed.
    elasticache_node_per_hour: dict[str, float] = field(default_factory=dict)


_US_EC2 = {
    "m7i.large": 0.1008,
    "m7i.xlarge": 0.2016,
    "m7i.2xlarge": 0.4032,
    "m7i.4xlarge": 0.8064,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6.4xlarge": 1.3232,
    "g6.8xlarge": 2.0144,
    "g6.12xlarge": 4.6016,
    "g6.16xlarge": 3.3968,
    "g6.24xlarge": 6.6752,
    "g6.48xlarge": 13.3504,
    "g5.8xlarge": 2.448,
    "g5.12xlarge": 5.672,
    "g5.48xlarge": 16.288,
}

_US = RegionPrices(
    ec2_on_demand_per_hour=_US_EC2,
    nat_gateway_per_hour=0.045,
    public_ipv4_per_hour=0.005,
    eks_cluster_per_hour=0.10,
    ebs_per_gb_month={"gp3": 0.08, "gp2": 0.10},
)

PRICES: dict[str, RegionPrices] = {
    "us-east-1": _US,
    "us-east-2": _US,
    "us-west-2": _US,
}
