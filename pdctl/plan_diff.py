"""What a change does to a stack: the difference between two `pdctl plan --output json` documents.

`diff_plans(base, head)` compares the plan of the base branch with the plan of the change, resource
by resource, keyed as Pulumi keys them (the URN: the types of the parent chain, the type and the name;
so a rename, a new parent or a new type is a delete and a create, as it is to Pulumi without an alias):
created, deleted, replaced or updated, with every changed input (secrets stay masked, as the plans hold
them), then the changes in protections, capacity per replica, hourly cost, deploy critical path and
stack outputs. `render_diff` prints it as plain lines for a terminal or a pull-request comment.

Replace or update is decided from what the plans carry: the `replaceOnChanges` options the program
set (the harness records them) and the inputs known to force a replacement (`facts.replacements`).
Anything else is said to be unknown offline rather than guessed. A replacement, a delete or a
possible replacement ("update or replace") of a resource that holds state
(`facts.replacements.stateful_loss`: the VPC, the cluster, node groups, KMS keys, the GCS store,
Prometheus's release) comes first, with what it loses, above everything else; then every node group
whose nodes the update replaces (`pdctl.node_rollout`: a new launch template version rolls them),
with the extra nodes, their vCPU quota and the minutes until it serves again.

Input paths: `a.b[0].c`; a key with a dot, slash or space is quoted (`labels["kubernetes.io/os"]`);
a string holding a YAML or JSON document (a RayService's serveConfigV2, an IAM policy) is compared
inside, its path after a colon (`spec.serveConfigV2:applications[0].route_prefix`).
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml

from facts.replacements import NODE_GROUP_TYPES, NODE_ROLLING_PATHS, replace_triggers, stateful_loss
from pdctl.money import usd
from pdctl.node_rollout import REPLACE, REPLACE_WITH_GAP, ROLL, NodeRollout, node_rollout
from pdctl.update_traffic import ServingImpact, serving_impact, serving_lines

# `pdctl plan --diff` exit status when the plans differ (0: they do not; 1: pdctl failed; 2: bad input).
EXIT_CHANGED = 3

ABSENT = "(absent)"
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
VALUE_WIDTH = 200  # longer values are cut in the text (the JSON diff has them whole)
TEXT_WIDTH = 100  # the text wraps here: a pull-request comment or a terminal of 100 columns

# Caveats of every offline diff, printed with it.
OFFLINE_LIMITS = (
    "The plans compare two programs, not a program with what is deployed: drift and the stack's "
    "state show only in `pulumi preview`.",
    "Ids, ARNs and AZ names are the offline mock cloud's stand-ins: a change of one means a "
    "different resource is referenced, not the value AWS will give.",
    "Secret inputs are masked in both plans: a changed secret does not show here.",
)


def input_path(parent: str, key: str) -> str:
    if not _PLAIN_KEY.match(key):
        return f"{parent}[{json.dumps(key)}]"
    return f"{parent}{key}" if not parent or parent.endswith(":") else f"{parent}.{key}"


def embedded_document(text: str) -> Any:
    """The mapping or list a multi-line YAML or a JSON string holds, else None."""
    if "\n" not in text and not text.lstrip().startswith(("{", "[")):
        return None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return document if isinstance(document, (dict, list)) and document else None


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """{path: leaf value}; empty containers are leaves, documents inside strings are opened."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key in sorted(value, key=str):
            out.update(flatten(value[key], input_path(path, str(key))))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{path}[{index}]"))
        return out
    if isinstance(value, str):
        document = embedded_document(value)
        if document is not None:
            return flatten(document, f"{path}:")
    return {path: value}


def _under(path: str, prefix: str) -> bool:
    return prefix == "*" or path == prefix or path.startswith((f"{prefix}.", f"{prefix}[", f"{prefix}:"))


@dataclass(frozen=True)
class Change:
    path: str
    before: Any
    after: Any
    replaces: str | None = None  # why this change replaces its resource


