"""What an update does to the running nodes of a managed node group, read from two plan documents.

Two ways a change reaches the nodes without EKS deleting the group first:

- a roll: a new launch template version, AMI release or Kubernetes version is updated in place, and
  EKS launches new nodes beside the old ones (up to two per AZ beyond the group, or maxUnavailable if
  larger), drains the old ones and scales back (docs/SOURCES.md#managed-node-update-behavior);
- a replacement: Pulumi creates the new group before it deletes the old one, so a whole second group
  runs for a while (unless the program asked for the old one to go first: a gap instead).

Either way every pod on the group restarts on a new node, so a GPU group is back in service after a
new node's cold start, which the plan already computes (`cold_start.new_node`); other groups after
a node's join (facts/durations.py). The extra nodes need On-Demand vCPU quota while they run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.scheduling import GPU_ROLE, ROLE_LABEL
from facts.durations import NODE_LAUNCH_TO_READY
from facts.instances import RECORDED_EC2_ANSWERS
from facts.replacements import node_roll_surge

ROLL = "rolls every node"
REPLACE = "replaces the group, the new one beside the old"
REPLACE_WITH_GAP = "replaces the group, the old one deleted first"


@dataclass(frozen=True)
class NodeRollout:
    how: str  # ROLL, REPLACE or REPLACE_WITH_GAP
    nodes: int  # the group's desired size
    most: int  # its maximum (the Cluster Autoscaler may have grown it that far)
    instance_type: str
    added_nodes: int  # beyond the group while the update runs
    vcpus_per_node: int | None  # None: the type is not among the recorded EC2 answers
    minutes: float  # until every node of the group serves again
    minutes_why: str
    gpu: bool = False  # a GPU group (role=gpu-worker)

    @property
    def title(self) -> str:
        return self.how.replace("every node", "every GPU node") if self.gpu else self.how

    @property
    def extra_vcpus(self) -> int | None:
        return None if self.vcpus_per_node is None else self.added_nodes * self.vcpus_per_node

    @property
    def peak_vcpus(self) -> int | None:
        """vCPUs of this group while the update runs, the group at its maximum."""
        return None if self.vcpus_per_node is None else (self.most + self.added_nodes) * self.vcpus_per_node

    def summary(self) -> str:
        size = f"{self.nodes} × {self.instance_type}" + (f" (up to {self.most})" if self.most > self.nodes else "")
        if self.added_nodes and self.extra_vcpus is not None:
            extra = (f"up to {self.added_nodes} more node(s) while it runs: +{self.extra_vcpus} vCPUs of On-Demand "
                     f"quota, {self.peak_vcpus} at the peak")
        elif self.added_nodes:
            extra = f"up to {self.added_nodes} more node(s) while it runs ({self.instance_type}'s vCPUs not recorded)"
        else:
            extra = "no node beside it: nothing serves from this group in between"
        return f"{self.title}: {size}; {extra}; about {self.minutes:.1f} min until it serves again ({self.minutes_why})"


def _new_node_minutes(plan: dict, gpu: bool) -> tuple[float, str]:
    new_node = ((plan.get("cold_start") or {}).get("new_node") or {}) if gpu else {}
    if new_node.get("seconds"):
        return new_node["seconds"] / 60, f"a new GPU node's cold start, {new_node['seconds'] / 60:.1f} min"
    ready = NODE_LAUNCH_TO_READY.seconds / 60  # a general-purpose node's launch to Ready
    return ready, f"a node's join, {ready:.1f} min ({NODE_LAUNCH_TO_READY.source})"


def node_rollout(inputs: dict, plan: dict, how: str) -> NodeRollout:
    """The rollout of a node group with `inputs` (the head plan's) under the head `plan`."""
    scaling = inputs.get("scalingConfig") or {}
    nodes = int(scaling.get("desiredSize") or 0)
    most = max(nodes, int(scaling.get("maxSize") or 0))
    instance_type = (inputs.get("instanceTypes") or ["(unknown)"])[0]
    answer = RECORDED_EC2_ANSWERS.get(instance_type)
    gpu = (inputs.get("labels") or {}).get(ROLE_LABEL) == GPU_ROLE
    each, why = _new_node_minutes(plan, gpu)
    if how == ROLL:
        max_unavailable = int((inputs.get("updateConfig") or {}).get("maxUnavailable") or 1)
        added = node_roll_surge(len(inputs.get("subnetIds") or [None]), max_unavailable)
        rounds = max(1, math.ceil(nodes / added))
        minutes, why = rounds * each, why if rounds == 1 else f"{rounds} rounds of {why}"
    else:
        added = nodes if how == REPLACE else 0
        minutes = each
    return NodeRollout(how, nodes, most, instance_type, added, answer.vcpus if answer else None, minutes, why, gpu)
