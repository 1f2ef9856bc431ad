"""The deploy critical path: the longest chain of create times through the registered graph.

How the Pulumi engine orders creates, and so how this module models them:
- a resource starts once every resource in its `dependencies` is done. The SDK already expands a
  dependency on a local component into its custom/remote descendants (pulumi/runtime/rpc.py
  `_add_dependency`); a parent's own dependencies are NOT passed on to its children, so a child
  waits only for what it lists itself;
- a component resource is "done" when all its children are (a parent edge), which covers a
  dependency recorded on the component's URN itself;
- independent resources are created in parallel.

So the time to a finished stack is the longest path through that DAG, weighted by each resource's
expected create time (`facts.durations`). The reference scripts (eksctl, helm, kubectl) run every
step one after another; `sequential_minutes` is that sum for the same resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from facts.durations import CreateDuration, create_duration


class GraphResource(Protocol):
    type: str
    name: str
    urn: str
    parent: str | None
    dependencies: list[str]
    custom: bool


@dataclass(frozen=True)
class PathStep:
    urn: str
    type: str
    name: str
    minutes: float
    starts_at: float
    source: str


@dataclass(frozen=True)
class CriticalPath:
    steps: list[PathStep]  # resources on the longest chain that take time, in create order
    minutes: float  # expected wall time of the whole deploy (parallel, as the engine does it)
    sequential_minutes: float  # the same resources created one after another
    finished_at: Mapping[str, float]  # minutes from the start until each resource (by URN) is done

    def to_dict(self) -> dict:
        return {
            "minutes": round(self.minutes, 2),
            "sequential_minutes": round(self.sequential_minutes, 2),
            "steps": [
                {"type": s.type, "name": s.name, "urn": s.urn, "minutes": round(s.minutes, 2),
                 "starts_at": round(s.starts_at, 2), "source": s.source}
                for s in self.steps
            ],
        }


def _later(t: float, than: float) -> bool:
    """Strictly later, ignoring float noise, so ties go to the first URN in sorted order and the
    path is the same on every run (registration order is not)."""
    return t > than + 1e-9


def critical_path(resources: Iterable[GraphResource],
                  overrides: Mapping[str, CreateDuration] | None = None) -> CriticalPath:
    """`overrides`: create times by resource type that the stack's own settings decide (the
    RayService's, from its cold-start path), in place of facts.durations' generic ones."""
    by_urn = {r.urn: r for r in resources}
    children: dict[str, list[str]] = {urn: [] for urn in by_urn}
    for r in by_urn.values():
        if r.parent in by_urn:
            children[r.parent].append(r.urn)

    durations = {
        urn: (overrides or {}).get(r.type) or create_duration(r.type, custom=r.custom) for urn, r in by_urn.items()
    }
    start: dict[str, float] = {}
    done: dict[str, float] = {}
    # What set each resource's start/done time, to walk the chain back from the last one.
    start_cause: dict[str, str | None] = {}
    done_cause: dict[str, str | None] = {}
    visiting: set[str] = set()
    finishing: set[str] = set()

    def start_of(urn: str) -> float:
        if urn in start:
            return start[urn]
        if urn in visiting:
            raise ValueError(f"dependency cycle through {urn}")
        visiting.add(urn)
        r = by_urn[urn]
        best, cause = 0.0, None
        for dep in sorted(r.dependencies):
            if dep in by_urn and dep != r.parent:
                t = done_of(dep)
                if _later(t, best):
                    best, cause = t, dep
        visiting.discard(urn)
        start[urn], start_cause[urn] = best, cause
        return best

    def done_of(urn: str) -> float:
        if urn in done:
            return done[urn]
        if urn in finishing:
            raise ValueError(f"dependency cycle through {urn}")
        finishing.add(urn)
        best, cause = start_of(urn) + durations[urn].minutes, None
        for child in sorted(children[urn]):
            t = done_of(child)
            if _later(t, best):
                best, cause = t, child
        finishing.discard(urn)
        done[urn], done_cause[urn] = best, cause
        return best

    if not by_urn:
        return CriticalPath(steps=[], minutes=0.0, sequential_minutes=0.0, finished_at={})
    last = min(by_urn)  # the first in sorted order, which wins ties
    for urn in sorted(by_urn):
        finished = done_of(urn)
        if _later(finished, done[last]):
            last = urn

    chain: list[str] = []
    cursor: str | None = last
    while cursor is not None:
        child = done_cause[cursor]
        if child is not None:  # a component: its time is its slowest child's
            cursor = child
            continue
        chain.append(cursor)
        cursor = start_cause[cursor]

    steps = [
        PathStep(urn=u, type=by_urn[u].type, name=by_urn[u].name, minutes=durations[u].minutes,
                 starts_at=start[u], source=durations[u].source)
        for u in reversed(chain) if durations[u].minutes > 0
    ]
    return CriticalPath(
        steps=steps,
        minutes=done[last],
        sequential_minutes=sum(d.minutes for d in durations.values()),
        finished_at=done,
    )
