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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from components.project import PROJECT_ENV
from pdctl import endpoint, size, version
from serve_app.render import SERVE_HTTP_PORT

app = typer.Typer(
    help="Plan an eks-pd-llm stack offline (no AWS account), then operate its endpoint.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
app.callback()(version.app_callback)
console = Console()
err = Console(stderr=True)


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


def offline_run(stack: str, overrides: dict[str, str], project: Path | None = None):
    """Run the real program under mocks; a user mistake exits 2 with the config error, no traceback.
    The project is `project`, else found from the working directory (components/project.py)."""
    import yaml

    import offline
    from components.project import ProjectNotFound, find_project_dir
    from serve_app.errors import ConfigError

    try:
        if project is not None:
            os.environ[PROJECT_ENV] = str(project)
        find_project_dir()
    except ProjectNotFound as exc:
        raise fail(str(exc), 2) from None
    try:
        return offline.run_offline(stack, overrides=overrides or None)
    except ConfigError as exc:
        raise fail(f"stack {stack!r}: {exc}", 2) from None
    except yaml.YAMLError as exc:
        raise fail(f"stack {stack!r}: the stack file is not valid YAML: {exc}", 2) from None


# ------------------------------------------------------------------------------------ plan

STACK_OPTION = typer.Option("dev", "--stack", "-s", help="Stack name: reads Pulumi.<stack>.yaml.")
SET_OPTION = typer.Option([], "--set", help="Override a config key for this run: key=value (repeatable).")
PROJECT_OPTION = typer.Option(
    None, "--project", "-C", metavar="DIR", file_okay=False,
    help="The project checkout (its Pulumi.yaml and stack files). Default: the working directory or the "
         f"nearest parent holding this project's Pulumi.yaml; ${PROJECT_ENV} also sets it.")


# Piped output (less, a CI log, a file) is read on a screen too: wrapped at this many columns.
PIPED_WIDTH = 120


def text_console(width: int | None) -> Console:
    """--width columns when given; the terminal's width on a terminal; otherwise PIPED_WIDTH."""
    if width:
        return Console(width=width)
    if sys.stdout.isatty():
        return console
    return Console(width=PIPED_WIDTH)


def read_plan_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise fail(f"--diff {path}: not a readable `pdctl plan --output json` document ({exc})", 2) from None
    if not isinstance(document, dict) or "tree" not in document:
        raise fail(f"--diff {path}: not a `pdctl plan --output json` document (no resource tree)", 2)
    return document


@app.command()
def plan(
    stack: str = STACK_OPTION,
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
    set_: list[str] = SET_OPTION,
    diff: Path | None = typer.Option(
        None, "--diff", metavar="BASE.json",
        help="Print what changes from this saved `pdctl plan -o json` (e.g. the base branch's) instead of "
             "the plan. Exit status: 0 no change, 3 changed, 2 bad input, 1 failure."),
    width: int | None = typer.Option(
        None, "--width", min=40, help=f"Wrap text at this many columns (default: the terminal's; {PIPED_WIDTH} when "
                                      "piped)."),
    strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) on a warning too, e.g. model facts "
                                "that could not be read (CI runs the plan this way)."),
    project: Path | None = PROJECT_OPTION,
) -> None:
    """What the stack creates, protects, can serve, costs per hour and how long it takes to deploy.

    Values the offline mock cloud made up (ids, ARNs, AZ names) are marked "(offline)". Exits 1 when
    a rule of the policy pack (policy/) refuses a resource, as `pulumi preview --policy-pack policy`
    would; with --strict, also on a warning."""
    from pdctl.plan import build_plan
    from pdctl.views import render_plan

    base = read_plan_document(diff) if diff is not None else None
    run = offline_run(stack, parse_overrides(set_), project)
    document = build_plan(run, stack=stack, config_region=run.config.get("aws:region"))
    if base is not None:
        from pdctl.plan_diff import EXIT_CHANGED, diff_plans, render_diff

        # Compared as the JSON a reviewer saved: the same types (lists, not tuples) on both sides.
        head = json.loads(json.dumps(document.to_dict(), sort_keys=True, default=str))
        changes = diff_plans(base, head)
        if output is OutputFormat.json:
            sys.stdout.write(json.dumps(changes.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
        else:
            sys.stdout.write(render_diff(changes))
        raise typer.Exit(EXIT_CHANGED if changes.changed else 0)
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(document.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
    else:
        out = text_console(width)
        with out.capture() as captured:
            render_plan(out, document)
        # Wrapping leaves the spaces it broke at: no line ends in them (diff and review noise).
        sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    for warning in document.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    for violation in document.policy_violations:
        err.print(f"[bold red]error:[/] {escape(str(violation))}", highlight=False, soft_wrap=True)
    if document.policy_violations:
        raise typer.Exit(1)
    if strict and document.warnings:
        raise fail(f"--strict: {len(document.warnings)} warning(s) above")


app.command("size")(size.size_command)


@app.command()
def render(
    stack: str = STACK_OPTION,
    serve_config: bool = typer.Option(False, "--serve-config", help="Print only serveConfigV2."),
    set_: list[str] = SET_OPTION,
    project: Path | None = PROJECT_OPTION,
) -> None:
    """Print the serving namespace's objects (Namespace, NetworkPolicies, RayService) for
    `kubectl apply -f -`, or only the RayService's serveConfigV2."""
    from pdctl import render as rendering

    run = offline_run(stack, parse_overrides(set_), project)
    if serve_config:
        sys.stdout.write(rendering.to_yaml(rendering.serve_config(rendering.ray_service_manifest(run))))
    else:
        sys.stdout.write(rendering.to_yaml_documents(rendering.serving_manifests(run)))


# ------------------------------------------------------------------------ model mirror

@app.command()
def preflight(stack: str = STACK_OPTION, set_: list[str] = SET_OPTION, principal: str = typer.Option(
        None, "--principal", help="IAM ARN of the deploy role to check (default: the caller's).")) -> None:
    """Ask the AWS account, read-only, what it would refuse: deploy permissions, quotas, GPU offerings."""
    from pdctl.preflight import run_preflight

    lines, status = run_preflight(offline_run(stack, parse_overrides(set_)).program["settings"], principal)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    raise typer.Exit(status)


@app.command("mirror-model")
def mirror_model(
    model: str = typer.Argument(..., help="Hugging Face model id, org/name."),
    destination: str = typer.Argument(..., help="s3://<bucket>/<prefix>; the model goes under <prefix>/<org>/<name>/."),
    revision: str = typer.Option(None, "--revision", help="Branch, tag or commit of the model (default: main)."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="S3 endpoint other than AWS's (testing)."),
) -> None:
    """Copy a Hugging Face model into an S3 mirror, then print the modelSource that loads it.
    Uses the usual AWS credentials (profile, env, SSO) and HF_TOKEN for gated models."""
    import boto3

    from pdctl.mirror import mirror_model as copy_model

    try:
        result = copy_model(model, destination, revision=revision, token=os.environ.get("HF_TOKEN"),
                            s3_client=boto3.client("s3", endpoint_url=endpoint_url))
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    console.print(f"copied {result.objects} files, {result.total_bytes / 1e9:.2f} GB", highlight=False)
    console.print(f"pulumi config set modelSource {result.model_source}", highlight=False, soft_wrap=True)


# ------------------------------------------------------------------------- stack outputs

OUTPUTS_FILE_OPTION = typer.Option(
    None, "--from-file", help="Saved `pulumi stack output --json` (with --show-secrets where the stack's "
                              "kubeconfig is needed); else the pulumi CLI is asked.")
PULUMI_STACK_OPTION = typer.Option(None, "--stack", "-s", help="Pulumi stack for `pulumi stack output`.")


def stack_outputs(stack: str | None, from_file: Path | None, *, secrets: bool = False) -> dict:
    try:
        return endpoint.read_stack_outputs(stack, from_file, secrets=secrets)
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
    """OpenAI client configuration (base URL, model id, API key placeholder) as JSON or env vars.

    Reads no secret output: the stack's model id is all it needs."""
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

KUBECONFIG_OPTION = typer.Option(
    None, "--kubeconfig", help="Kubeconfig file (default: the stack's kubeconfig output when --stack or "
                               "--from-file is given, else $KUBECONFIG or ~/.kube/config).")
CONTEXT_OPTION = typer.Option(None, "--context", help="Kubeconfig context.")
NAMESPACE_OPTION = typer.Option(None, "--namespace", "-n", help="Serving namespace (default: the stack output).")
NAME_OPTION = typer.Option(None, "--name", help="RayService name (default: the stack output).")


@dataclass(frozen=True)
class ClusterTarget:
    """Where a cluster command looks: the RayService and the kubeconfig that reaches it."""

    namespace: str
    name: str
    kubeconfig: Path | None
    context: str | None
    outputs: dict

    def update_kubeconfig_command(self) -> str:
        region = self.outputs.get(endpoint.OUTPUT_REGION) or "<region>"
        cluster = self.outputs.get(endpoint.OUTPUT_CLUSTER) or "<clusterName>"
        return f"aws eks update-kubeconfig --region {region} --name {cluster}"


@contextmanager
def cluster_target(namespace: str | None, name: str | None, kubeconfig: Path | None,
                   context: str | None, stack: str | None, from_file: Path | None) -> Iterator[ClusterTarget]:
    """The RayService and kubeconfig a cluster command uses, read like `connect` and `client-config`
    read them: flags first, then the stack outputs (`pulumi stack output`, or --from-file).

    The stack's kubeconfig output is a secret: it is read only when --stack or --from-file names the
    stack and no --kubeconfig is given, and lives in a private (0600) file while the command runs."""
    use_stack_kubeconfig = kubeconfig is None and (stack is not None or from_file is not None)
    outputs: dict = {}
    if namespace is None or name is None or use_stack_kubeconfig:
        try:
            outputs = endpoint.read_stack_outputs(stack, from_file, secrets=use_stack_kubeconfig)
        except endpoint.EndpointError as exc:
            raise fail(f"{exc}; or name the RayService with --namespace and --name") from None
    namespace = namespace or outputs.get(endpoint.OUTPUT_NAMESPACE)
    name = name or outputs.get(endpoint.OUTPUT_RAY_SERVICE)
    if not namespace or not name:
        raise fail("which RayService? the stack outputs have no namespace/rayServiceName "
                   f"(have: {', '.join(sorted(outputs)) or 'none'}); pass --namespace and --name", 2)
    with tempfile.TemporaryDirectory() as scratch:
        if use_stack_kubeconfig:
            value = outputs.get(endpoint.OUTPUT_KUBECONFIG)
            if value in (None, "", endpoint.HIDDEN_SECRET):
                raise fail("the stack's kubeconfig output is missing or hidden: save the outputs with "
                           "`pulumi stack output --json --show-secrets`, or pass --kubeconfig")
            kubeconfig = Path(scratch) / "kubeconfig"
            kubeconfig.touch(mode=0o600)
            kubeconfig.write_text(value if isinstance(value, str) else json.dumps(value))
        yield ClusterTarget(namespace, name, kubeconfig, context, outputs)


def kube_reader(target: ClusterTarget):
    from kubernetes.config import ConfigException

    from pdctl.kube import KubeReader

    try:
        return KubeReader(str(target.kubeconfig) if target.kubeconfig else None, target.context)
    except ConfigException as exc:
        raise fail(f"kubeconfig: {exc}. Write one with `{target.update_kubeconfig_command()}`, or pass "
                   "--stack/--from-file to use the stack's kubeconfig output") from None


def kube_call(what: str, call, target: ClusterTarget):
    """`call()`, with the Kubernetes API's refusals as one line that says what to do next."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call()
    except ApiException as exc:
        update = target.update_kubeconfig_command()
        hint = {
            401: "the cluster did not accept your credentials: does `aws sts get-caller-identity` show an "
                 f"identity with an access entry (adminPrincipalArns)? Refresh with `{update}`",
            403: "your identity's access entry does not allow this (the stack's admins get "
                 "AmazonEKSClusterAdminPolicy)",
            404: "not found: is the stack deployed (`pulumi up`)? Is this the stack's cluster "
                 f"(`{update}`)? Or name it with --namespace/--name",
        }.get(exc.status, "")
        message = f"{what}: Kubernetes API answered {exc.status} {exc.reason}" + (f"; {hint}" if hint else "")
        raise fail(message) from None
    except HTTPError as exc:
        raise fail(f"{what}: cannot reach the Kubernetes API: {exc}. prod's endpoint admits only "
                   "apiPublicAccessCidrs; is this the stack's cluster "
                   f"(`{target.update_kubeconfig_command()}`)?") from None


@app.command()
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


@app.command("verify-transport")
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
@app.command()
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
                            help="The stack's model id (default $OPENAI_MODEL, else the stack's modelId output).")


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


class Arrival(StrEnum):
    poisson = "poisson"
    constant = "constant"


def parse_rates(text: str | None) -> Sequence[float | None]:
    """--rate 1,2,4 → [1.0, 2.0, 4.0]; none given → [None] (one closed-loop run)."""
    if text is None:
        return [None]
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        rates = []
    if not rates or min(rates) <= 0:
        raise fail("--rate takes requests per second, or a comma-separated list for a sweep (e.g. 1,2,4); "
                   f"got {text!r}", 2)
    return rates


def seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


@app.command()
def bench(
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    requests: int = typer.Option(32, "--requests", min=1, help="Timed requests per run."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", "-c", min=1,
        help="Closed loop: requests in flight (default 4). With --rate: a cap on requests in flight."),
    rate: str | None = typer.Option(
        None, "--rate", help="Open loop: requests per second; a comma-separated list is a sweep (1,2,4,8)."),
    arrival: Arrival = typer.Option(Arrival.poisson, "--arrival", help="Open-loop arrivals."),
    input_tokens: int = typer.Option(512, min=1, help="Prompt length in the model's tokenizer."),
    output_tokens: int = typer.Option(128, min=1),
    tokenizer: str | None = typer.Option(
        None, help="Hugging Face id or directory of the model's tokenizer, read from the local cache "
                   "(default: the stack's tokenizerSource output). Without one, prompts are words."),
    warmup: int | None = typer.Option(
        None, min=0, help="Untimed requests, all at once, before timing (default: the concurrency, or 8)."),
    ignore_eos: bool = typer.Option(True, help="Ask vLLM to always produce --output-tokens tokens."),
    seed: int | None = typer.Option(None, help="Prompt/arrival seed (default: a fresh one, recorded)."),
    slo_ttft_ms: float | None = typer.Option(None, "--slo-ttft-ms", min=0, help="Goodput objective."),
    slo_tpot_ms: float | None = typer.Option(None, "--slo-tpot-ms", min=0, help="Goodput objective."),
    slo_e2e_ms: float | None = typer.Option(None, "--slo-e2e-ms", min=0, help="Goodput objective."),
    timeout: float = typer.Option(600.0, help="Seconds per request."),
    json_out: Path | None = typer.Option(None, "--json-out", help="Also write the result JSON here."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
    in_cluster: bool = typer.Option(
        False, "--in-cluster", help="Run the benchmark as a Kubernetes Job next to the endpoint (no port-forward)."),
    namespace: str | None = NAMESPACE_OPTION, name: str | None = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    job_timeout: int = typer.Option(1800, min=60, help="--in-cluster: seconds the Job may run."),
    keep_job: bool = typer.Option(False, help="--in-cluster: leave the Job and its ConfigMap for inspection."),
) -> None:
    """Time streamed chat completions as a user sees them: TTFT, TPOT, ITL, E2E (p50/p90/p99),
    tokens/s and goodput, after checking /v1/models and warming up.

    Closed loop (--concurrency) or open loop (--rate, Poisson or constant; several rates sweep).
    Prints the ITL caveat: Ray Serve LLM streams in flushes (streamBatchingIntervalMs, default 50 ms)."""
    from measure.latency import Slo
    from pdctl.bench import BenchSpec, BenchTarget, fresh_seed

    outputs = stack_outputs(stack, from_file) if (stack or from_file) else {}
    model = model or outputs.get(endpoint.OUTPUT_MODEL_ID)
    if not model and not in_cluster:  # in the cluster, the stack outputs `--in-cluster` reads name it
        raise fail("which model? pass --model, set OPENAI_MODEL (pdctl client-config --env), or --from-file/--stack", 2)
    tokenizer = tokenizer or outputs.get(endpoint.OUTPUT_TOKENIZER)
    rates = parse_rates(rate)
    run_seed = seed if seed is not None else fresh_seed()  # one per invocation: a sweep shares it
    try:
        specs = [BenchSpec(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens,
                           concurrency=concurrency if (concurrency or r is not None) else 4, rate=r,
                           arrival=arrival.value, warmup=warmup, ignore_eos=ignore_eos, seed=run_seed,
                           slo=Slo(seconds(slo_ttft_ms), seconds(slo_tpot_ms), seconds(slo_e2e_ms)))
                 for r in rates]
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    if in_cluster:
        result = bench_in_cluster(specs, model, tokenizer, timeout, namespace, name, kubeconfig, context, stack,
                                  from_file, job_timeout, keep_job)
    elif model:
        result = bench_here(specs, BenchTarget(base_url or f"http://127.0.0.1:{SERVE_HTTP_PORT}/v1", model, tokenizer),
                            timeout, quiet=output is OutputFormat.json)
    else:  # the check above has exited already
        raise fail("which model?", 2)
    document = json.dumps(result, indent=2, default=str) + "\n"
    if json_out is not None:
        json_out.write_text(document)
    if output is OutputFormat.json:
        sys.stdout.write(document)
    else:
        from pdctl.views import render_bench

        render_bench(console, result)
    failed = sum(run["requests"]["failed"] for run in result["runs"])
    if failed:
        errors = sorted({e for run in result["runs"] for e in run["errors"]})
        total = sum(run["requests"]["total"] for run in result["runs"])
        raise fail(f"{failed} of {total} requests failed: {'; '.join(errors[:3])}")


def pdctl_version() -> str:
    """The package version, and the checkout's commit when there is one: what a result names."""
    from pdctl.bench import git_commit

    commit = git_commit()
    return f"{version.package_version()} (git {commit})" if commit else version.package_version()


def bench_here(specs, target, timeout: float, *, quiet: bool) -> dict:
    """The benchmark from this machine (through `pdctl connect`'s tunnel when the URL is local)."""
    import openai
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pdctl.bench import benchmark, check_models

    total = sum(s.requests for s in specs)
    progress = Progress(TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, disable=quiet)
    # Keep open as many connections as the warm-up opens (it sends the most requests at once). The
    # SDK's own Limits type: its HTTP library differs between SDK versions.
    pool = max(s.warmup_requests for s in specs)
    default = openai.DEFAULT_CONNECTION_LIMITS
    limits = type(default)(max_connections=max(pool, default.max_connections or 0),
                           max_keepalive_connections=max(pool, default.max_keepalive_connections or 0))

    async def go() -> dict:
        async with openai.AsyncOpenAI(base_url=target.base_url, api_key=api_key(), timeout=timeout, max_retries=0,
                                      http_client=openai.DefaultAsyncHttpxClient(limits=limits)) as client:
            try:
                models = await check_models(client, target.model)
            except LookupError as exc:
                raise fail(str(exc)) from None
            except openai.APIConnectionError as exc:
                raise fail(f"GET /v1/models failed: {exc}{endpoint.unreachable_hint(target.base_url)}") from None
            except openai.APIError as exc:
                raise fail(f"GET /v1/models failed: {exc}") from None
            task = progress.add_task("requests", total=total)
            with progress:
                return await benchmark(client, target, specs, server_models=models, pdctl_version=pdctl_version(),
                                       on_done=lambda _: progress.advance(task))

    return asyncio.run(go())


def bench_in_cluster(specs, model: str | None, tokenizer: str | None, timeout: float, namespace, name,
                     kubeconfig, context, stack, from_file, job_timeout: int, keep_job: bool) -> dict:
    """The same benchmark as a Job beside the endpoint (pdctl.bench_job); its result from the pod log."""
    from pdctl import bench_job, kube

    with cluster_target(namespace, name, kubeconfig, context, stack, from_file) as target:
        model = model or target.outputs.get(endpoint.OUTPUT_MODEL_ID)
        if not model:
            raise fail("which model? pass --model, or --from-file/--stack for the stack's modelId output", 2)
        tokenizer = tokenizer or target.outputs.get(endpoint.OUTPUT_TOKENIZER)
        reader = kube_reader(target)
        ray_service = kube_call(f"RayService {target.namespace}/{target.name}",
                                lambda: reader.ray_service(target.namespace, target.name), target)
        spec_document = {
            "target": {"base_url": bench_job.serve_url(target.outputs, target.namespace, target.name),
                       "model": model, "tokenizer": tokenizer, "tokenizer_download": True},
            "specs": [s.to_dict() for s in specs],
            # No API key: the Job talks to the serve Service itself, which checks none, and a ConfigMap is
            # no place for one.
            "timeout": timeout, "pdctl_version": pdctl_version(),
        }
        err.print(f"running the benchmark as a Job in {target.namespace} (up to {job_timeout} s)…", highlight=False)
        try:
            return kube_call("bench Job", lambda: bench_job.run_in_cluster(
                reader.api_client, namespace=target.namespace, ray_service=ray_service,
                ray_cluster=kube.ray_service_status(ray_service).ray_cluster, spec_document=spec_document,
                deadline_s=job_timeout, keep=keep_job, log=lambda line: err.print(line, highlight=False)), target)
        except bench_job.BenchJobError as exc:
            raise fail(str(exc)) from None
