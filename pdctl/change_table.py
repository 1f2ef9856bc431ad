"""What the common day-two changes do to a running stack: the table docs/CHANGES.md shows (`make docs`).

Each row is one change a platform team makes, planned offline as the update check plans it: the dev
stack before and after (or a release's stack and this checkout), diffed by `pdctl.plan_diff`. A row
says what the update replaces (and deletes, or may replace: the provider decides at `pulumi preview`),
which node groups roll or are replaced with their extra nodes and quota, and the minutes it waits
for, in sequence: a node group's rollout until it serves again (`pdctl.node_rollout`), the RayService's
engines restarting on their nodes (the plan's cold start), and each replaced or updated cloud resource
as long as creating it takes (facts/durations.py). A change that replaced the network or the cluster
would have to say why (`CommonChange.why_network`); tests/pdctl/test_change_table.py refuses any other.
"""

from __future__ import annotations

import functools
import importlib
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from components.config.charts import ChartSettings
from components.findings import CHART_OF_SETTING
from facts.durations import create_duration
from facts.images import DLC_TAG, PUBLIC_DLC_REPOSITORY
from pdctl.node_rollout import REPLACE, REPLACE_WITH_GAP, ROLL
from pdctl.plan_diff import PlanDiff, ResourceChange, diff_plans
from pdctl.update_traffic import ServingImpact, Surge
from serve_app.errors import ConfigError

STACK = "dev"
# The stacks whose serving each row shows: dev updates in place, prod blue/green.
SERVING_STACKS = ("dev", "prod")
RAY_SERVICE_TYPE = "kubernetes:ray.io/v1:RayService"
# What the network and the cluster are: a change that replaces one of them must say why.
NETWORK_AND_CLUSTER_TYPES = {
    "aws:ec2/vpc:Vpc": "the VPC",
    "aws:ec2/subnet:Subnet": "a subnet",
    "aws:ec2/natGateway:NatGateway": "the NAT gateway",
    "eks:index:Cluster": "the EKS cluster",
}
# The program's own ComponentResources: no cloud call of their own.
COMPONENT_TYPE_PREFIX = "eks-pd-llm:"
# The growth that makes the GPU group autoscaled (a Cluster Autoscaler installed, the group named).
AUTOSCALED = {"gpuNodeMaxCount": "4"}


@dataclass(frozen=True)
class CommonChange:
    """One change: `settings` over the dev stack as `base` leaves it (or, with `release`, this checkout
    over the stack that release deployed); `program_change` names a whole number in the program's own
    code that the head plan runs with one more; `why_network`, the reason it replaces the network or
    the cluster."""

    what: str
    settings: dict[str, str] = field(default_factory=dict)
    base: dict[str, str] = field(default_factory=dict)
    release: str | None = None
    program_change: str | None = None  # `module.ATTRIBUTE`
    why_network: str = ""
    # What prod sets too: the room its blue/green updates need beside a larger cluster.
    prod_settings: dict[str, str] = field(default_factory=dict)

    @property
    def how(self) -> str:
        prod = f" (prod also {_settings_text(self.prod_settings)})" if self.prod_settings else ""
        if self.release:
            settings = f" with {_settings_text(self.settings)}" if self.settings else ""
            return f"`pulumi up` of this checkout on a stack release {self.release} deployed{settings}{prod}"
        if self.program_change:
            return f"the program's `{self.program_change}` plus one"
        base = f" (from {_settings_text(self.base)})" if self.base else ""
        return _settings_text(self.settings) + base + prod


def _settings_text(settings: dict[str, str]) -> str:
    return ", ".join(f"`{key}: {value}`" for key, value in settings.items())


def _next_patch(version: str) -> str:
    head, _, patch = version.rpartition(".")
    return f"{head}.{int(patch) + 1}"


def _chart_changes() -> tuple[CommonChange, ...]:
    """Each chart's next patch release (whether it exists does not matter: the diff is the same); the
    Cluster Autoscaler's on a stack that has one."""
    changes = []
    for setting, chart in CHART_OF_SETTING.items():
        newer = _next_patch(chart.default_version)
        changes.append(CommonChange(f"{chart.name} chart {chart.default_version} → {newer}",
                                    {ChartSettings.key(setting): newer},
                                    AUTOSCALED if setting == "cluster_autoscaler" else {}))
    return tuple(changes)


