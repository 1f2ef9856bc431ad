"""What the GPU nodes an SLO verdict needs cost per hour, priced by the plan's own cost code, and
whether prefill/decode disaggregation pays against one engine doing both phases.

`phase_nodes_cost` prices GPU nodes (instances and their root volumes) through `pdctl.cost.hourly_cost`,
so `pdctl plan`'s SLO section and `pdctl size` use the same price list and the same "no price data"
rule as the plan's cost estimate: a type without a price is None, never a guess. `choose_shape` sizes
the workload both ways (serve_app/slo_sizing.py), prices each, and recommends one, saying why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from facts.slo_calibration import COLOCATED_TPOT_LAB_RATIO, COLOCATED_TTFT_LAB_RATIO
from pdctl.cost import CostInputs, NodeGroupCost, hourly_cost
from serve_app.capacity import UCX_ON_EFA_BYTES_PER_SECOND
from serve_app.config import PHASES, Phase
from serve_app.performance import ReplicaModel
from serve_app.slo_sizing import (
    MAX_REPLICAS,
    Targets,
    Workload,
    colocated_replicas_needed,
    colocated_ttft,
    decode_load,
    decode_replicas_needed,
    hand_over,
    highest_rate,
    pd_meets,
    prefill_replicas_needed,
    ttft_at_percentile,
)


def phase_nodes_cost(region: str, instance_type: str, nodes: int | None, disk_gib: float) -> float | None:
    """USD per hour of `nodes` GPU nodes of `instance_type` with `disk_gib` root volumes; None when
    unpriced or when no node count is known."""
    if nodes is None:
        return None
    group = NodeGroupCost(name=instance_type, instance_type=instance_type, count=nodes, disk_gib=disk_gib)
    return hourly_cost(CostInputs(region=region, node_groups=[group], nat_gateways=0, eks_clusters=0)).per_hour


@dataclass(frozen=True)
class ShapeSizing:
    """The workload served one way: "PD" (prefill + decode replicas) or "colocated" (one engine each)."""

    shape: str
    replicas: tuple[int, ...] | None  # PD: (prefill, decode); colocated: (engines,); None: no count meets
    nodes: int | None
    cost_per_hour: float | None
    ttft_seconds: float | None  # at those replicas, at the objective's percentile
    tpot_seconds: float | None
    stall_share: float | None  # of a decode engine's time its steps stall (hand-overs in; colocated: prompts in)

    @property
    def replicas_text(self) -> str:
        return f"none up to {MAX_REPLICAS}" if self.replicas is None else " + ".join(map(str, self.replicas))

    def to_dict(self) -> dict[str, Any]:
        return {k: _rounded(v) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class ShapeChoice:
    pd: ShapeSizing
    colocated: ShapeSizing
    recommended: str | None  # "PD", "colocated", or None when neither meets
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"pd": self.pd.to_dict(), "colocated": self.colocated.to_dict(), "recommended": self.recommended,
                "why": self.why}


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _rounded(value: float) -> float | None:
    """To 0.1 ms as the plan's other times; an unbounded one as None (JSON null)."""
    return round(value, 4) if math.isfinite(value) else None


def _money(cost: float | None) -> str:
    return "unpriced" if cost is None else f"${cost:,.2f}/h"


def _nodes(count: int | None) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


