"""What the PD app is checked against: the GPU node groups it runs on (type, bounds, EFA), the
image's serving stack and the HTTP front, and the nodes each phase's worker group takes. Plain data;
the configuration layer (components/config/) fills it in from the stack's settings and EC2's answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from facts.instances import InstanceType
from serve_app.config import PHASES, HttpFront, PDAppConfig, Phase
from serve_app.stack_keys import StackField


@dataclass(frozen=True)
class NodeGroupSettings:
    """The settings that set one GPU node group's type and bounds (the configuration layer reads them
    and hands them here): named in refusals, not read here."""

    instance_type: StackField
    count: StackField
    max_count: StackField


@dataclass(frozen=True)
class RuntimeSettings:
    """The settings that say which Ray the image carries and what answers HTTP in front of the app
    (the configuration layer reads them and hands them here): named in refusals, not read here."""

    ray_version: StackField
    http_front: StackField


@dataclass(frozen=True)
class NodeGroupTarget:
    """One GPU node group: `node_count` nodes of `instance`, growing to `node_max_count` (None:
    fixed) under the node autoscaler; `efa`: whether its nodes carry EFA interfaces."""

    instance: InstanceType
    node_count: int
    efa: bool
    settings: NodeGroupSettings  # the settings naming its type and bounds
    node_max_count: int | None = None
    own_phase: Phase | None = None  # the phase whose own group this is; None: gpuNodeType's, shared

    @property
    def gpus_per_node(self) -> int:
        return self.instance.gpus

    @property
    def max_nodes(self) -> int:
        return self.node_max_count or self.node_count

    @property
    def most_nodes_setting(self) -> StackField:
        """The setting bounding the group at its most: its maximum where it autoscales, else its count."""
        return self.settings.max_count if self.node_max_count else self.settings.count


@dataclass(frozen=True)
class DeploymentTarget:
    """The GPU node group the app will run on: `gpu_node_count` nodes, growing to
    `gpu_node_max_count` (None: fixed) under the node autoscaler; a phase named in
    `phase_node_groups` runs on a group of its own instead (same AZ and placement group)."""

    gpu_instance: InstanceType
    gpu_node_count: int
    efa: bool
    gpu_node_settings: NodeGroupSettings  # the settings of gpuNodeType's group (the shared one)
    runtime_settings: RuntimeSettings  # the settings of ray_version and http_front
    accept_ucx_on_efa: bool = False
    # The serving stack inside the Ray image: Ray always known, vLLM when the image is one
    # this project has facts for. None = not checked (tests of other checks).
    ray_version: str | None = None
    vllm_version: str | None = None
    # What answers HTTP in front of the app: Serve's proxy actor or HAProxy.
    http_front: HttpFront = "serve-proxy"
    gpu_node_max_count: int | None = None
    phase_node_groups: Mapping[str, NodeGroupTarget] = field(default_factory=dict)

    @property
    def shared_node_group(self) -> NodeGroupTarget:
        return NodeGroupTarget(self.gpu_instance, self.gpu_node_count, self.efa, self.gpu_node_settings,
                               self.gpu_node_max_count)

    def node_group(self, phase: Phase) -> NodeGroupTarget:
        """The node group `phase`'s worker pods run on."""
        return self.phase_node_groups.get(phase) or self.shared_node_group

    def node_groups(self) -> tuple[tuple[NodeGroupTarget, tuple[Phase, ...]], ...]:
        """Each node group with the phases it holds: the shared one (unless no phase is left on it),
        then each phase's own."""
        shared = tuple(phase for phase in PHASES if phase not in self.phase_node_groups)
        own = tuple((self.phase_node_groups[phase], (phase,)) for phase in PHASES if phase in self.phase_node_groups)
        return ((self.shared_node_group, shared), *own) if shared else own


@dataclass(frozen=True)
class PhaseNodes:
    """The GPU nodes one phase's worker group takes at its fewest and most replicas. Each phase has
    its own worker group whose pods own a whole node, so a node never mixes the two phases."""

    replicas_per_node: int
    min_nodes: int
    max_nodes: int


def phase_nodes(app: PDAppConfig, phase: Phase, gpus_per_node: int) -> PhaseNodes:
    """Nodes for `phase` at min and max replicas: as many replicas share a node as its GPUs hold."""
    per_node = gpus_per_node // app.engine_for(phase).gpus_per_replica
    replicas = app.phase(phase).replicas
    return PhaseNodes(per_node, -(-replicas.min_replicas // per_node), -(-replicas.most // per_node))
