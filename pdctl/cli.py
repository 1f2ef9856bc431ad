"""`python -m pdctl`: plan a stack offline, then operate its endpoint.

Heavy modules (pulumi, kubernetes, openai) are imported inside the commands that need them, so
`--help` and the client commands start fast and never pull in Pulumi.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from pdctl import endpoint, version
from serve_app.render import SERVE_HTTP_PORT

app = typer.Typer(
    help="Plan an eks-pd-llm stack offline (no AWS account), then operate its endpoint.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app.callback()(version.app_callback)
console = Console()
err = Console(stderr=True)

DEFAULT_NAMESPACE = "inference"
DEFAULT_RAY_SERVICE = "ray-llm"


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"--set takes key=value, got {pair!r}", 2)
        overrides[key] = value
    return overrides


def offline_run(stack: str, overrides: dict[str, str]):
    """Run the real program under mocks; a user mistake exits 2 with the config error, no traceback."""
    import yaml

    import offline
    from serve_app.errors import ConfigError

    try:
        return offline.run_offline(stack, overrides=overrides or None)
    except ConfigError as exc:
        raise fail(f"stack {stack!r}: {exc}", 2) from None
    except yaml.YAMLError as exc:
        raise fail(f"stack {stack!r}: the stack file is not valid YAML: {exc}", 2) from None


# ------------------------------------------------------------------------------------ plan

STACK_OPTION = typer.Option("dev", "--stack", "-s", help="Stack name: reads Pulumi.<stack>.yaml.")
SET_OPTION = typer.Option([], "--set", help="Override a config key for this run: key=value (repeatable).")


@app.command()
def plan(
    stack: str = STACK_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
    set_: list[str] = SET_OPTION,
    strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) on a warning too, e.g. model facts "
                                "that could not be read (CI runs the plan this way)."),
) -> None:
    """What the stack creates, its capacity, hourly cost estimate and deploy critical path.

    Exits 1 when a rule of the policy pack (policy/) refuses a resource, as `pulumi preview
    --policy-pack policy` would; with --strict, also on a warning."""
    from pdctl.plan import build_plan
    from pdctl.views import render_plan

    run = offline_run(stack, parse_overrides(set_))
    result = build_plan(run, stack=stack, config_region=run.config.get("aws:region"))
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
    else:
        render_plan(console, result)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for violation in result.policy_violations:
        err.print(f"[bold red]error:[/] {escape(str(violation))}", highlight=False, soft_wrap=True)
    if result.policy_violations:
        raise typer.Exit(1)
    if strict and result.warnings:
        raise fail(f"--strict: {len(result.warnings)} warning(s) above")


@app.command()
def render(
    stack: str = STACK_OPTION,
    serve_config: bool = typer.Option(False, "--serve-config", help="Print only serveConfigV2."),
    set_: list[str] = SET_OPTION,
) -> None:
    """Print the serving namespace's objects (Namespace, NetworkPolicies, RayService) for
    `kubectl apply -f -`, or only the RayService's serveConfigV2."""
    from pdctl import render as rendering

    run = offline_run(stack, parse_overrides(set_))
    if serve_config:
        sys.stdout.write(rendering.to_yaml(rendering.serve_config(rendering.ray_service_manifest(run))))
    else:
        sys.stdout.write(rendering.to_yaml_documents(rendering.serving_manifests(run)))


# ------------------------------------------------------------------------- stack outputs

OUTPUTS_FILE_OPTION = typer.Option(
    None, "--from-file", help="Saved `pulumi stack output --json --show-secrets` (else the pulumi CLI is asked).")
PULUMI_STACK_OPTION = typer.Option(None, "--stack", "-s", help="Pulumi stack for `pulumi stack output`.")


def stack_outputs(stack: str | None, from_file: Path | None) -> dict:
    try:
        return endpoint.read_stack_outputs(stack, from_file)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None


