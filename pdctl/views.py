"""How pdctl's data looks in a terminal (rich). No logic: the numbers come from plan/kube/metrics."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table
from rich.tree import Tree

from facts import prices as price_data
from pdctl.money import usd
from pdctl.update_traffic import Surge
from serve_app.slo_sizing import MAX_REPLICAS

# Where a value came from the offline mock cloud, not from the stack (a stand-in for AWS's answer).
OFFLINE_MARK = "(offline)"
# Section rules stop here: an unwrapped plan (piped, or a huge --width) would draw them across it.
RULE_WIDTH = 100


def _value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _rule(console: Console, title: str) -> None:
    console.print(Rule(title), width=min(console.width, RULE_WIDTH))


def _setting(key: str, value: Any, offline: dict[str, str]) -> str:
    mark = f" [yellow]{OFFLINE_MARK}[/]" if key in offline else ""
    return f"[cyan]{escape(key)}[/]={escape(_value(value))}{mark}"


def _access_entries(value: dict) -> str:
    return "  ".join(
        f"{escape(entry.get('principalArn', name))} → " + ", ".join(
            f"{escape(str(policy.get('policyArn', '')).rsplit('/', 1)[-1])} "
            f"({escape(str((policy.get('accessScope') or {}).get('type')))} scope)"
            for _, policy in sorted((entry.get("accessPolicies") or {}).items()))
        for name, entry in sorted(value.items()))


def _tree_label(node) -> str:
    label = f"[bold]{escape(node.name)}[/] [dim]{escape(node.type)}[/]"
    if node.options.protect:
        label += " [bold red]\\[protected][/]"
    offline = node.offline or {}
    simple = {k: v for k, v in node.settings.items()
              if (not isinstance(v, dict) or k.startswith("app")) and k != "access entries"}
    if simple:
        label += "  " + "  ".join(_setting(k, v, offline) for k, v in simple.items())
    return label


def _add(branch: Tree, node) -> None:
    child = branch.add(_tree_label(node), highlight=False)
    for key, value in node.settings.items():
        if key == "access entries":
            child.add(f"[magenta]{key}[/]: {_access_entries(value)}", highlight=False)
        elif isinstance(value, dict) and not key.startswith("app"):
            child.add(f"[magenta]{key}[/]: " + "  ".join(
                f"{escape(str(k))}={escape(_value(v))}" for k, v in value.items() if v is not None), highlight=False)
    for grandchild in node.children:
        _add(child, grandchild)


def _render_protections(console: Console, protections: dict) -> None:
    _rule(console, "[bold]protections[/]")
    protected = protections["protected"]
    console.print("Pulumi protect (`pulumi destroy` and replacements refuse until it is turned off): "
                  + (", ".join(f"{p['name']} ({p['type']})" for p in protected) if protected else "none"),
                  highlight=False, markup=False)
    for cluster in protections["eks_clusters"]:
        public = ("off" if not cluster["endpoint_public_access"] else
                  "from " + ", ".join(cluster["public_access_cidrs"]) if cluster["public_access_cidrs"]
                  else "from anywhere (no CIDR list)")
        console.print(
            f"EKS {cluster['name']}: deletion protection {'ON' if cluster['deletion_protection'] else 'OFF'}; "
            f"API endpoint private {'on' if cluster['endpoint_private_access'] else 'off'}, public {public}; "
            f"authentication {cluster['authentication_mode'] or 'default'}", highlight=False, markup=False)
        entries = cluster["access_entries"]
        if not entries:
            console.print("  access entries: none in the stack", highlight=False, markup=False)
        for entry in entries:
            policies = ", ".join(
                f"{p['policy_arn'].rsplit('/', 1)[-1]} ({p['scope']} scope"
                + (f": {', '.join(p['namespaces'])}" if p["namespaces"] else "") + ")" for p in entry["policies"])
            console.print(f"  access entry {entry['principal_arn']} → {policies or 'no access policy'}",
                          highlight=False, markup=False)


class Footnotes:
    """Long source citations out of a table's cells: a cell gets `[n]`, the text follows the table, each
    distinct source once."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def cite(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def render(self, console: Console) -> None:
        for number, text in enumerate(self.texts, 1):
            console.print(f"[dim]\\[{number}] {escape(text)}[/]", highlight=False)


