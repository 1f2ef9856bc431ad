"""What an update does to traffic: how long new requests cannot be served, what happens to the requests
in flight, and the extra GPU nodes (with their quota, minutes and dollars) that keep it serving.

The plan's `updates` section (`updates_section`) holds, for the stack's update path
(components/config/updates.py), the effect of each kind of change, from the plan's own cold-start
figures (pdctl/cold_start.py). `serving_impact(diff, head)` sorts what a diff of two plans changes into
those kinds and adds up the outages (Pulumi updates the node groups before the RayService that
depends on them, so the outages follow one another):

- serve config (serveConfigV2: engine arguments, the model, replica bounds): in place, each phase
  whose only replica Ray Serve stops before its new one starts, for a pod restart's time (the node
  keeps the image, weights and compile caches); blue/green, nothing;
- the Ray cluster (the image, Ray's version, the worker pods): in place, the RayService is replaced,
  the old one deleted first, for its whole start; blue/green, nothing;
- a GPU node roll or group replacement: each phase's only replica is evicted and starts again on a
  node EKS added beside it (a worker pod moved to a joined node), one phase after the other, on
  either path: KubeRay's NewCluster does not see the nodes change;
- a system node roll: the Ray head restarts; with GCS fault tolerance the workers keep serving,
  without it KubeRay restarts them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from components.config.updates import SERVE_GRACEFUL_SHUTDOWN_SECONDS, UpdatePath
from facts.durations import CLUSTER_AUTOSCALER_SCALE_DOWN
from facts.instances import RECORDED_EC2_ANSWERS
from facts.prices import PRICES
from pdctl.cold_start import ColdStart
from pdctl.money import usd
from serve_app.config import PHASES

RAY_SERVICE_TYPE = "kubernetes:ray.io/v1:RayService"
SERVE_CONFIG_PATH = "spec.serveConfigV2"
CLUSTER_CONFIG_PATH = "spec.rayClusterConfig"

SERVE_CONFIG, BLUE_GREEN, GPU_NODE_ROLL, SYSTEM_NODE_ROLL, REPLACED = (
    "serve config", "serve config or cluster, blue/green", "GPU node roll", "system node roll",
    "RayService replaced")


@dataclass(frozen=True)
class TrafficEffect:
    """One kind of change: `seconds` new requests cannot be served, what happens to those in flight,
    why, `limit` (what stops it keeping the traffic, in a few words; "" where it does) and whether it
    runs a second cluster on extra GPU nodes (`surge`)."""

    seconds: float
    in_flight: str
    why: str
    limit: str = ""
    surge: bool = False


@dataclass(frozen=True)
class Surge:
    """The extra GPU nodes a blue/green switch runs, from the scale-up until the autoscaler removes them."""

    gpu_nodes: int
    instance_type: str
    vcpus: int | None  # None: the type is not among the recorded EC2 answers
    minutes: float
    dollars: float | None  # None: no price recorded for the type in the region

    def summary(self) -> str:
        quota = f", +{self.vcpus} vCPUs" if self.vcpus is not None else ""
        cost = usd(self.dollars) if self.dollars is not None else "unpriced"
        return f"+{self.gpu_nodes} × {self.instance_type}{quota} for {self.minutes:.0f} min, {cost}"


def surge(path: UpdatePath, start: ColdStart, region: str) -> Surge | None:
    """What a second cluster costs (or would, on an in-place stack): its GPU nodes from the Cluster
    Autoscaler's scale-up until it removes the old cluster's, the switch waiting for a new node's cold
    start, then the drain."""
    if not path.surge_nodes:
        return None
    instance_type = path.surge[0].instance_type
    nodes = path.surge_nodes
    minutes = (start.new_node.seconds + path.drain_seconds + CLUSTER_AUTOSCALER_SCALE_DOWN.seconds) / 60
    answer = RECORDED_EC2_ANSWERS.get(instance_type)
    prices = PRICES.get(region)
    hourly = prices.ec2_on_demand_per_hour.get(instance_type) if prices else None
    return Surge(nodes, instance_type, answer.vcpus * nodes if answer else None, minutes,
                 None if hourly is None else nodes * hourly * minutes / 60)


def effects(path: UpdatePath, start: ColdStart, *, one_replica_phases: int, gcs_fault_tolerance: bool,
            ) -> dict[str, TrafficEffect]:
    """Each kind of change on this stack."""
    longest = ("" if path.longest_stream_seconds is None
               else f"; the longest stream the engines admit takes about {path.longest_stream_seconds:.0f} s")
    restart = start.pod_restart.seconds
    serve_in_place = (
        TrafficEffect(0.0, "finish: Ray Serve replaces the replicas a few at a time",
                      "every phase keeps a replica serving while Ray Serve rolls the others")
        if one_replica_phases == 0 else
        TrafficEffect(restart, f"cut after {SERVE_GRACEFUL_SHUTDOWN_SECONDS} s (Ray Serve's graceful shutdown)"
                      + longest,
                      "Ray Serve stops a phase's only replica before its new one starts (its rolling update), "
                      "for a pod restart's time; new requests wait in its queue meanwhile "
                      "(docs/PROVEN.md#updates-under-load)", "upgradeStrategy None"))
    moved = start.moved_pod.seconds * max(one_replica_phases, 1)
    # A RayService change takes one path or the other; a replacement (a new name) is the same on both.
    serve_change = ({BLUE_GREEN: TrafficEffect(
        0.0, f"finish on the old cluster, kept {path.drain_seconds} s after the switch" + longest,
        "KubeRay starts a second cluster and switches the serve Service once it serves", surge=True)}
        if path.blue_green else {SERVE_CONFIG: serve_in_place})
    return {
        **serve_change,
        REPLACED: TrafficEffect(start.ray_service_minutes * 60, "cut: the old RayService is deleted first",
                                "the RayService is replaced, the old one deleted before the new one starts",
                                "upgradeStrategy None"),
        GPU_NODE_ROLL: TrafficEffect(
            moved if one_replica_phases else 0.0,
            "cut: the evicted worker pod stops Ray at once (its preStop hook)",
            "EKS evicts each phase's only replica before a replacement serves; it starts again on a new node "
            "(a PodDisruptionBudget would hold the roll, and EKS fails it after 15 min)",
            "EKS drains a phase's only replica first"),
        SYSTEM_NODE_ROLL: (
            TrafficEffect(0.0, "finish: the workers keep serving while the head restarts",
                          "GCS fault tolerance keeps the cluster's state outside the head")
            if gcs_fault_tolerance else
            TrafficEffect(restart, "cut: KubeRay restarts every worker pod with the head",
                          "the Ray head restarts, and without GCS fault tolerance its workers with it",
                          "gcsFaultTolerance false")),
    }


def updates_section(path: UpdatePath, start: ColdStart, region: str, *, one_replica_phases: int,
                    gcs_fault_tolerance: bool) -> dict[str, Any]:
    """The plan's `updates`: the update path, each kind of change's effect on traffic, and the surge a
    blue/green switch runs (on an in-place stack, what NewCluster would run)."""
    extra = surge(path, start, region)
    return {
        **path.to_dict(),
        "effects": {kind: asdict(effect) for kind, effect in effects(
            path, start, one_replica_phases=one_replica_phases, gcs_fault_tolerance=gcs_fault_tolerance).items()},
        "surge": asdict(extra) if extra else None,
    }


@dataclass(frozen=True)
class ServingImpact:
    """What one update does to traffic: the outages of its kinds of change, in sequence."""

    kinds: tuple[str, ...]
    seconds: float
    in_flight: tuple[str, ...]
    why: tuple[str, ...]
    limits: tuple[str, ...] = ()  # what stops each kind that drops traffic from keeping it
    surge: dict[str, Any] | None = None

    @property
    def keeps_serving(self) -> bool:
        return self.seconds == 0

    def summary(self) -> str:
        if not self.kinds:
            return "no effect on traffic"
        down = ("0 s: keeps serving" if self.keeps_serving else
                f"{self.seconds / 60:.1f} min with nothing served ({'; '.join(self.limits)})")
        extra = "" if self.surge is None else f" ({Surge(**self.surge).summary()})"
        return f"{down}{extra}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "keeps_serving": self.keeps_serving}


def _ray_service_kinds(resource: Any, blue_green: bool) -> list[str]:
    """In place, a cluster change replaces the RayService (components/inference.py), so only its serve
    config is updated; blue/green takes either."""
    if resource.action == "replace":
        return [REPLACED]
    if resource.action != "update":
        return []
    paths = [change.path for change in resource.changes]
    serve = any(p.startswith(SERVE_CONFIG_PATH) for p in paths)
    cluster = any(p.startswith(CLUSTER_CONFIG_PATH) for p in paths)
    if blue_green and (serve or cluster):
        return [BLUE_GREEN]
    return ([SERVE_CONFIG] if serve else []) + ([REPLACED] if cluster else [])


def serving_impact(resources: Iterable[Any], head: dict) -> ServingImpact:
    """What an update does to traffic on the path of `head` (a plan document): `resources`, its diff's
    resource changes (pdctl.plan_diff.ResourceChange: type, action, changed paths, node rollout)."""
    section = head.get("updates")
    if not section:
        return ServingImpact((), 0.0, (), ())
    found: list[str] = []
    for resource in resources:
        if resource.type == RAY_SERVICE_TYPE:
            found += _ray_service_kinds(resource, section["blue_green"])
        elif resource.rollout is not None:
            found.append(GPU_NODE_ROLL if resource.rollout.gpu else SYSTEM_NODE_ROLL)
    kinds = tuple(dict.fromkeys(found))
    chosen = [section["effects"][kind] for kind in kinds]
    uses_surge = any(effect["surge"] for effect in chosen)
    return ServingImpact(kinds, sum(effect["seconds"] for effect in chosen),
                         tuple(dict.fromkeys(effect["in_flight"] for effect in chosen)),
                         tuple(dict.fromkeys(effect["why"] for effect in chosen)),
                         tuple(dict.fromkeys(effect["limit"] for effect in chosen if effect["limit"])),
                         section["surge"] if uses_surge else None)


def stack_updates(run, start: ColdStart | None, region: str) -> dict[str, Any] | None:
    """The `updates` section of the stack the program built; None without one."""
    stack = run.program.get("stack")
    if stack is None or start is None:
        return None
    serving = stack.settings.serving
    one_replica = sum(1 for phase in PHASES if serving.app.config.phase(phase).replicas.min_replicas < 2)
    return updates_section(serving.updates, start, region, one_replica_phases=one_replica,
                           gcs_fault_tolerance=serving.gcs_fault_tolerance)


def serving_lines(impact: ServingImpact) -> list[str]:
    """The lines a diff leads with: the verdict, then what happens to the requests in flight and why."""
    return [f"SERVING: {impact.summary()}",
            *(f"  in flight: {text}" for text in impact.in_flight),
            *(f"  why: {text}" for text in impact.why)]
