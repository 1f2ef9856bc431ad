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
            # Three places: their one-decimal reading is the text's (two would round a second time).
            "minutes": round(self.minutes, 3),
            "sequential_minutes": round(self.sequential_minutes, 3),
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


class _Schedule:
    """When each resource starts and is done as the engine orders creates, computed on demand, and what
    set each time: the dependency that finished last before a start, the child that finished last in a
    component (to walk the chain back from the last resource done)."""

    def __init__(self, by_urn: dict[str, GraphResource], durations: dict[str, CreateDuration]) -> None:
        self.by_urn, self.durations = by_urn, durations
        self.children: dict[str, list[str]] = {urn: [] for urn in by_urn}
        for r in by_urn.values():
            if r.parent in by_urn:
                self.children[r.parent].append(r.urn)
        self.start: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.start_cause: dict[str, str | None] = {}
        self.done_cause: dict[str, str | None] = {}
        self._visiting: set[str] = set()
        self._finishing: set[str] = set()

    def start_of(self, urn: str) -> float:
        if urn in self.start:
            return self.start[urn]
        if urn in self._visiting:
            raise ValueError(f"dependency cycle through {urn}")
        self._visiting.add(urn)
        r = self.by_urn[urn]
        best, cause = 0.0, None
        for dep in sorted(r.dependencies):
            if dep in self.by_urn and dep != r.parent:
                t = self.done_of(dep)
                if _later(t, best):
                    best, cause = t, dep
        self._visiting.discard(urn)
        self.start[urn], self.start_cause[urn] = best, cause
        return best

    def done_of(self, urn: str) -> float:
        if urn in self.done:
            return self.done[urn]
        if urn in self._finishing:
            raise ValueError(f"dependency cycle through {urn}")
        self._finishing.add(urn)
        best, cause = self.start_of(urn) + self.durations[urn].minutes, None
        for child in sorted(self.children[urn]):
            t = self.done_of(child)
            if _later(t, best):
                best, cause = t, child
        self._finishing.discard(urn)
        self.done[urn], self.done_cause[urn] = best, cause
        return best

    def last_done(self) -> str:
        """The resource done last (of equal times, the first in sorted order), every time computed on the way."""
        last = min(self.by_urn)
        for urn in sorted(self.by_urn):
            finished = self.done_of(urn)
            if _later(finished, self.done[last]):
                last = urn
        return last

    def chain_to(self, last: str) -> list[str]:
        """The resources whose create times add up to `last`'s done time, from `last` back to the first."""
        chain: list[str] = []
        cursor: str | None = last
        while cursor is not None:
            child = self.done_cause[cursor]
            if child is not None:  # a component: its time is its slowest child's
                cursor = child
                continue
            chain.append(cursor)
            cursor = self.start_cause[cursor]
        return chain


def critical_path(resources: Iterable[GraphResource],
                  overrides: Mapping[str, CreateDuration] | None = None) -> CriticalPath:
    """`overrides`: create times by resource URN that the stack's own settings decide (the
    RayService's, from its cold-start path), in place of facts.durations' generic ones by type."""
    by_urn = {r.urn: r for r in resources}
    if not by_urn:
        return CriticalPath(steps=[], minutes=0.0, sequential_minutes=0.0, finished_at={})
    durations = {
        urn: (overrides or {}).get(urn) or create_duration(r.type, custom=r.custom) for urn, r in by_urn.items()
    }
    schedule = _Schedule(by_urn, durations)
    last = schedule.last_done()
    steps = [
        PathStep(urn=u, type=by_urn[u].type, name=by_urn[u].name, minutes=durations[u].minutes,
                 starts_at=schedule.start[u], source=durations[u].source)
        for u in reversed(schedule.chain_to(last)) if durations[u].minutes > 0
    ]
    return CriticalPath(
        steps=steps,
        minutes=schedule.done[last],
        sequential_minutes=sum(d.minutes for d in durations.values()),
        finished_at=schedule.done,
    )