@app.command("client-config")
def client_config(
    stack: str | None = PULUMI_STACK_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    base_url: str | None = typer.Option(None, help="Endpoint URL; default: the `connect` port-forward."),
    local_port: int = typer.Option(SERVE_HTTP_PORT, help="Local port `pdctl connect` forwards."),
    write: Path | None = typer.Option(None, "--write", "-w", help="Also write the JSON config here."),
    env: bool = typer.Option(False, "--env", help="Print `export` lines instead of JSON."),
) -> None:
    """OpenAI client configuration (base URL, model id, API key placeholder) as JSON or env vars."""
    try:
        config = endpoint.client_config(stack_outputs(stack, from_file), base_url=base_url,
                                        local_port=local_port)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    document = json.dumps(config.to_dict(), indent=2) + "\n"
    if write is not None:
        write.write_text(document)
    sys.stdout.write(config.env_text() if env else document)


# ------------------------------------------------------------------------------- cluster

KUBECONFIG_OPTION = typer.Option(None, "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
CONTEXT_OPTION = typer.Option(None, "--context", help="Kubeconfig context.")
NAMESPACE_OPTION = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n")
NAME_OPTION = typer.Option(DEFAULT_RAY_SERVICE, "--name", help="RayService name.")


def kube_reader(kubeconfig: Path | None, context: str | None):
    from kubernetes.config import ConfigException

    from pdctl.kube import KubeReader

    try:
        return KubeReader(str(kubeconfig) if kubeconfig else None, context)
    except ConfigException as exc:
        raise fail(f"kubeconfig: {exc}") from None


def kube_call(what: str, call):
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call()
    except ApiException as exc:
        raise fail(f"{what}: Kubernetes API answered {exc.status} {exc.reason}") from None
    except HTTPError as exc:
        raise fail(f"{what}: cannot reach the Kubernetes API: {exc}") from None


@app.command()
def status(
    namespace: str = NAMESPACE_OPTION, name: str = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
) -> None:
    """RayService state and applications, pods and their nodes, GPU/EFA allocatable per node.

    Exits 1 while the RayService is not Ready, so scripts can wait on it."""
    from dataclasses import asdict

    from pdctl import kube
    from pdctl.views import render_status

    reader = kube_reader(kubeconfig, context)
    service = kube.ray_service_status(kube_call(f"RayService {namespace}/{name}",
                                                lambda: reader.ray_service(namespace, name)))
    selector = f"{kube.RAY_CLUSTER_LABEL}={service.ray_cluster}" if service.ray_cluster else None
    pods = kube.pod_rows(kube_call("pods", lambda: reader.pods(namespace, selector)))
    nodes = kube.node_rows(kube_call("nodes", reader.nodes))
    warnings = kube.node_warnings(nodes)
    if output is OutputFormat.json:
        document = {"ray_service": asdict(service), "pods": [asdict(p) for p in pods],
                    "nodes": [asdict(n) for n in nodes], "warnings": warnings}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        render_status(console, service, pods, nodes, warnings)
    if not service.is_ready:
        raise typer.Exit(1)


@app.command("verify-transport")
def verify_transport(
    namespace: str = NAMESPACE_OPTION, name: str = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    expected: str = typer.Option("LIBFABRIC", help="NIXL backend every worker must use."),
    exec_fallback: bool = typer.Option(
        True, help="When `kubectl logs` has no NIXL line, grep Ray's log files in the pod (exec)."),
    metrics_url: str | None = typer.Option(
        None, help="A Prometheus /metrics URL (e.g. a port-forwarded worker :8080) for ray_vllm_nixl_*."),
) -> None:
    """Fail unless NIXL instantiated the LIBFABRIC backend on every worker (UCX fails silently on EFA)."""
    from pdctl import kube

    reader = kube_reader(kubeconfig, context)
    service = kube.ray_service_status(kube_call(f"RayService {namespace}/{name}",
                                                lambda: reader.ray_service(namespace, name)))
    pods = kube_call("worker pods", lambda: kube.worker_pods(reader, namespace, service.ray_cluster))
    if not pods:
        raise fail(f"no Ray worker pods for RayService {namespace}/{name}")
    results = [kube_call(f"logs of {p['metadata']['name']}",
                         lambda p=p: kube.pod_transport(reader, namespace, p, exec_fallback=exec_fallback))
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


@app.command()
def connect(
    namespace: str = NAMESPACE_OPTION, name: str = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    local_port: int = typer.Option(SERVE_HTTP_PORT, help="Port on 127.0.0.1."),
) -> None:
    """Port-forward 127.0.0.1:<local-port> to <name>-serve-svc:8000 (runs `kubectl port-forward`).

    kubectl rather than the Python client: the client's portforward only reaches a pod (we would
    re-implement Service → ready pod selection and re-selection after a RayService upgrade), and
    kubectl already runs the EKS exec credential plugin (`aws eks get-token`) the kubeconfig names.
    """
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise fail("kubectl is not on PATH (https://kubernetes.io/docs/tasks/tools/)")
    with tempfile.TemporaryDirectory() as scratch:
        if kubeconfig is None and (stack or from_file):
            outputs = stack_outputs(stack, from_file)
            kubeconfig = Path(scratch) / "kubeconfig"
            kubeconfig.touch(mode=0o600)
            value = outputs.get(endpoint.OUTPUT_KUBECONFIG)
            if value is None:
                raise fail("stack output 'kubeconfig' is missing")
            kubeconfig.write_text(value if isinstance(value, str) else json.dumps(value))
            namespace = outputs.get(endpoint.OUTPUT_NAMESPACE, namespace)
            name = outputs.get(endpoint.OUTPUT_RAY_SERVICE, name)
        command = [kubectl, "port-forward", "--address", "127.0.0.1", "-n", namespace,
                   f"svc/{name}-serve-svc", f"{local_port}:{SERVE_HTTP_PORT}"]
        if kubeconfig is not None:
            command += ["--kubeconfig", str(kubeconfig)]
        if context:
            command += ["--context", context]
        console.print(f"forwarding http://127.0.0.1:{local_port}/v1 → {namespace}/{name}-serve-svc:"
                      f"{SERVE_HTTP_PORT}; Ctrl-C stops")
        try:
            raise typer.Exit(subprocess.call(command))
        except KeyboardInterrupt:
            raise typer.Exit(0) from None


# --------------------------------------------------------------------------------- top

PROMETHEUS_URL = "http://127.0.0.1:9090"  # the stack output prometheusPortForwardCommand's local end


@app.command()
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
    import time

    import httpx
    from rich.live import Live

    from pdctl import top as figures
    from pdctl.views import top_table

    def get_json(url: str, params: dict[str, str]):
        response = httpx.get(url, params=params, timeout=10)
        try:
            return response.json()
        except ValueError:
            raise figures.SourceError(f"{url} answered {response.status_code}, not Prometheus JSON") from None

    def get_text(url: str) -> str:
        response = httpx.get(url, timeout=10)
        response.raise_for_status()
        return response.text

    def snapshot():
        try:
            if not metrics_url:
                return figures.from_prometheus(prometheus, get_json)
            before = figures.scrape(metrics_url, get_text)
            time.sleep(interval)
            return figures.from_ray_endpoints(before, figures.scrape(metrics_url, get_text), interval,
                                              "ray metrics " + ", ".join(metrics_url))
        except (httpx.HTTPError, figures.SourceError) as exc:
            hint = "" if metrics_url else " (is the prometheusPortForwardCommand stack output running?)"
            raise fail(f"cannot read {', '.join(metrics_url) or prometheus}: {exc}{hint}") from None

    def pause() -> None:
        if not metrics_url:  # endpoint snapshots already spent `interval` between their two scrapes
            time.sleep(interval)

    if output is OutputFormat.json:
        while True:
            sys.stdout.write(json.dumps(snapshot().to_dict(), sort_keys=True) + "\n")
            sys.stdout.flush()
            if once:
                return
            pause()
    if once:
        console.print(top_table(snapshot()))
        return
    try:
        # "visible": a terminal shorter than the two tables scrolls instead of cutting them off.
        with Live(top_table(snapshot()), console=console, auto_refresh=False, vertical_overflow="visible") as live:
            while True:
                pause()
                live.update(top_table(snapshot()), refresh=True)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


# ------------------------------------------------------------------------------ endpoint

BASE_URL_OPTION = typer.Option(
    None, "--base-url", envvar="OPENAI_BASE_URL", help="Default: $OPENAI_BASE_URL, else the `connect` port-forward.")
MODEL_OPTION = typer.Option(None, "--model", envvar="OPENAI_MODEL",
                            help="The stack's model id (default $OPENAI_MODEL, else --from-file's modelId).")


def openai_target(base_url: str | None, model: str | None, from_file: Path | None) -> tuple[str, str]:
    if model is None and from_file is not None:
        model = stack_outputs(None, from_file).get(endpoint.OUTPUT_MODEL_ID)
    if not model:
        raise fail("which model? pass --model, set OPENAI_MODEL (pdctl client-config --env) or --from-file", 2)
    return base_url or f"http://127.0.0.1:{SERVE_HTTP_PORT}/v1", model


def api_key() -> str:
    return os.environ.get("OPENAI_API_KEY", endpoint.API_KEY_PLACEHOLDER)


def openai_client(base_url: str | None, model: str | None, from_file: Path | None, timeout: float):
    """(a synchronous OpenAI client for the stack's endpoint, the stack's model id)."""
    import openai

    base_url, model = openai_target(base_url, model, from_file)
    return openai.OpenAI(base_url=base_url, api_key=api_key(), timeout=timeout, max_retries=0), model


@app.command()
def smoke(
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    prompt: str = typer.Option("In one sentence: what is prefill/decode disaggregation?"),
    max_tokens: int = typer.Option(64),
    timeout: float = typer.Option(120.0, help="Seconds per request."),
) -> None:
    """List models and send one chat completion; fail on a model mismatch or an empty answer."""
    client, model = openai_client(base_url, model, from_file, timeout)
    try:
        result = endpoint.smoke(client, model, prompt, max_tokens=max_tokens)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    console.print(f"models: {', '.join(result.models)}", highlight=False)
    console.print(f"answer ({result.completion_tokens} tokens, finish={result.finish_reason}): "
                  f"{result.answer}", highlight=False, markup=False)
    console.print("[bold green]OK[/]")


@app.command()
def chat(
    message: str = typer.Argument(..., help="What to ask."),
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    max_tokens: int = typer.Option(512),
    timeout: float = typer.Option(120.0, help="Seconds per request."),
) -> None:
    """Stream one chat answer to the terminal (checks the model id first)."""
    import openai

    client, model = openai_client(base_url, model, from_file, timeout)
    try:
        endpoint.served_models(client, model)
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message}],
            max_tokens=max_tokens, stream=True)
        received = []
        for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    received.append(choice.delta.content)
                    sys.stdout.write(choice.delta.content)
                    sys.stdout.flush()
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    except openai.APIError as exc:
        raise fail(f"{client.base_url}: {exc}") from None
    sys.stdout.write("\n")
    if not "".join(received).strip():
        raise fail("the model streamed an empty answer")