def _per_hour(cost: dict[str, float | None]) -> str:
    amounts = (cost["min"], cost["max"])
    return " → ".join("n/a (unpriced lines)" if amount is None else usd(amount) for amount in amounts)


def render_plan(console: Console, plan) -> None:
    _render_resources(console, plan)
    _render_protections(console, plan.protections)
    _render_capacity(console, plan)
    _render_notes(console, plan)
    _render_scaling(console, plan)
    _render_slo(console, plan.slo)
    _render_cost(console, plan.cost)
    _render_critical_path(console, plan)
    if plan.cold_start is not None:
        _render_cold_start(console, plan.cold_start)
    _render_head_restart(console, plan)
    _render_updates(console, plan.updates)
    _render_front_door(console, plan.front_door)
    _render_outputs(console, plan)


def _render_resources(console: Console, plan) -> None:
    """The heading, the offline mark's meaning, the AZs and the resources by component."""
    total = sum(plan.counts.values())
    _rule(console, f"[bold]plan: stack {plan.stack}[/] ({plan.region or 'region unknown'}, {total} resources)")
    console.print(f"{OFFLINE_MARK}: a value the offline mock cloud made up (offline/mock_cloud.py); AWS gives "
                  "the real one at `pulumi up`", highlight=False, markup=False)
    if plan.zones:
        zones = "  ".join(f"{z['name']} ({z['id']}){'' if z['control_plane'] else ' [no control plane]'}"
                          for z in plan.zones["network"])
        console.print(f"AZs: {escape(zones)}; GPU nodes in {plan.zones['gpu']['name']} ({plan.zones['gpu']['id']})",
                      highlight=False)
    root = Tree("[bold]resources by component[/]")
    for node in plan.tree:
        _add(root, node)
    console.print(root)

def _render_capacity(console: Console, plan) -> None:
    """Each phase's engine capacity (one report when both phases run the same engine)."""
    _rule(console, "[bold]capacity per replica[/] (vLLM's arithmetic; each reserve says if it is measured)")
    if plan.capacity:
        texts = {phase: report.render_text() for phase, report in plan.capacity.items()}
        if len(set(texts.values())) == 1:  # the usual case: both phases run the same engine
            texts = {f"{' and '.join(texts)} (the same engine)": next(iter(texts.values()))}
        for phases, text in texts.items():
            console.print(f"[bold]{phases}[/]")
            console.print(text, highlight=False, markup=False)
    else:
        console.print(f"[yellow]no capacity report: {plan.capacity_note}[/]")