def changes_between(before: Any, after: Any) -> list[Change]:
    old, new = flatten(before), flatten(after)
    return [Change(path, old.get(path, ABSENT), new.get(path, ABSENT))
            for path in sorted(set(old) | set(new)) if old.get(path, ABSENT) != new.get(path, ABSENT)]


@dataclass(frozen=True)
class ResourceChange:
    type: str
    name: str
    action: str  # create | delete | replace | update | update or replace
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # A replacement, delete or possible replacement of a resource that holds state: what goes with it.
    loses: str | None = None
    urn: str = ""  # Pulumi's key of the resource: `<parent types>$<type>::<name>` (no stack or project)
    rollout: NodeRollout | None = None  # a node group whose nodes the update replaces

    @property
    def replaced_because(self) -> list[str]:
        return sorted({c.replaces for c in self.changes if c.replaces})

    @property
    def loss_verb(self) -> str:
        return {"replace": "REPLACES", "delete": "DELETES"}.get(self.action, "MAY REPLACE")


LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate"
ACTION_ORDER = ("replace", "delete", "update or replace", "update", "create")
ACTION_SIGN = {"create": "+", "delete": "-", "replace": "-/+", "update": "~", "update or replace": "~?"}


def _keyed_nodes(tree: list[dict], parent_types: str = "") -> Iterator[tuple[str, dict]]:
    """(URN key, node) of every node: Pulumi's URN carries its parents' types, not their names, and
    resources whose parent is the root stack carry none."""
    for node in tree:
        qualified = f"{parent_types}${node['type']}" if parent_types else node["type"]
        yield f"{qualified}::{node['name']}", node
        yield from _keyed_nodes(node.get("children") or [], "" if node["type"] == ROOT_STACK_TYPE else qualified)


def _resources(plan: dict) -> dict[str, dict]:
    return dict(_keyed_nodes(plan.get("tree") or []))


def _sort_key(key: str) -> tuple[str, str]:
    qualified, name = key.rsplit("::", 1)
    return name, qualified


def _identity_notes(deleted: dict[str, dict], created: dict[str, dict]) -> dict[str, list[str]]:
    """What a delete is to a reader when the change creates its like under another key: renamed, moved
    under another parent, or given another type (Pulumi deletes and creates unless an alias ties them)."""
    notes: dict[str, list[str]] = {}
    for old_key, old in deleted.items():
        for new_key, new in created.items():
            same_type, same_name = old["type"] == new["type"], old["name"] == new["name"]
            if same_type and same_name:
                what = "moved under another parent"
            elif same_name:
                what = f"given another type ({new['type']})"
            elif same_type and old_key.rsplit("::", 1)[0] == new_key.rsplit("::", 1)[0]:
                what = f"renamed to {new['name']}"
            else:
                continue
            notes.setdefault(old_key, []).append(
                f"{what}: its URN changes, so Pulumi deletes it and creates {new_key} unless the program gives "
                "the new one an alias of this one")
    return notes


@dataclass(frozen=True)
class _Context:
    compare: str  # "inputs", or "settings" for a base plan from an older pdctl
    head: dict  # the head plan (its cold-start figures time a node rollout)
    base_kubernetes_version: str | None = None  # the base plan's cluster version


def _kubernetes_version(resources: dict[str, dict]) -> str | None:
    return next(((node.get("inputs") or {}).get("version") for node in resources.values()
                 if node["type"] == "eks:index:Cluster"), None)


def _settled(rtype: str, changes: list[Change], context: _Context) -> list[Change]:
    """`changes` less a node group's `version` newly set to what EKS already reports: a group created
    without one runs the cluster's version at its creation, so naming that version changes nothing."""
    if rtype not in NODE_GROUP_TYPES or context.base_kubernetes_version is None:
        return changes
    return [c for c in changes if not (c.path == "version" and c.before == ABSENT
                                       and c.after == context.base_kubernetes_version)]