@app.command()
def bench(
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    requests: int = typer.Option(32, "--requests", "-n", min=1),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1),
    input_tokens: int = typer.Option(512, min=1, help="Synthetic prompt length (words ≈ tokens)."),
    output_tokens: int = typer.Option(128, min=1),
    ignore_eos: bool = typer.Option(True, help="Ask vLLM to always produce --output-tokens tokens."),
    seed: int = typer.Option(0),
    timeout: float = typer.Option(600.0, help="Seconds per request."),
    json_out: Path | None = typer.Option(None, "--json-out", help="Also write the summary JSON here."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
) -> None:
    """Stream N requests at concurrency C; TTFT, ITL/TPOT, E2E (p50/p90/p99) and tokens/s."""
    import openai
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from measure.latency import summarize
    from pdctl.bench import BenchSpec, run_bench
    from pdctl.views import render_bench

    base_url, model = openai_target(base_url, model, from_file)
    spec = BenchSpec(requests=requests, concurrency=concurrency, input_tokens=input_tokens,
                     output_tokens=output_tokens, ignore_eos=ignore_eos, seed=seed)
    progress = Progress(TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, disable=output is OutputFormat.json)

    async def go():
        async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key(), timeout=timeout,
                                      max_retries=0) as client:
            task = progress.add_task("requests", total=requests)
            with progress:
                return await run_bench(client, model, spec, on_done=lambda _: progress.advance(task))

    samples, wall = asyncio.run(go())
    summary = {"model": model, "base_url": base_url, "spec": spec.__dict__, **summarize(samples, wall)}
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=2) + "\n")
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        render_bench(console, summary)
    if summary["requests"]["failed"]:
        raise fail(f"{summary['requests']['failed']} of {requests} requests failed: "
                   f"{'; '.join(summary['errors'][:3])}")
