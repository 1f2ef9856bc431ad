"""Operating a deployed stack: `client-config`, `status`, `verify-transport`, `connect`, `top`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.markup import escape

from pdctl import endpoint
from pdctl.commands.cluster import (
    CONTEXT_OPTION,
    KUBECONFIG_OPTION,
    NAME_OPTION,
    NAMESPACE_OPTION,
    cluster_target,
    kube_call,
    kube_reader,
)
from pdctl.commands.common import (
    OUTPUTS_FILE_OPTION,
    PULUMI_STACK_OPTION,
    OutputFormat,
    console,
    err,
    fail,
    stack_outputs,
)
from serve_app.render import SERVE_HTTP_PORT


def client_config(
    stack: str | None = PULUMI_STACK_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    base_url: str | None = typer.Option(
        None, help="Endpoint URL; default: the front door's, else the `connect` port-forward."),
    local_port: int = typer.Option(SERVE_HTTP_PORT, help="Local port `pdctl connect` forwards."),
    key: str | None = typer.Option(None, "--key", help="Name of the front door key to use (default: the only one)."),
    write: Path | None = typer.Option(None, "--write", "-w", help="Also write the JSON config here."),
    env: bool = typer.Option(False, "--env", help="Print `export` lines instead of JSON."),
) -> None:
    """OpenAI client configuration (base URL, model id, API key) as JSON or env vars.

    Reads no secret output. With a front door, the key comes from the stack's encrypted config
    (`pulumi config get apiKeys`) with your own credentials; without one, a placeholder."""
    try:
        outputs = stack_outputs(stack, from_file)
        api_key = endpoint.fetch_api_key(outputs, key, stack) if endpoint.has_front_door(outputs) \
            else endpoint.API_KEY_PLACEHOLDER
        config = endpoint.client_config(outputs, base_url=base_url, local_port=local_port, api_key=api_key)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    document = json.dumps(config.to_dict(), indent=2) + "\n"
    if write is not None:
        write.write_text(document)
    sys.stdout.write(config.env_text() if env else document)



def status(
    namespace: str | None = NAMESPACE_OPTION, name: str | None = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
) -> None:
    """RayService state and applications, pods and their nodes, GPU/EFA allocatable per node.

    Exits 1 while the RayService is not Ready, so scripts can wait on it."""
    from dataclasses import asdict

    from pdctl import kube
    from pdctl.views import render_status

    with cluster_target(namespace, name, kubeconfig, context, stack, from_file) as target:
        reader = kube_reader(target)
        service = kube.ray_service_status(kube_call(
            f"RayService {target.namespace}/{target.name}",
            lambda: reader.ray_service(target.namespace, target.name), target))
        selector = f"{kube.RAY_CLUSTER_LABEL}={service.ray_cluster}" if service.ray_cluster else None
        pods = kube.pod_rows(kube_call("pods", lambda: reader.pods(target.namespace, selector), target))
        nodes = kube.node_rows(kube_call("nodes", reader.nodes, target))
    warnings = kube.node_warnings(nodes)
    if output is OutputFormat.json:
        document = {"ray_service": asdict(service), "pods": [asdict(p) for p in pods],
                    "nodes": [asdict(n) for n in nodes], "warnings": warnings}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        render_status(console, service, pods, nodes, warnings)
    if not service.is_ready:
        raise typer.Exit(1)


def verify_transport(
    namespace: str | None = NAMESPACE_OPTION, name: str | None = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    expected: str = typer.Option("LIBFABRIC", help="NIXL backend every worker must use."),
    exec_fallback: bool = typer.Option(
        True, help="When `kubectl logs` has no NIXL line, grep Ray's log files in the pod (exec)."),
    metrics_url: str | None = typer.Option(
        None, help="A Prometheus /metrics URL (e.g. a port-forwarded worker :8080) for ray_vllm_nixl_*."),
) -> None:
    """Fail unless NIXL instantiated the LIBFABRIC backend on every worker (UCX fails silently on EFA)."""
    from pdctl import kube

    with cluster_target(namespace, name, kubeconfig, context, stack, from_file) as target:
        reader = kube_reader(target)
        service = kube.ray_service_status(kube_call(
            f"RayService {target.namespace}/{target.name}",
            lambda: reader.ray_service(target.namespace, target.name), target))
        pods = kube_call("worker pods", lambda: kube.worker_pods(reader, target.namespace, service.ray_cluster),
                         target)
        if not pods:
            raise fail(f"no Ray worker pods for RayService {target.namespace}/{target.name}: "
                       "`pdctl status` shows where they are")
        results = [kube_call(f"logs of {p['metadata']['name']}",
                             lambda p=p: kube.pod_transport(reader, target.namespace, p, exec_fallback=exec_fallback),
                             target)
                   for p in pods]
    for result in results:
        console.print(f"[bold]{result.pod}[/]: {', '.join(result.backends) or 'no NIXL backend line'}",
                      highlight=False)
        for line in result.evidence[:3]:
            console.print(f"  {line}", highlight=False, markup=False)
    if metrics_url:
        report_nixl_metrics(metrics_url)
    problems = kube.transport_problems(results, expected)
    if problems:
        for problem in problems:
            err.print(f"[bold red]FAIL[/] {escape(problem)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"[bold green]OK[/] every worker uses {expected}")


def report_nixl_metrics(url: str) -> None:
    import httpx

    from measure.prometheus import nixl_metric_totals

    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError as exc:
        err.print(f"[yellow]metrics not reachable at {escape(url)}: {escape(str(exc))}[/]")
        return
    try:
        found = nixl_metric_totals(text)
    except ValueError as exc:
        err.print(f"[yellow]not Prometheus metrics at {escape(url)} ({escape(str(exc)[:200])})[/]")
        return
    if not found:
        err.print(f"[yellow]no ray_vllm_nixl_* metrics at {escape(url)} (no transfer yet?)[/]")
    for metric, value in sorted(found.items()):
        console.print(f"  {metric} = {value:g}")


# kubectl rather than the Python client: the client's portforward only reaches a pod (it would
# re-implement Service -> ready pod selection, and re-selection after a RayService upgrade), and
# kubectl already runs the EKS exec credential plugin (`aws eks get-token`) the kubeconfig names.
def connect(
    namespace: str | None = NAMESPACE_OPTION, name: str | None = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    local_port: int = typer.Option(SERVE_HTTP_PORT, help="Port on 127.0.0.1."),
) -> None:
    """Forward 127.0.0.1:<local-port> to the stack's serve Service on port 8000 (`kubectl port-forward`),
    until Ctrl-C. Then `pdctl client-config --env`, `pdctl smoke`, `pdctl chat`, `pdctl bench`."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise fail("kubectl is not on PATH (https://kubernetes.io/docs/tasks/tools/)")
    with cluster_target(namespace, name, kubeconfig, context, stack, from_file) as target:
        command = [kubectl, "port-forward", "--address", "127.0.0.1", "-n", target.namespace,
                   f"svc/{target.name}-serve-svc", f"{local_port}:{SERVE_HTTP_PORT}"]
        if target.kubeconfig is not None:
            command += ["--kubeconfig", str(target.kubeconfig)]
        if target.context:
            command += ["--context", target.context]
        console.print(f"forwarding http://127.0.0.1:{local_port}/v1 → {target.namespace}/{target.name}-serve-svc:"
                      f"{SERVE_HTTP_PORT}; Ctrl-C stops", highlight=False)
        try:
            code = subprocess.call(command)
        except KeyboardInterrupt:
            code = 0
    if code:
        raise fail(f"kubectl port-forward exited {code}: `pdctl status` shows whether the RayService and its "
                   f"serve Service are up; `{target.update_kubeconfig_command()}` refreshes the kubeconfig", code)


# --------------------------------------------------------------------------------- top

PROMETHEUS_URL = "http://127.0.0.1:9090"  # the stack output prometheusPortForwardCommand's local end


def top(
    prometheus: str = typer.Option(PROMETHEUS_URL, "--prometheus",
                                   help="The stack's Prometheus (after its port-forward; see stack outputs)."),
    metrics_url: list[str] = typer.Option(
        [], "--metrics-url", help="A Ray node's metrics endpoint, e.g. a port-forwarded pod's "
        "http://127.0.0.1:8080/metrics (repeatable: one per node); read instead of Prometheus."),
    interval: float = typer.Option(5.0, min=1.0, help="Seconds between refreshes (and between the two scrapes "
                                                      "of Ray endpoints that rates come from)."),
    once: bool = typer.Option(False, "--once", help="One refresh, then exit."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o",
                                        help="json: one document per refresh (with --once, exactly one)."),
) -> None:
    """Per-phase requests/s, queues, KV cache, TTFT/TPOT and the KV transfer, refreshing live."""
    from rich.live import Live

    from pdctl.views import top_table

    source = _TopSource(prometheus, metrics_url, interval)
    if output is OutputFormat.json:
        while True:
            sys.stdout.write(json.dumps(source.snapshot().to_dict(), sort_keys=True) + "\n")
            sys.stdout.flush()
            if once:
                return
            source.pause()
    if once:
        console.print(top_table(source.snapshot()))
        return
    try:
        # "visible": a terminal shorter than the two tables scrolls instead of cutting them off.
        with Live(top_table(source.snapshot()), console=console, auto_refresh=False,
                  vertical_overflow="visible") as live:
            while True:
                source.pause()
                live.update(top_table(source.snapshot()), refresh=True)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@dataclass(frozen=True)
class _TopSource:
    """Where `top` reads its figures: the stack's Prometheus, or the Ray nodes' metrics endpoints scraped
    twice, `interval` apart (the rates come from the difference)."""

    prometheus: str
    metrics_urls: list[str]
    interval: float

    def snapshot(self):
        import httpx

        from pdctl import top as figures

        try:
            if not self.metrics_urls:
                return figures.from_prometheus(self.prometheus, _get_json)
            before = figures.scrape(self.metrics_urls, _get_text)
            time.sleep(self.interval)
            return figures.from_ray_endpoints(before, figures.scrape(self.metrics_urls, _get_text), self.interval,
                                              "ray metrics " + ", ".join(self.metrics_urls))
        except (httpx.HTTPError, figures.SourceError) as exc:
            hint = "" if self.metrics_urls else " (is the prometheusPortForwardCommand stack output running?)"
            raise fail(f"cannot read {', '.join(self.metrics_urls) or self.prometheus}: {exc}{hint}") from None

    def pause(self) -> None:
        if not self.metrics_urls:  # endpoint snapshots already spent `interval` between their two scrapes
            time.sleep(self.interval)


def _get_json(url: str, params: dict[str, str]):
    import httpx

    from pdctl import top as figures

    response = httpx.get(url, params=params, timeout=10)
    try:
        return response.json()
    except ValueError:
        raise figures.SourceError(f"{url} answered {response.status_code}, not Prometheus JSON") from None


def _get_text(url: str) -> str:
    import httpx

    response = httpx.get(url, timeout=10)
    response.raise_for_status()
    return response.text


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command("client-config")(client_config)
    app.command()(status)
    app.command("verify-transport")(verify_transport)
    app.command()(connect)
    app.command()(top)