def _rollout(rtype: str, action: str, changes: list[Change], after: dict, context: _Context) -> NodeRollout | None:
    if rtype not in NODE_GROUP_TYPES or context.compare != "inputs":
        return None
    inputs = after.get("inputs") or {}
    if action == "replace":
        gap = (after.get("options") or {}).get("delete_before_replace")
        return node_rollout(inputs, context.head, REPLACE_WITH_GAP if gap else REPLACE)
    if action == "update" and any(_under(c.path, p) for c in changes for p in NODE_ROLLING_PATHS):
        return node_rollout(inputs, context.head, ROLL)
    return None


def _resource_change(before: dict, after: dict, context: _Context, urn: str) -> ResourceChange | None:
    compare = context.compare
    rtype, name = after["type"], after["name"]
    options_before, options_after = before.get("options") or {}, after.get("options") or {}
    changes = _settled(rtype, changes_between(before.get(compare) or {}, after.get(compare) or {}), context)
    option_changes = [Change(f"(options).{c.path}", c.before, c.after)
                      for c in changes_between(options_before, options_after)] if options_before else []
    if not changes and not option_changes:
        return None
    triggers = replace_triggers(rtype)
    program_triggers = list(options_after.get("replace_on_changes") or [])
    judged = []
    for change in changes:
        why = next((f"{p} is in the program's replaceOnChanges"
                    for p in program_triggers if _under(change.path, p)), None)
        if why is None and triggers is not None and compare == "inputs":
            why = next((f"{p} forces a new resource ({triggers.source})"
                        for p in triggers.paths if _under(change.path, p)), None)
        judged.append(Change(change.path, change.before, change.after, why))
    notes = []
    loses = None
    known_in_place = triggers is not None and compare == "inputs" and all(
        any(_under(c.path, p) for p in triggers.in_place) for c in changes)
    if any(c.replaces for c in judged):
        action = "replace"
        loses = stateful_loss(rtype, after.get(compare))
        if options_before.get("protect"):
            notes.append("protected: `pulumi up` refuses to replace it until `protect` is turned off")
        if options_after.get("delete_before_replace"):
            notes.append("deleteBeforeReplace: the old one is deleted before the new one exists (a gap)")
    elif not changes or known_in_place or (triggers is not None and triggers.complete and compare == "inputs"):
        action = "update"
    else:
        action = "update or replace"
        loses = stateful_loss(rtype, after.get(compare)) if compare == "inputs" else None
        notes.append("whether the provider updates this in place or replaces it is not known offline "
                     "(`pulumi preview` decides)")
    if rtype == LAUNCH_TEMPLATE_TYPE and action == "update" and changes:
        notes.append("a new version of the template: a node group that uses its latest version rolls every node")
    rollout = _rollout(rtype, action, judged, after, context)
    return ResourceChange(rtype, name, action, judged + option_changes, notes, loses, urn, rollout)


@dataclass(frozen=True)
class Delta:
    what: str
    before: Any
    after: Any

    @property
    def difference(self) -> float | None:
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (self.before, self.after))
        return self.after - self.before if numbers else None


def _deltas(before: Any, after: Any, prefix: str) -> list[Delta]:
    return [Delta(f"{prefix}{c.path}", c.before, c.after) for c in changes_between(before, after)]


