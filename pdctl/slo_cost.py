"""What the GPU nodes an SLO verdict needs cost per hour, priced by the plan's own cost code.

`phase_nodes_cost` prices one phase's GPU nodes (instances and their root volumes) through
`pdctl.cost.hourly_cost`, so `pdctl plan`'s SLO section and `pdctl size` use the same price list
and the same "no price data" rule as the plan's cost estimate: a type without a price is None,
never a guess.
"""

from __future__ import annotations

from typing import Any

from components.workload_settings import StackSlo
from pdctl.cost import CostInputs, NodeGroupCost, hourly_cost


def phase_nodes_cost(region: str, instance_type: str, nodes: int | None, disk_gib: float) -> float | None:
    """USD per hour of `nodes` GPU nodes of `instance_type` with `disk_gib` root volumes; None when
    unpriced or when no node count is known."""
    if nodes is None:
        return None
    group = NodeGroupCost(name=instance_type, instance_type=instance_type, count=nodes, disk_gib=disk_gib)
    return hourly_cost(CostInputs(region=region, node_groups=[group], nat_gateways=0, eks_clusters=0)).per_hour


def slo_section(slo: StackSlo, region: str, disk_gib: float) -> dict[str, Any]:
    """The plan's SLO section: the verdict per phase, with what the needed nodes cost per hour."""
    section = slo.to_dict()
    for phase in slo.phases:
        cost = phase_nodes_cost(region, phase.instance_type, phase.needed_nodes, disk_gib)
        section["phases"][phase.phase]["needed_cost_per_hour"] = None if cost is None else round(cost, 4)
    return section