COMMON_CHANGES: tuple[CommonChange, ...] = (
    CommonChange("GPU type the GPU zone offers too (g6.8xlarge → g6e.8xlarge)", {"gpuNodeType": "g6e.8xlarge"}),
    CommonChange("another model (Qwen/Qwen3.5-9B → Qwen/Qwen3-8B)", {"modelSource": "Qwen/Qwen3-8B"}),
    CommonChange("maxModelLen 4096 → 8192", {"maxModelLen": "8192"}),
    CommonChange('FP8 weights (quantization "" → fp8)', {"quantization": "fp8"}),
    CommonChange("decode replica bounds 1 → 1 to 2, with a third GPU node for it (fixed size)",
                 {"decodeMaxReplicas": "2", "gpuNodeCount": "3"}, prod_settings={"gpuNodeMaxCount": "5"}),
    CommonChange("GPU nodes may grow (2 → 2 to 4 nodes, decode 1 to 3 replicas)",
                 {**AUTOSCALED, "decodeMaxReplicas": "3"}, prod_settings={"gpuNodeMaxCount": "6"}),
    CommonChange("Kubernetes minor (1.34 → 1.35)", {"kubernetesVersion": "1.35"}, {"kubernetesVersion": "1.34"}),
    *_chart_changes(),
    CommonChange("the Ray image (the region's ECR copy of the Ray LLM image → its public ECR one)",
                 {"rayImage": f"{PUBLIC_DLC_REPOSITORY}:{DLC_TAG}"}),
    CommonChange("GPU node user data (one more 2 MiB huge page at boot)",
                 program_change="components.node_boot.EFA_HUGEPAGES_2MI"),
    CommonChange("GPU root volume 200 → 300 GiB", {"gpuDiskGiB": "300"}),
    CommonChange('the Ray image on a snapshot volume (gpuImageSnapshotId "" → a snapshot)',
                 {"gpuImageSnapshotId": "snap-0123456789abcdef0"}),
    CommonChange("GCS fault tolerance turned on", {"gcsFaultTolerance": "true"}),
    CommonChange("the previous release → now (2026-12-01)", release="2026-12-01"),
    CommonChange("the last release → now (2026-12-02)", release="2026-12-02"),
    # Its roles' inline policies (the mirror reader's, the Cluster Autoscaler's) give way to the bootstrap's
    # managed ones, attached: the deploy role writes no policy (docs/DELIVERY.md, the bootstrap first).
    CommonChange("a stack with an S3 model mirror and GPU nodes that may grow: the last release → now (2026-12-02)",
                 {"modelSource": "s3://acme-models/mirror/Qwen/Qwen3.5-9B", "rayImageCarriesRunaiStreamer": "true",
                  **AUTOSCALED, "decodeMaxReplicas": "3"}, release="2026-12-02",
                 prod_settings={"gpuNodeMaxCount": "6"}),
)


@dataclass(frozen=True)
class ChangeRow:
    change: CommonChange
    diff: PlanDiff
    minutes: float
    # Per stack of SERVING_STACKS: what the change does to traffic there, or why that stack refuses it.
    serving: dict[str, ServingImpact | str] = field(default_factory=dict)

    @property
    def replaced(self) -> list[ResourceChange]:
        """What the update replaces, deletes, or may replace (the provider decides at preview)."""
        return [r for r in self.diff.resources if r.action in ("replace", "delete", "update or replace")]

    @property
    def network_replaced(self) -> list[ResourceChange]:
        return [r for r in self.replaced if r.type in NETWORK_AND_CLUSTER_TYPES]


def _plan(settings: dict[str, str], program_change: str | None = None, deployed_from: dict | None = None,
          stack: str = STACK) -> dict:
    """The stack's plan with `settings`; with `deployed_from`, planned as an update of what that
    plan deployed (its subnets, zones and roles kept, as `pulumi preview` keeps them)."""
    from offline import deployed_stack_from_plan, run_offline
    from pdctl.plan import build_plan

    deployed = deployed_stack_from_plan(deployed_from) if deployed_from is not None else None
    with _program_changed(program_change):
        run = run_offline(stack, overrides=settings, deployed=deployed)
    return json.loads(json.dumps(build_plan(run, stack=stack).to_dict(), sort_keys=True, default=str))


@contextmanager
def _program_changed(program_change: str | None) -> Iterator[None]:
    if program_change is None:
        yield
        return
    module, attribute = program_change.rsplit(".", 1)
    with mock.patch(program_change, getattr(importlib.import_module(module), attribute) + 1):
        yield