def _render_front_door(console: Console, door: dict | None) -> None:
    """The endpoint's load balancer, who may call it, its keys, and what a caller meets (no key: 401)."""
    if door is None:
        return
    _rule(console, "[bold]front door[/] (docs/FRONT_DOOR.md)")
    callers = ", ".join(door["allowed_cidrs"]) or "the VPC's CIDR"
    protocol = "TLS" if door["tls"] else "plain HTTP"
    console.print(f"{door['scheme']} Network Load Balancer, {protocol} on port {door['port']}; callers: {callers}",
                  highlight=False, markup=False)
    keys = ", ".join(door["key_names"]) or "none"
    console.print(f"API keys: {keys}; per key {door['requests_per_minute']:,} requests and "
                  f"{door['tokens_per_minute']:,} tokens per minute unless apiKeyLimits says otherwise",
                  highlight=False, markup=False)
    for note in door["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False)


def _render_notes(console: Console, plan) -> None:
    for note in plan.notes:
        if note not in plan.warnings:  # a warning is printed once, as one, after the plan
            console.print(f"[dim]note: {escape(note)}[/]", highlight=False)

def _render_scaling(console: Console, plan) -> None:
    """Replicas, worker pods and GPU nodes, min → max, and their cost per hour."""
    scaling = plan.to_dict()["scaling"]
    if scaling is not None:
        _rule(console, "[bold]scaling bounds[/] (min → max)")
        table = Table("", "replicas", "worker pods (one GPU node each)")
        for phase, bounds in scaling["phases"].items():
            fixed = "" if bounds["autoscaling"] else " (fixed)"
            table.add_row(phase, f"{bounds['replicas']['min']} → {bounds['replicas']['max']}{fixed}",
                          f"{bounds['worker_pods']['min']} → {bounds['worker_pods']['max']}")
        # With a phase's own GPU node group: one row per group, with its phases and its own cost.
        for nodes in scaling.get("gpu_node_groups") or [scaling["gpu_nodes"]]:
            held = f": {' + '.join(nodes['phases'])}, {_per_hour(nodes['cost_per_hour'])}" if "phases" in nodes else ""
            table.add_row(f"GPU nodes ({nodes['instance_type']}{held})", "", f"{nodes['min']} → {nodes['max']}"
                          + (f" by {scaling['node_autoscaler']}" if nodes["max"] > nodes["min"] else " (fixed)"))
        table.add_row("[bold]cost per hour[/]", "", _per_hour(scaling["cost_per_hour"]))
        console.print(table)

def _render_cost(console: Console, cost) -> None:
    """The hourly cost estimate, line by line, with what is not priced."""
    _rule(console, f"[bold]hourly cost ESTIMATE[/] ({cost.region}, USD, on-demand list prices)")
    table = Table("item", "quantity", "unit price / h", "per hour")
    for line in cost.lines:
        table.add_row(line.item, f"{line.quantity:g} {line.unit}",
                      "not recorded" if line.unit_price_per_hour is None else usd(line.unit_price_per_hour),
                      "not recorded" if line.per_hour is None else usd(line.per_hour))
    if cost.per_hour is None:
        table.add_row("[bold]total[/]", "", "", "[bold]none[/]: a line's price is not recorded (below)")
    else:
        table.add_row("[bold]total[/]", "", "",
                      f"[bold]{usd(cost.per_hour)}[/] (≈ {usd(cost.per_hour * price_data.HOURS_PER_MONTH)}"
                      f" / {price_data.HOURS_PER_MONTH} h month)")
    console.print(table)
    if cost.missing:
        console.print(f"[yellow]not priced, not recorded in facts/aws_prices.json: {'; '.join(cost.missing)}[/]")
    console.print(f"[dim]{price_data.LABEL}: AWS On-Demand list prices of {price_data.AS_OF} (docs/PRICES.md); "
                  f"not included: {price_data.EXCLUDES}[/]")

def _render_critical_path(console: Console, plan) -> None:
    """The deploy's critical path, step by step, and its targets."""
    path = plan.critical_path
    _rule(console, "[bold]deploy critical path[/] (expected minutes)")
    table = Table("starts at", "minutes", "resource", "type", "source")
    notes = Footnotes()
    for step in path.steps:
        table.add_row(f"{step.starts_at:.1f}", f"{step.minutes:.1f}", step.name, step.type, notes.cite(step.source))
    console.print(table)
    notes.render(console)
    console.print(
        f"[bold]{path.minutes:.1f} min[/] with the graph's parallelism, vs "
        f"[bold]{path.sequential_minutes:.1f} min[/] for the same resources one after another "
        f"(how the reference scripts run); {plan.deploy_target.text}", highlight=False)
    if plan.control_plane_to_first_token is not None:
        reach = plan.control_plane_to_first_token
        compile_first = plan.cold_start.first_compile_minutes if plan.cold_start else 0.0
        first_key = (f" (the engines start on compile caches an earlier start saved in S3; the first deploy for "
                     f"their key compiles: {compile_first:.1f} min more)") if compile_first else ""
        console.print(f"EKS control plane ready → first token: [bold]{reach.figure:.1f} min[/] on this path; "
                      f"{reach.text}{first_key}", highlight=False)

def _render_head_restart(console: Console, plan) -> None:
    if plan.head_restart:
        restart = plan.head_restart
        _rule(console, "[bold]while the Ray head restarts[/] (documented by Ray/KubeRay, not measured)")
        for label, text in (("in flight", restart.in_flight), ("new requests", restart.new_requests),
                            ("meanwhile", restart.meanwhile)):
            console.print(f"[cyan]{label}[/]: {escape(text)}", highlight=False)
        console.print(f"[dim]sources: {' '.join(restart.to_dict()['sources'])}[/]")

def _render_updates(console: Console, updates: dict | None) -> None:
    """How each kind of change reaches traffic on this stack, and the surge that keeps it serving."""
    if not updates:
        return
    path = ("blue/green (upgradeStrategy NewCluster)" if updates["blue_green"]
            else "in place (upgradeStrategy None)")
    _rule(console, f"[bold]updates and traffic[/]: {path}")
    for kind, effect in updates["effects"].items():
        down = "keeps serving" if not effect["seconds"] else f"{effect['seconds'] / 60:.1f} min down"
        console.print(f"[cyan]{escape(kind)}[/]: {down}; in flight: {escape(effect['in_flight'])}", highlight=False)
    surge = updates["surge"]
    if surge is None:
        return
    text = Surge(**surge).summary()
    if updates["blue_green"]:
        console.print(f"a blue/green switch runs {text}", highlight=False)
    else:
        room = "" if updates["room_for_surge"] else ", with gpuNodeMaxCount room for it"
        console.print(f"upgradeStrategy NewCluster{room} would keep serving through RayService changes: "
                      f"{text} per update", highlight=False)


def _render_outputs(console: Console, plan) -> None:
    if plan.outputs:
        _rule(console, "[bold]stack outputs[/]")
        for key, value in plan.outputs.items():
            mark = f" [yellow]{OFFLINE_MARK}[/]" if key in plan.offline_outputs else ""
            console.print(f"[cyan]{key}[/] = {escape(_value(value))}{mark}", highlight=False)

def _slo_ms(seconds: float | None) -> str:
    """A predicted time; None is a queue that grows without bound (the warnings say which and why)."""
    return "unbounded" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _render_slo(console: Console, slo: dict | None) -> None:
    """Per phase: the replicas and GPU nodes the workload needs for its target, and whether the stack has them."""
    if slo is None:
        return
    workload, targets = slo["workload"], slo["targets"]
    _rule(console, f"[bold]sized for the SLO[/] (peak {workload['requests_per_second']:g} req/s; prompt → output "
                   f"tokens {workload['typical_prompt_tokens']} → {workload['typical_output_tokens']}, long "
                   f"{workload['long_prompt_tokens']} → {workload['long_output_tokens']}; "
                   f"p{targets['objective'] * 100:g})")
    if slo["note"]:
        console.print(f"[yellow]not sized: {escape(slo['note'])}[/]", highlight=False)
        return
    table = Table("phase", "GPU", "target", "predicted at min / max replicas", "needed", "verdict")
    floors = []
    for phase, row in slo["phases"].items():
        metric = "TTFT" if phase == "prefill" else "TPOT"
        floor = "long prompt TTFT" if phase == "prefill" else "TPOT at batch 1"
        price = row["needed_cost_per_hour"]
        needed = (f"none up to {MAX_REPLICAS}" if row["needed_replicas"] is None else
                  f"{row['needed_replicas']} ({row['needed_nodes']} node{'s' if row['needed_nodes'] != 1 else ''}, "
                  + ("unpriced" if price is None else f"{usd(price)}/h") + ")")
        verdict = ("[yellow]SHORT[/]" if not row["meets_at_max"] else "[green]meets[/]"
                   if row["configured_min_replicas"] >= row["needed_replicas"]
                   else f"meets once scaled to {row['needed_replicas']}")
        table.add_row(phase, f"{row['gpu']} ({row['instance_type']})",
                      f"{metric} ≤ {_slo_ms(row['target_seconds'])}",
                      f"{_slo_ms(row['predicted_at_min_seconds'])} / {_slo_ms(row['predicted_at_max_seconds'])} "
                      f"({row['configured_min_replicas']} → {row['configured_max_replicas']})",
                      needed, verdict)
        floors.append(f"{phase} floor ({row['target_key']}), datasheet / predicted: {floor} "
                      f"{_slo_ms(row['floor_datasheet_seconds'])} / {_slo_ms(row['floor_predicted_seconds'])}")
    console.print(table)
    for line in floors:
        console.print(escape(line), highlight=False)
    _render_slo_extras(console, slo)
    labels = sorted({row["calibration"] for row in slo["phases"].values()})
    console.print(f"[dim]predicted: {escape('; '.join(labels))}. Model and calibration: docs/SIZING.md[/]",
                  highlight=False)


def _render_slo_extras(console: Console, slo: dict) -> None:
    """What the stack serves at its targets, the KV hand-over and its failure mode, PD against colocated."""
    if "shapes" not in slo:
        return
    targets, link = slo["targets"], slo["hand_over"]
    percentile = f"p{targets['objective'] * 100:g}"
    prefill, decode = slo["configured_max_replicas"]
    console.print(f"[bold]serves about {slo['serves_requests_per_second']:.2g} requests/s at {percentile}[/] "
                  f"(TTFT ≤ {_slo_ms(targets['ttft_seconds'])}, TPOT ≤ {_slo_ms(targets['tpot_seconds'])}) with "
                  f"{prefill} prefill and {decode} decode replica{'s' if decode > 1 else ''} at most", highlight=False)
    prompt = slo["workload"]["typical_prompt_tokens"]
    console.print(
        f"KV hand-over of a {prompt:,}-token prompt: {link['bytes_moved'] / 2**20:,.0f} MiB in "
        f"{_slo_ms(link['link_seconds'])} over EFA at {link['link_bytes_per_second'] * 8 / 1e9:g} Gbps "
        f"({link['per_node_per_second']:,.1f} a second per prefill node). Failure mode: NIXL on UCX instead of "
        f"LIBFABRIC (about {link['fallback_bytes_per_second'] / 1e9:g} GB/s, docs/SOURCES.md#kv-transfer-libfabric) "
        f"takes {_slo_ms(link['fallback_seconds'])} ({link['fallback_per_node_per_second']:,.1f} a second per "
        f"prefill node): at the peak TTFT {percentile} {_slo_ms(link['fallback_ttft_seconds'])}, TPOT "
        f"{_slo_ms(link['fallback_tpot_seconds'])}; `pdctl verify-transport` says which path runs",
        highlight=False, markup=False)
    shapes = slo["shapes"]
    table = Table("serving", "replicas", "GPU nodes", "USD / h", f"TTFT {percentile}", f"TPOT {percentile}",
                  "verdict")
    for key, label in (("pd", "PD (prefill + decode)"), ("colocated", "colocated (one engine, both phases)")):
        row = shapes[key]
        replicas = f"none up to {MAX_REPLICAS}" if row["replicas"] is None else " + ".join(map(str, row["replicas"]))
        verdict = ("[green]recommended[/]" if shapes["recommended"] == row["shape"] else
                   "[yellow]cannot[/]" if row["replicas"] is None else "meets")
        table.add_row(label, replicas, "-" if row["nodes"] is None else str(row["nodes"]),
                      "-" if row["cost_per_hour"] is None else usd(row["cost_per_hour"]),
                      _slo_ms(row["ttft_seconds"]) if row["replicas"] else "-",
                      _slo_ms(row["tpot_seconds"]) if row["replicas"] else "-", verdict)
    console.print(table)
    console.print(f"recommended: [bold]{shapes['recommended'] or 'neither'}[/]: {escape(shapes['why'])}",
                  highlight=False)


def _render_cold_start(console: Console, start) -> None:
    _rule(console, "[bold]cold start[/] (seconds, per documented step)")
    console.print(f"storage: {escape(start.storage)}", highlight=False)
    console.print(f"weights: {escape(start.load_path)}", highlight=False)
    console.print(f"image: {escape(start.image_path)}", highlight=False)
    console.print(f"compile caches: {escape(start.compile_caches)}", highlight=False)
    for figure in (start.new_node, start.pod_restart):
        table = Table("seconds", "step", "source")
        notes = Footnotes()
        for step in figure.steps:
            where = f" ({step.duration.where})" if step.duration.where else ""
            table.add_row(f"{step.duration.seconds:.0f}", step.name, notes.cite(f"{step.duration.source}{where}"))
        console.print(table)
        notes.render(console)
        verdict = f"; {figure.verdict.text}" if figure.verdict else ""
        console.print(f"[bold]{figure.name}: {figure.seconds:.0f} s[/] ({figure.shares_text})"
                      f"{verdict}", highlight=False)
    load, share = start.weight_load, start.weight_load.disk_share
    console.print(f"weight load: {load.loader} at [bold]{share.value:.0%}[/] of a local disk's sequential read "
                  f"({share.source}: {escape(share.where)}), reading {escape(load.reads_from)}; {load.verdict.text}",
                  highlight=False)


def render_status(console: Console, service, pods, nodes, warnings: list[str]) -> None:
    colour = "green" if service.is_ready else "red"
    console.print(f"RayService [bold]{service.name}[/]: Ready=[{colour}]{service.ready}[/] "
                  f"{service.reason}  cluster={service.ray_cluster or '-'}", highlight=False)
    apps = Table("application", "status", "deployments")
    for app in service.applications:
        apps.add_row(app.name, app.status, "\n".join(f"{d}: {s}" for d, s in app.deployments.items()))
    console.print(apps)
    for app in service.applications:
        if app.message:  # a DEPLOY_FAILED reason shows only here: print it whole, unwrapped
            console.print(f"{app.name}: {app.message}", soft_wrap=True, highlight=False, markup=False)
    table = Table("ray", "phase", "ready", "restarts")
    table.add_column("pod", overflow="fold")
    table.add_column("node", overflow="fold")
    for pod in pods:
        table.add_row(f"{pod.ray_node_type or '-'}/{pod.ray_group or '-'}", pod.phase,
                      str(pod.ready), str(pod.restarts), pod.name, pod.node or "(unscheduled)")
    console.print(table)
    table = Table("role", "type", "zone", "ready", "GPU alloc", "EFA alloc")
    table.add_column("node", overflow="fold")
    for node in nodes:
        table.add_row(node.role or "-", node.instance_type or "-", node.zone or "-", str(node.ready),
                      str(node.gpu_allocatable), str(node.efa_allocatable), node.name)
    console.print(table)
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True, highlight=False)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:,.1f}"


