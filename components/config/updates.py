"""How a change to the RayService reaches traffic: in place, or blue/green through KubeRay's NewCluster.

upgradeStrategy None: KubeRay applies a serveConfigV2 change to the running cluster and Ray Serve
rolls each deployment in place. With one replica per phase Serve stops the old replica before it
starts the new one (its rollout size is max(int(0.2 × replicas), 1) and it starts nothing while no
replica is pending: docs/SOURCES.md#serve-rolling-update), so the phase serves nothing until the new
engine has loaded. A change to the cluster itself replaces the RayService (components/inference.py).

upgradeStrategy NewCluster: every change to the RayService's cluster spec starts a second RayCluster
beside the first, KubeRay switches the serve Service to it once its Serve applications run, and
deletes the old one `rayClusterDeletionDelaySeconds` later (docs/SOURCES.md#kuberay-new-cluster).
The stack puts a digest of serveConfigV2 on the head's pod template, so a serve-config change (engine
arguments, the model, replica bounds) takes that path too: KubeRay applies the new serve config to the
new cluster only and never restarts the serving one. The second cluster needs GPU nodes of its own: the
GPU node group must be able to grow by them (gpuNodeMaxCount; the Cluster Autoscaler adds them for the
switch and removes them once the old cluster's pods are gone). A stack that cannot is refused, since the
second cluster would wait Pending forever while `pulumi up` waits for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.config.nodes import GpuNodeGroupSpec
from components.config.ray_service import RayServiceSettings
from components.config.workload import replica_models
from serve_app.checks import CheckedApp
from serve_app.config import PHASES

BLUE_GREEN = "NewCluster"
# When the plan cannot time the longest stream (no model facts, a GPU without vendor figures): KubeRay
# keeps the old cluster this long after the switch.
UNTIMED_DRAIN_SECONDS = 600
# Ray Serve's default graceful_shutdown_timeout_s: an in-place update cuts a stream still running then.
SERVE_GRACEFUL_SHUTDOWN_SECONDS = 20


@dataclass(frozen=True)
class SurgeGroup:
    """The GPU nodes a second RayCluster needs from one node group while both clusters run."""

    node_group: str  # the setting naming the group's type (gpuNodeType, prefillGpuNodeType, ...)
    instance_type: str
    nodes: int  # the new cluster's worker pods at its fewest replicas, one per node
    room: int  # what the group's maximum leaves beside the old cluster at its most


@dataclass(frozen=True)
class UpdatePath:
    """How the stack's RayService takes a change: `strategy` (upgradeStrategy), the nodes a second
    cluster needs (`surge`: what NewCluster runs, or would run in place of None), how long in-flight
    streams may take to finish (`drain_seconds`: the longest stream the engines admit, timed by the
    plan's model, or `UNTIMED_DRAIN_SECONDS`), and `longest_stream_seconds` itself (None: not timed)."""

    strategy: str
    drain_seconds: int
    longest_stream_seconds: float | None
    surge: tuple[SurgeGroup, ...] = ()

    @property
    def blue_green(self) -> bool:
        return self.strategy == BLUE_GREEN

    @property
    def surge_nodes(self) -> int:
        return sum(group.nodes for group in self.surge)

    @property
    def room_for_surge(self) -> bool:
        """Whether the GPU node groups can grow by a second cluster's nodes (gpuNodeMaxCount)."""
        return all(group.nodes <= group.room for group in self.surge)

    def to_dict(self) -> dict[str, object]:
        return {"strategy": self.strategy, "blue_green": self.blue_green, "room_for_surge": self.room_for_surge,
                "drain_seconds": self.drain_seconds,
                "longest_stream_seconds": self.longest_stream_seconds,
                "surge": [{"node_group": g.node_group, "instance_type": g.instance_type, "nodes": g.nodes,
                           "room": g.room} for g in self.surge]}


def longest_stream_seconds(app: CheckedApp, node_groups: tuple[GpuNodeGroupSpec, ...]) -> float | None:
    """The longest request the engines admit, timed by the plan's replica model: a prompt's prefill
    then max_model_len tokens decoded in a full batch (max_num_seqs), the context half full on
    average. None where the model cannot time it."""
    instances = {phase: next(g.instance for g in node_groups if phase in g.phases) for phase in PHASES}
    models = replica_models(app, instances)
    if isinstance(models, str):
        return None
    engine = app.config.engine_for("decode")
    tokens = engine.max_model_len
    step = models["decode"].decode_step_seconds(engine.max_num_seqs, tokens / 2)
    return models["prefill"].prefill_seconds(tokens) + tokens * step


def drain_seconds(longest: float | None) -> int:
    """Whole minutes at least as long as the longest stream, so the old cluster outlives it."""
    return UNTIMED_DRAIN_SECONDS if longest is None else 60 * math.ceil(longest / 60)


def update_path(ray_service: RayServiceSettings, app: CheckedApp,
                node_groups: tuple[GpuNodeGroupSpec, ...]) -> UpdatePath:
    """The stack's update path; refuses NewCluster where a GPU node group cannot hold a second cluster."""
    longest = longest_stream_seconds(app, node_groups)
    surge = tuple(_surge_group(group, app) for group in node_groups)
    short = next((group for group in surge if group.nodes > group.room), None)
    if short is not None and ray_service.upgrade_strategy == BLUE_GREEN:
        spec = next(g for g in node_groups if g.target.settings.instance_type.key == short.node_group)
        raise spec.target.settings.max_count.refuse(
            spec.target.node_max_count or 0,
            f"at least {spec.most + short.nodes - short.room}, or {RayServiceSettings.key('upgrade_strategy')} None",
            f"NewCluster starts a second RayCluster whose {short.nodes} worker pod(s) need {short.instance_type} "
            f"nodes of their own beside the serving ones; with no room it waits Pending and the update never "
            "reaches traffic")
    return UpdatePath(ray_service.upgrade_strategy, drain_seconds(longest), longest, surge)


def _surge_group(group: GpuNodeGroupSpec, app: CheckedApp) -> SurgeGroup:
    old_most = sum(app.nodes[phase].max_nodes for phase in group.phases)
    new_fewest = sum(app.nodes[phase].min_nodes for phase in group.phases)
    return SurgeGroup(group.target.settings.instance_type.key, group.instance.name, new_fewest,
                      max(group.most - old_most, 0))
