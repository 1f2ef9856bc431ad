"""What the GPU nodes an SLO verdict needs cost per hour, priced by the plan's own cost code.

`phase_nodes_cost` prices GPU nodes (instances and their root volumes) through `pdctl.cost.hourly_cost`,
so `pdctl plan`'s SLO section and `pdctl size` use the same price list and the same "no price data"
rule as the plan's cost estimate: a type without a price is None, never a guess.
"""

from __future__ import annotations

from pdctl.cost import CostInputs, NodeGroupCost, hourly_cost


def phase_nodes_cost(region: str, instance_type: str, nodes: int | None, disk_gib: float) -> float | None:
    """USD per hour of `nodes` GPU nodes of `instance_type` with `disk_gib` root volumes; None when
    unpriced or when no node count is known."""
    if nodes is None:
        return None
    group = NodeGroupCost(name=instance_type, instance_type=instance_type, count=nodes, disk_gib=disk_gib)
    return hourly_cost(CostInputs(region=region, node_groups=[group], nat_gateways=0, eks_clusters=0)).per_hour