def _minutes(diff: PlanDiff, head: dict) -> float:
    """What the update waits for, in sequence: rollouts, the engines' restart, each replaced or updated
    cloud resource's create time."""
    restart = ((head.get("cold_start") or {}).get("pod_restart") or {}).get("seconds") or 0.0
    total = 0.0
    for resource in diff.resources:
        if resource.rollout is not None:
            total += resource.rollout.minutes
        elif resource.type == RAY_SERVICE_TYPE and resource.action == "update":
            total += restart / 60
        elif resource.action != "delete":
            total += create_duration(resource.type, custom=not resource.type.startswith(COMPONENT_TYPE_PREFIX)).minutes
    return total


def _diff(change: CommonChange, stack: str, workdir: Path) -> tuple[PlanDiff, dict]:
    """The update `change` makes to `stack`, and the plan after it."""
    from pdctl.release_update import RELEASES, update_diff

    prod = change.prod_settings if stack == "prod" else {}
    if change.release is not None:
        [release] = [r for r in RELEASES if r.name == change.release]
        # The head plan for its cold-start figures, which what is deployed does not change.
        settings = {**change.settings, **prod}
        return update_diff(stack, release, workdir, settings), _plan(settings, stack=stack)
    base = _plan(change.base, stack=stack)
    head = _plan({**change.base, **change.settings, **prod}, change.program_change, deployed_from=base, stack=stack)
    return diff_plans(base, head), head


def _serving_on(change: CommonChange, stack: str, workdir: Path) -> ServingImpact | str:
    """What `change` does to `stack`'s traffic; a string: the refusal the preview gives it there."""
    try:
        diff, _ = _diff(change, stack, workdir)
    except ConfigError as refused:
        return f"refused: {refused.setting}"
    if not diff.changed:
        return f"already so on {stack}"
    assert diff.serving is not None
    return diff.serving


def change_row(change: CommonChange, workdir: Path) -> ChangeRow:
    diff, head = _diff(change, STACK, workdir)
    serving = {stack: diff.serving if stack == STACK and diff.serving else _serving_on(change, stack, workdir)
               for stack in SERVING_STACKS}
    return ChangeRow(change, diff, _minutes(diff, head), serving)


@functools.cache
def change_rows() -> tuple[ChangeRow, ...]:
    """Every common change, planned (about a minute and a half: two offline runs each)."""
    with tempfile.TemporaryDirectory(prefix="pdctl-changes-") as workdir:
        return tuple(change_row(change, Path(workdir)) for change in COMMON_CHANGES)


def _names(resources: list[ResourceChange]) -> str:
    parts = []
    for r in resources:
        verb = {"replace": "", "delete": "deletes ", "update or replace": "may replace "}[r.action]
        parts.append(f"{verb}`{r.name}`")
    return ", ".join(parts) or "nothing"


def _rolls(row: ChangeRow) -> str:
    parts = []
    for r in row.diff.rollouts:
        roll = r.rollout
        assert roll is not None
        quota = f", +{roll.extra_vcpus} vCPUs ({roll.peak_vcpus} at the peak)" if roll.extra_vcpus else ""
        verb = {ROLL: "rolls", REPLACE: "new group beside the old",
                REPLACE_WITH_GAP: "old group deleted first"}[roll.how]
        parts.append(f"`{r.name}` {verb}: {roll.nodes} × {roll.instance_type}, {roll.added_nodes} more{quota}")
    return "; ".join(parts) or "no node"


def serving_cell(serving: ServingImpact | str) -> str:
    """A stack's serving in one cell: how long nothing is served, what happens to the requests in flight,
    and the surge that keeps it serving."""
    if isinstance(serving, str):
        return serving
    if not serving.kinds:
        return "no effect"
    if serving.keeps_serving:
        return "0 s" + (f" ({Surge(**serving.surge).summary()})" if serving.surge else "")
    cut = "in flight cut" if any(text.startswith("cut") for text in serving.in_flight) else "in flight finish"
    return f"{serving.seconds / 60:.1f} min down, {cut} ({'; '.join(serving.limits)})"


def change_table(rows: tuple[ChangeRow, ...]) -> str:
    stacks = " | ".join(f"serving, {stack}" for stack in SERVING_STACKS)
    lines = [f"| change | how | replaces | nodes | minutes | {stacks} | network or cluster |",
             "|---|---|---|---|---|" + "---|" * len(SERVING_STACKS) + "---|"]
    for row in rows:
        network = row.change.why_network or ("kept" if not row.network_replaced else
                                             "REPLACED: " + _names(row.network_replaced))
        serving = " | ".join(serving_cell(row.serving[stack]) for stack in SERVING_STACKS)
        lines.append(f"| {row.change.what} | {row.change.how} | {_names(row.replaced)} | {_rolls(row)} | "
                     f"{row.minutes:.1f} | {serving} | {network} |")
    return "\n".join(lines)
