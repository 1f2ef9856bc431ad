"""How pdctl's data looks in a terminal (rich). No logic: the numbers come from plan/kube/metrics."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from facts import prices as price_data


def _value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _tree_label(node) -> str:
    label = f"[bold]{escape(node.name)}[/] [dim]{escape(node.type)}[/]"
    simple = {k: v for k, v in node.settings.items() if not isinstance(v, dict) or k.startswith("app")}
    if simple:
        label += "  " + "  ".join(f"[cyan]{k}[/]={escape(_value(v))}" for k, v in simple.items())
    return label


def _add(branch: Tree, node) -> None:
    child = branch.add(_tree_label(node), highlight=False)
    for key, value in node.settings.items():
        if isinstance(value, dict) and not key.startswith("app"):
            child.add(f"[magenta]{key}[/]: " + "  ".join(
                f"{k}={escape(_value(v))}" for k, v in value.items() if v is not None), highlight=False)
    for grandchild in node.children:
        _add(child, grandchild)


def render_plan(console: Console, plan) -> None:
    total = sum(plan.counts.values())
    console.rule(f"[bold]plan: stack {plan.stack}[/] ({plan.region or 'region unknown'}, {total} resources)")
    if plan.zones:
        zones = "  ".join(f"{z['name']} ({z['id']}){'' if z['control_plane'] else ' [no control plane]'}"
                          for z in plan.zones["network"])
        console.print(f"AZs: {escape(zones)}; GPU nodes in {plan.zones['gpu']['name']} ({plan.zones['gpu']['id']})",
                      highlight=False)
    root = Tree("[bold]resources by component[/]")
    for node in plan.tree:
        _add(root, node)
    console.print(root)

    console.rule("[bold]capacity per replica[/] (estimate)")
    if plan.capacity:
        texts = {phase: report.render_text() for phase, report in plan.capacity.items()}
        if len(set(texts.values())) == 1:  # the usual case: both phases run the same engine
            texts = {" = ".join(texts): next(iter(texts.values()))}
        for phases, text in texts.items():
            console.print(f"[bold]{phases}[/]")
            console.print(text, highlight=False, markup=False)
    else:
        console.print(f"[yellow]no capacity report: {plan.capacity_note}[/]")

    for note in plan.notes:
        console.print(f"[dim]note: {escape(note)}[/]", highlight=False)

    cost = plan.cost
    console.rule(f"[bold]hourly cost ESTIMATE[/] ({cost.region}, USD, on-demand list prices)")
    table = Table("item", "quantity", "unit price / h", "per hour")
    for line in cost.lines:
        table.add_row(line.item, f"{line.quantity:g} {line.unit}",
                      "n/a" if line.unit_price_per_hour is None else f"${line.unit_price_per_hour:.5f}",
                      "n/a" if line.per_hour is None else f"${line.per_hour:.4f}")
    if cost.per_hour is None:
        table.add_row("[bold]total[/]", "", "", "[bold]n/a[/] (a line has no price: see below)")
    else:
        table.add_row("[bold]total[/]", "", "",
                      f"[bold]${cost.per_hour:.2f}[/] (≈ ${cost.per_hour * price_data.HOURS_PER_MONTH:,.0f}"
                      f" / {price_data.HOURS_PER_MONTH} h month)")
    console.print(table)
    for missing in cost.missing:
        console.print(f"[yellow]not priced: {missing}[/]")
    console.print(f"[dim]{price_data.LABEL}: {price_data.SOURCE}, as of {price_data.AS_OF}; excludes "
                  f"taxes, data transfer, NAT data processing, EKS extended support, discounts[/]")

    path = plan.critical_path
    console.rule("[bold]deploy critical path[/] (expected minutes)")
    table = Table("starts at", "minutes", "resource", "type", "duration source")
    for step in path.steps:
        table.add_row(f"{step.starts_at:.1f}", f"{step.minutes:.1f}", step.name, step.type, step.source)
    console.print(table)
    console.print(
        f"[bold]{path.minutes:.1f} min[/] with the graph's parallelism, vs "
        f"[bold]{path.sequential_minutes:.1f} min[/] for the same resources one after another "
        f"(how the reference scripts run)", highlight=False)
    if plan.outputs:
        console.rule("[bold]stack outputs[/]")
        for key, value in plan.outputs.items():
            console.print(f"[cyan]{key}[/] = {escape(_value(value))}", highlight=False)


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


def render_bench(console: Console, summary: dict) -> None:
    requests = summary["requests"]
    table = Table(f"latency (ms), {requests['succeeded']}/{requests['total']} requests ok",
                  "mean", "p50", "p90", "p99")
    for key, label in (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
        dist = summary[key] or {}
        table.add_row(label, *(_ms(dist.get(k)) for k in ("mean", "p50", "p90", "p99")))
    console.print(table)

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:,.1f}"

    console.print(
        f"wall {summary['wall_s']:.2f} s · {rate(summary['requests_per_s'])} req/s · "
        f"output {rate(summary['output_tokens_per_s'])} tok/s · total {rate(summary['total_tokens_per_s'])} tok/s "
        f"({summary['input_tokens']:,} in / {summary['output_tokens']:,} out tokens)", highlight=False)


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