def _run_title(parameters: dict) -> str:
    if parameters["rate"] is None:
        load = f"closed loop, {parameters['concurrency']} in flight"
    else:
        cap = f", at most {parameters['concurrency']} in flight" if parameters["concurrency"] else ""
        load = f"open loop, {parameters['rate']:g} req/s {parameters['arrival']}{cap}"
    return (f"{load}; {parameters['requests']} requests of {parameters['input_tokens']} → "
            f"{parameters['output_tokens']} tokens after {parameters['warmup']} warm-up")


def render_bench(console: Console, result: dict) -> None:
    server = result["server"]
    versions = result["versions"]
    console.print(f"[bold]{escape(server['model'])}[/] at {escape(server['base_url'])} ({result['where']}); "
                  f"pdctl {versions['pdctl']}, openai {versions['openai']}", highlight=False)

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:,.1f}"

    for run in result["runs"]:
        parameters, requests = run["parameters"], run["requests"]
        console.print(f"[bold]{escape(_run_title(parameters))}[/]  seed {parameters['seed']}", highlight=False)
        prompts = run["prompts"]
        exact = "exact" if prompts["exact_token_length"] else "not exact"
        console.print(f"prompts: {escape(prompts['source'])} ({exact})"
                      + (f": {escape(prompts['note'])}" if prompts["note"] else ""), highlight=False)
        table = Table(f"latency (ms), {requests['succeeded']}/{requests['total']} requests ok",
                      "mean", "p50", "p90", "p99")
        for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL*"), ("e2e_s", "E2E")):
            dist = run[key] or {}
            table.add_row(label, *(_ms(dist.get(k)) for k in ("mean", "p50", "p90", "p99")))
        console.print(table)
        console.print(
            f"wall {run['wall_s']:.2f} s · {rate(run['requests_per_s'])} req/s · "
            f"output {rate(run['output_tokens_per_s'])} tok/s · total {rate(run['total_tokens_per_s'])} tok/s "
            f"({run['input_tokens']:,} in / {run['output_tokens']:,} out tokens)", highlight=False)
        goodput = run.get("goodput")
        if goodput:
            slo = ", ".join(f"{k.removesuffix('_s').upper()} ≤ {v * 1000:g} ms" for k, v in goodput["slo"].items()
                            if v is not None)
            console.print(f"goodput ({slo}): {goodput['good_requests']}/{requests['total']} requests, "
                          f"{rate(goodput['requests_per_s'])} req/s", highlight=False)
    for note in result["notes"]:
        console.print(f"[dim]* {escape(note)}[/]", highlight=False)