def choose_shape(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload, targets: Targets, *,
                 instance_types: dict[Phase, str], replicas_per_node: dict[Phase, int], region: str,
                 disk_gib: float) -> ShapeChoice:
    """PD and colocated (the decode engine doing both, on decode's node type) for `workload`; the
    cheaper that meets the targets recommended, colocated on a tie (no KV link to fail)."""
    prefills = prefill_replicas_needed(prefill, decode, workload, targets)
    decodes = decode_replicas_needed(decode, workload, targets)
    if prefills is None or decodes is None:
        pd = ShapeSizing("PD", None, None, None, None, None, None)
    else:
        needed = (prefills, decodes)
        nodes = {"prefill": -(-prefills // replicas_per_node["prefill"]),
                 "decode": -(-decodes // replicas_per_node["decode"])}
        costs = [phase_nodes_cost(region, instance_types[p], nodes[p], disk_gib) for p in ("prefill", "decode")]
        load = decode_load(decode, workload, targets, needed[1])
        pd = ShapeSizing("PD", needed, sum(nodes.values()), None if None in costs else sum(c or 0 for c in costs),
                         _finite(ttft_at_percentile(prefill, decode, workload, targets, needed[0])),
                         _finite(load.tpot_seconds), load.stall_share)
    engines = colocated_replicas_needed(decode, workload, targets)
    if engines is None:
        colocated = ShapeSizing("colocated", None, None, None, None, None, None)
    else:
        count = -(-engines // replicas_per_node["decode"])
        load = decode_load(decode, workload, targets, engines, colocated=True)
        colocated = ShapeSizing("colocated", (engines,), count,
                                phase_nodes_cost(region, instance_types["decode"], count, disk_gib),
                                _finite(colocated_ttft(decode, workload, targets, engines)),
                                _finite(load.tpot_seconds), load.stall_share)
    return ShapeChoice(pd, colocated, *_recommend(pd, colocated, targets))


def _recommend(pd: ShapeSizing, colocated: ShapeSizing, targets: Targets) -> tuple[str | None, str]:
    if pd.replicas is None and colocated.replicas is None:
        return None, f"neither meets the targets with up to {MAX_REPLICAS} replicas (the warnings say what binds)"
    if colocated.replicas is None:
        return "PD", ("one engine doing both phases meets the targets at no count up to "
                      f"{MAX_REPLICAS}: taking its prompts in stalls the decode steps that PD keeps apart")
    if pd.replicas is None:
        return "colocated", f"PD meets the targets at no count up to {MAX_REPLICAS}"
    def price(sizing: ShapeSizing) -> float:
        """To the cent, as printed (nodes where unpriced): equal prices are a tie."""
        return round(sizing.cost_per_hour, 2) if sizing.cost_per_hour is not None else float(sizing.nodes or 0)
    stall = f"taking prompts in takes {colocated.stall_share or 0:.0%} of each engine's time"
    if price(pd) < price(colocated):
        return "PD", (f"{_nodes(pd.nodes)} at {_money(pd.cost_per_hour)} against colocated's "
                      f"{_nodes(colocated.nodes)} at {_money(colocated.cost_per_hour)}: colocated, {stall} and "
                      "stalls its decode steps")
    same = price(pd) == price(colocated)
    tpot = colocated.tpot_seconds or 0.0
    return "colocated", (f"{_nodes(colocated.nodes)} at {_money(colocated.cost_per_hour)} against PD's "
                         f"{_nodes(pd.nodes)} at {_money(pd.cost_per_hour)}"
                         + ("; the same price, and no KV link to fail" if same else "")
                         + f"; {stall}, and TPOT p{targets.objective * 100:g} stays "
                         f"{tpot * 1000:,.0f} ms ≤ {targets.tpot_seconds * 1000:,.0f} ms"
                         + _colocated_caveat(colocated.ttft_seconds or 0.0, tpot, targets))


def _colocated_caveat(ttft: float, tpot: float, targets: Targets) -> str:
    """What the colocated TTFT and TPOT would be at the worst ratios the lab measured against this model."""
    worst_ttft, worst_tpot = ttft * COLOCATED_TTFT_LAB_RATIO, tpot * COLOCATED_TPOT_LAB_RATIO
    verdict = "still within the targets" if worst_ttft <= targets.ttft_seconds and \
        worst_tpot <= targets.tpot_seconds else "over a target: measure colocated (pdctl bench) before choosing it"
    return (f" (the lab measured colocated TTFT up to {COLOCATED_TTFT_LAB_RATIO:g}× and TPOT up to "
            f"{COLOCATED_TPOT_LAB_RATIO:g}× this model's, docs/SIZING.md#colocated-steps: "
            f"{worst_ttft * 1000:,.0f} ms and {worst_tpot * 1000:,.0f} ms, {verdict})")


def slo_section_extras(settings: Any, region: str) -> dict[str, Any]:
    """What the plan's SLO section adds to the program's verdict (`settings`: its StackSettings): the
    rate the configured replicas serve at the targets, the KV hand-over on the stack's link and on
    the UCX fallback, and PD against colocated. Empty when the SLO was not sized."""
    from components.config.workload import replica_models

    slo, serving = settings.slo, settings.serving
    instances = {p: serving.node_group(p).instance for p in PHASES}
    models = replica_models(serving.app, instances)
    if isinstance(models, str) or not slo.phases:
        return {}
    prefill, decode = models["prefill"], models["decode"]
    workload, targets = slo.workload, slo.targets
    most = (serving.app.config.phase("prefill").replicas.most, serving.app.config.phase("decode").replicas.most)
    serves = highest_rate(lambda rate: pd_meets(prefill, decode, replace(workload, requests_per_second=rate),
                                                 targets, most))
    link = hand_over(prefill, decode, workload, targets, most, UCX_ON_EFA_BYTES_PER_SECOND)
    choice = choose_shape(prefill, decode, workload, targets,
                          instance_types={p: instances[p].name for p in instances},
                          replicas_per_node={p: serving.app.nodes[p].replicas_per_node for p in instances},
                          region=region, disk_gib=settings.gpu_nodes.disk_gib)
    return {"serves_requests_per_second": round(serves, 3), "configured_max_replicas": list(most),
            "hand_over": {k: _rounded(v) if isinstance(v, float) else v for k, v in asdict(link).items()},
            "shapes": choice.to_dict()}