@dataclass(frozen=True)
class PlanDiff:
    base_stack: str | None
    head_stack: str | None
    resources: list[ResourceChange]
    unchanged: int
    protections: list[Delta]
    capacity: list[Delta]
    cost: list[Delta]
    critical_path: list[Delta]
    outputs: list[Delta]
    other: list[Delta]
    notes: list[str]
    slo: list[Delta] = field(default_factory=list)
    serving: ServingImpact | None = None  # what the update does to traffic (None: the head plan has no stack)

    @property
    def changed(self) -> bool:
        return any((self.resources, self.protections, self.capacity, self.cost, self.critical_path,
                    self.outputs, self.other, self.slo))

    @property
    def stateful_losses(self) -> list[ResourceChange]:
        """The replacements, deletes and possible replacements that lose state (data, nodes, the cluster)."""
        return [r for r in self.resources if r.loses]

    @property
    def rollouts(self) -> list[ResourceChange]:
        """The node groups whose nodes the update replaces (a roll or a new group)."""
        return [r for r in self.resources if r.rollout]

    def counts(self) -> dict[str, int]:
        return {action: sum(1 for r in self.resources if r.action == action) for action in ACTION_ORDER}

    def to_dict(self) -> dict:
        def delta(d: Delta) -> dict:
            return {"what": d.what, "before": d.before, "after": d.after, "difference": d.difference}

        return {
            "base_stack": self.base_stack, "head_stack": self.head_stack, "changed": self.changed,
            "counts": {**self.counts(), "unchanged": self.unchanged},
            "resources": [asdict(r) for r in self.resources],
            "protections": [delta(d) for d in self.protections],
            "capacity": [delta(d) for d in self.capacity],
            "cost": [delta(d) for d in self.cost],
            "critical_path": [delta(d) for d in self.critical_path],
            "slo": [delta(d) for d in self.slo],
            "serving": self.serving.to_dict() if self.serving else None,
            "outputs": [delta(d) for d in self.outputs],
            "other": [delta(d) for d in self.other],
            "notes": self.notes,
        }


# Plan keys compared section by section above; any other top-level key that differs is `other`.
_SECTIONS = {"stack", "resources", "tree", "protections", "capacity", "cost", "critical_path", "outputs",
             "offline_outputs", "slo", "updates"}
# What a reviewer weighs in the SLO section, per phase: what the workload needs and whether the stack has it.
_SLO_PHASE_FIELDS = ("gpu", "instance_type", "target_seconds", "needed_replicas", "needed_nodes",
                     "needed_cost_per_hour", "configured_max_replicas", "predicted_at_max_seconds",
                     "floor_datasheet_seconds", "meets_at_max")


def _cost_view(cost: dict) -> dict:
    return {"per_hour": cost.get("per_hour"), "per_month": cost.get("per_month"),
            "complete": cost.get("complete"), "region": cost.get("region"),
            "lines": {line["item"]: line.get("per_hour") for line in cost.get("lines") or []}}


def _path_view(path: dict) -> dict:
    return {"minutes": path.get("minutes"), "sequential_minutes": path.get("sequential_minutes"),
            "steps": [f"{s['name']} ({s['type']})" for s in path.get("steps") or []]}


def _slo_view(slo: dict | None) -> dict:
    if not slo:
        return {}
    return {"workload": slo.get("workload"), "targets": slo.get("targets"),
            **{phase: {k: row.get(k) for k in _SLO_PHASE_FIELDS} for phase, row in (slo.get("phases") or {}).items()}}