TOP_ROWS = (
    ("replicas", "replicas", "{:.0f}"),
    ("requests_per_second", "requests/s", "{:.2f}"),
    ("running", "running", "{:.0f}"),
    ("waiting", "waiting", "{:.0f}"),
    ("kv_cache_usage", "KV cache used", "{:.0%}"),
    ("ttft_p50_seconds", "TTFT p50", "{:.3f} s"),
    ("ttft_p90_seconds", "TTFT p90", "{:.3f} s"),
    ("tpot_p50_seconds", "TPOT p50", "{:.4f} s"),
    ("tpot_p90_seconds", "TPOT p90", "{:.4f} s"),
)
TOP_TRANSFER_ROWS = (
    ("transfers_per_second", "transfers/s", "{:.2f}"),
    ("bytes_per_second", "bytes/s", "{:,.0f}"),
    ("seconds_per_transfer", "time per transfer", "{:.4f} s"),
    ("link_bytes_per_second", "link bytes/s in flight", "{:,.0f}"),
    ("failed_transfers", "failed", "{:.0f}"),
)


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def top_table(snapshot: Any) -> Any:
    """`pdctl top`'s screen: one column per phase, then the KV transfer between them."""
    from rich.console import Group

    window = f", {snapshot.window_seconds:g} s window" if snapshot.window_seconds else ""
    phases = Table(title=f"eks-pd-llm top: {snapshot.source}{window}", title_justify="left")
    phases.add_column("figure")
    for phase in snapshot.phases:
        phases.add_column(phase, justify="right")
    for key, label, fmt in TOP_ROWS:
        phases.add_row(label, *(_cell(figures.get(key), fmt) for figures in snapshot.phases.values()))
    transfer = Table(title="KV transfer prefill → decode (NIXL)", title_justify="left")
    transfer.add_column("figure")
    transfer.add_column("value", justify="right")
    for key, label, fmt in TOP_TRANSFER_ROWS:
        transfer.add_row(label, _cell(snapshot.kv_transfer.get(key), fmt))
    parts: list[Any] = [phases, transfer]
    if snapshot.unmapped_replicas:
        parts.append(f"[yellow]engines of no known phase: {', '.join(snapshot.unmapped_replicas)}[/]")
    return Group(*parts)