def diff_plans(base: dict, head: dict) -> PlanDiff:
    """What changes from `base` (the plan of the base branch) to `head` (the plan of the change)."""
    old, new = _resources(base), _resources(head)
    base_has_inputs = all("inputs" in n for n in old.values())
    compare = "inputs" if base_has_inputs else "settings"
    notes = list(OFFLINE_LIMITS)
    if not base_has_inputs:
        notes.insert(0, "The base plan has no inputs (made by an older pdctl): only the key settings are "
                        "compared, and replacements are not judged.")
    created, deleted = sorted(set(new) - set(old), key=_sort_key), sorted(set(old) - set(new), key=_sort_key)
    resources = [ResourceChange(new[key]["type"], new[key]["name"], "create", urn=key) for key in created]
    identity = _identity_notes({key: old[key] for key in deleted}, {key: new[key] for key in created})
    for key in deleted:
        gone = old[key]
        protected = (gone.get("options") or {}).get("protect")
        notes_for = identity.get(key, []) + (
            ["protected: `pulumi up` refuses to delete it until `protect` is turned off"] if protected else [])
        loses = stateful_loss(gone["type"], gone.get(compare)) if compare == "inputs" else None
        resources.append(ResourceChange(gone["type"], gone["name"], "delete", notes=notes_for, loses=loses, urn=key))
    unchanged = 0
    context = _Context(compare, head, _kubernetes_version(old) if compare == "inputs" else None)
    for key in sorted(set(old) & set(new), key=_sort_key):
        change = _resource_change(old[key], new[key], context, key)
        if change is None:
            unchanged += 1
        else:
            resources.append(change)
    # A lost cluster or node group must be the first thing a reviewer reads.
    resources.sort(key=lambda r: (r.loses is None, ACTION_ORDER.index(r.action), r.name, r.type))
    if any(r.action == "update or replace" for r in resources):
        notes.append("Replace-triggering inputs are known for: node groups, launch templates, subnets, the VPC, "
                     "KMS keys, the GCS store (ElastiCache), the EKS cluster's name and role, and Kubernetes "
                     "objects' names (facts/replacements.py).")
    other_keys = sorted((set(base) | set(head)) - _SECTIONS)
    return PlanDiff(
        base_stack=base.get("stack"), head_stack=head.get("stack"),
        resources=resources, unchanged=unchanged,
        protections=_deltas(base.get("protections") or {}, head.get("protections") or {}, "")
        if "protections" in base else [],
        capacity=_deltas((base.get("capacity") or {}).get("per_phase") or {},
                         (head.get("capacity") or {}).get("per_phase") or {}, ""),
        cost=_deltas(_cost_view(base.get("cost") or {}), _cost_view(head.get("cost") or {}), ""),
        critical_path=_deltas(_path_view(base.get("critical_path") or {}),
                              _path_view(head.get("critical_path") or {}), ""),
        outputs=_deltas(base.get("outputs") or {}, head.get("outputs") or {}, ""),
        other=[d for key in other_keys for d in _deltas({key: base.get(key)}, {key: head.get(key)}, "")],
        notes=notes,
        slo=_deltas(_slo_view(base.get("slo")), _slo_view(head.get("slo")), ""),
        serving=serving_impact(resources, head),
    )


# ------------------------------------------------------------------------------------ text

def show(value: Any) -> str:
    text = value if value == ABSENT else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= VALUE_WIDTH else f"{text[:VALUE_WIDTH]}… ({len(text)} chars)"


def _money(delta: Delta) -> str:
    assert delta.difference is not None
    change = usd(delta.difference, sign=True)
    if isinstance(delta.before, (int, float)) and delta.before:
        change += f", {delta.difference / delta.before:+.1%}"
    return f"{usd(delta.before)} → {usd(delta.after)} ({change})"


def _number(delta: Delta, unit: str = "", digits: int = 2) -> str:
    if delta.difference is None:
        return f"{show(delta.before)} → {show(delta.after)}"
    change = f"{delta.difference:+,.{digits}f}{unit}"
    if isinstance(delta.before, (int, float)) and delta.before:
        change += f", {delta.difference / delta.before:+.1%}"
    return f"{delta.before:,.{digits}f}{unit} → {delta.after:,.{digits}f}{unit} ({change})"


_LIST_INDEX = re.compile(r"\[\d+\]")


def _list_root(path: str) -> str | None:
    """The path of the list a change sits in (`networkInterfaces` for `networkInterfaces[3].deviceIndex`)."""
    found = _LIST_INDEX.search(path)
    return path[:found.start()] if found else None


def change_lines(changes: list[Change]) -> list[str]:
    """One line per change, except that changes inside several items of one list (a p5's 32 network
    interfaces) collapse to one line with a count: `networkInterfaces[N]: 96 changes in 32 items (…)`."""
    by_list: dict[str, list[Change]] = {}
    for change in changes:
        root = _list_root(change.path)
        if root is not None:
            by_list.setdefault(root, []).append(change)
    collapsed = {root: group for root, group in by_list.items()
                 if len({_LIST_INDEX.findall(c.path)[0] for c in group}) > 1}
    lines = []
    shown: set[str] = set()
    for change in changes:
        root = _list_root(change.path)
        if root is None or root not in collapsed:
            mark = "  (forces replacement)" if change.replaces else ""
            lines.append(f"{change.path}: {show(change.before)} → {show(change.after)}{mark}")
            continue
        if root in shown:
            continue
        shown.add(root)
        group = collapsed[root]
        items = {_LIST_INDEX.findall(c.path)[0] for c in group}
        fields = sorted({_LIST_INDEX.sub("[N]", c.path, count=1)[len(root) + 3:].lstrip(".") or "(item)"
                         for c in group})
        named = ", ".join(fields[:4]) + (f", … {len(fields) - 4} more" if len(fields) > 4 else "")
        mark = "  (forces replacement)" if any(c.replaces for c in group) else ""
        lines.append(f"{root}[N]: {len(group)} changes in {len(items)} items ({named}){mark}")
    return lines


def render_diff(diff: PlanDiff) -> str:
    """The diff as plain text lines (no colour, no wrapping): what a pull-request comment shows."""
    lines = [f"plan diff: stack {diff.base_stack} (base) → {diff.head_stack} (this change)"]
    if not diff.changed:
        lines.append("no change: the two plans are the same")
    else:
        counts = diff.counts()
        summary = ", ".join(f"{counts[a]} to {a}" for a in ACTION_ORDER if counts[a])
        lines.append(f"CHANGED: {summary or 'no resource changes'} ({diff.unchanged} resources unchanged)")
    for resource in diff.stateful_losses:
        lines.append(f"{resource.loss_verb} A STATEFUL RESOURCE: {resource.name} ({resource.type}) "
                     f"loses {resource.loses}")
    for resource in diff.rollouts:
        assert resource.rollout is not None
        lines.append(f"NODES: {resource.name} {resource.rollout.summary()}")
    if diff.serving is not None and diff.serving.kinds:
        lines += serving_lines(diff.serving)
    for resource in diff.resources:
        lines.append("")
        lines.append(f"{ACTION_SIGN[resource.action]:<3} {resource.action}: {resource.name} ({resource.type})")
        lines.extend(f"      replaced because {why}" for why in resource.replaced_because)
        if resource.rollout:
            lines.append(f"      {resource.rollout.summary()}")
        lines.extend(f"      {line}" for line in change_lines(resource.changes))
        lines.extend(f"      note: {note}" for note in resource.notes)
    sections = (("protections", diff.protections, None), ("capacity per replica", diff.capacity, None),
                ("hourly cost estimate (USD)", diff.cost, "cost"),
                ("deploy critical path", diff.critical_path, "path"),
                ("sized for the SLO (per phase: what the workload needs at peak)", diff.slo, None),
                ("stack outputs", diff.outputs, None), ("other", diff.other, None))
    for title, deltas, kind in sections:
        if not deltas:
            continue
        lines += ["", f"{title}:"]
        for delta in deltas:
            if kind == "cost" and delta.difference is not None:
                lines.append(f"  {delta.what}: {_money(delta)}")
            elif kind == "path" and delta.difference is not None:
                lines.append(f"  {delta.what}: {_number(delta, ' min', 1)}")
            elif delta.difference is not None:
                whole = all(float(v).is_integer() for v in (delta.before, delta.after))
                lines.append(f"  {delta.what}: {_number(delta, digits=0 if whole else 3)}")
            else:
                lines.append(f"  {delta.what}: {show(delta.before)} → {show(delta.after)}")
    lines += ["", "not known offline:"] + [f"  - {note}" for note in diff.notes]
    return "\n".join(lines) + "\n"


def fit(lines: list[str], width: int = TEXT_WIDTH) -> list[str]:
    """`lines` wrapped at `width` columns, a wrapped line's rest indented under its start."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                             drop_whitespace=True)
    return out


def summary_lines(diff: PlanDiff) -> list[str]:
    """One line per resource the update touches: what happens to it, its name and type."""
    return [f"  {ACTION_SIGN[r.action]:<3} {r.action}: {r.name} ({r.type})" for r in diff.resources]
