"""`bench`: load the endpoint from here or as a Job in the cluster, and report latency and goodput."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

import typer

from pdctl import endpoint, version
from pdctl.commands.client import BASE_URL_OPTION, MODEL_OPTION, api_key
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


# The options that take more than a line to declare.
CONCURRENCY_OPTION = typer.Option(
    None, "--concurrency", "-c", min=1,
    help="Closed loop: requests in flight (default 4). With --rate: a cap on requests in flight.")
RATE_OPTION = typer.Option(
    None, "--rate", help="Open loop: requests per second; a comma-separated list is a sweep (1,2,4,8).")
TOKENIZER_OPTION = typer.Option(
    None, help="Hugging Face id or directory of the model's tokenizer, read from the local cache "
               "(default: the stack's tokenizerSource output). Without one, prompts are words.")
WARMUP_OPTION = typer.Option(
    None, min=0, help="Untimed requests, all at once, before timing (default: the concurrency, or 8).")
IN_CLUSTER_OPTION = typer.Option(
    False, "--in-cluster", help="Run the benchmark as a Kubernetes Job next to the endpoint (no port-forward).")


def bench(
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    stack: str | None = PULUMI_STACK_OPTION, from_file: Path | None = OUTPUTS_FILE_OPTION,
    requests: int = typer.Option(32, "--requests", min=1, help="Timed requests per run."),
    concurrency: int | None = CONCURRENCY_OPTION, rate: str | None = RATE_OPTION,
    arrival: Arrival = typer.Option(Arrival.poisson, "--arrival", help="Open-loop arrivals."),
    input_tokens: int = typer.Option(512, min=1, help="Prompt length in the model's tokenizer."),
    output_tokens: int = typer.Option(128, min=1),
    tokenizer: str | None = TOKENIZER_OPTION, warmup: int | None = WARMUP_OPTION,
    ignore_eos: bool = typer.Option(True, help="Ask vLLM to always produce --output-tokens tokens."),
    seed: int | None = typer.Option(None, help="Prompt/arrival seed (default: a fresh one, recorded)."),
    slo_ttft_ms: float | None = typer.Option(None, "--slo-ttft-ms", min=0, help="Goodput objective."),
    slo_tpot_ms: float | None = typer.Option(None, "--slo-tpot-ms", min=0, help="Goodput objective."),
    slo_e2e_ms: float | None = typer.Option(None, "--slo-e2e-ms", min=0, help="Goodput objective."),
    timeout: float = typer.Option(600.0, help="Seconds per request."),
    json_out: Path | None = typer.Option(None, "--json-out", help="Also write the result JSON here."),
    output: OutputFormat = typer.Option(OutputFormat.text, "--output", "-o"),
    in_cluster: bool = IN_CLUSTER_OPTION,
    namespace: str | None = NAMESPACE_OPTION, name: str | None = NAME_OPTION,
    kubeconfig: Path | None = KUBECONFIG_OPTION, context: str | None = CONTEXT_OPTION,
    job_timeout: int = typer.Option(1800, min=60, help="--in-cluster: seconds the Job may run."),
    keep_job: bool = typer.Option(False, help="--in-cluster: leave the Job and its ConfigMap for inspection."),
) -> None:
    """Time streamed chat completions as a user sees them: TTFT, TPOT, ITL, E2E (p50/p90/p99),
    tokens/s and goodput, after checking /v1/models and warming up.

    Closed loop (--concurrency) or open loop (--rate, Poisson or constant; several rates sweep).
    Prints the ITL caveat: Ray Serve LLM streams in flushes (streamBatchingIntervalMs, default 50 ms)."""
    from pdctl.bench import BenchTarget

    outputs = stack_outputs(stack, from_file) if (stack or from_file) else {}
    model = model or outputs.get(endpoint.OUTPUT_MODEL_ID)
    if not model and not in_cluster:  # in the cluster, the stack outputs `--in-cluster` reads name it
        raise fail("which model? pass --model, set OPENAI_MODEL (pdctl client-config --env), or --from-file/--stack", 2)
    tokenizer = tokenizer or outputs.get(endpoint.OUTPUT_TOKENIZER)
    specs = bench_specs(rate, seed, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens,
                        concurrency=concurrency, arrival=arrival, warmup=warmup, ignore_eos=ignore_eos,
                        slo_ms=(slo_ttft_ms, slo_tpot_ms, slo_e2e_ms))
    if in_cluster:
        result = bench_in_cluster(specs, model, tokenizer, timeout, namespace, name, kubeconfig, context, stack,
                                  from_file, job_timeout, keep_job)
    elif model:
        try:  # through the front door when the stack has one (with $OPENAI_API_KEY: pdctl client-config --env)
            door = endpoint.door_url(outputs)
        except endpoint.EndpointError as exc:
            raise fail(str(exc)) from None
        result = bench_here(specs, BenchTarget(base_url or door or f"http://127.0.0.1:{SERVE_HTTP_PORT}/v1", model,
                                               tokenizer), timeout, quiet=output is OutputFormat.json)
    else:  # the check above has exited already
        raise fail("which model?", 2)
    report_bench(result, json_out, output)


def bench_specs(rate: str | None, seed: int | None, *, requests: int, input_tokens: int, output_tokens: int,
                concurrency: int | None, arrival: Arrival, warmup: int | None, ignore_eos: bool,
                slo_ms: tuple[float | None, float | None, float | None]) -> list:
    """One run's spec per --rate (one closed-loop run without), all with one seed: a sweep shares it."""
    from measure.latency import Slo
    from pdctl.bench import BenchSpec, fresh_seed

    rates = parse_rates(rate)
    run_seed = seed if seed is not None else fresh_seed()  # one per invocation: a sweep shares it
    try:
        return [BenchSpec(requests=requests, input_tokens=input_tokens, output_tokens=output_tokens,
                          concurrency=concurrency if (concurrency or r is not None) else 4, rate=r,
                          arrival=arrival.value, warmup=warmup, ignore_eos=ignore_eos, seed=run_seed,
                          slo=Slo(*(seconds(ms) for ms in slo_ms)))
                for r in rates]
    except ValueError as exc:
        raise fail(str(exc), 2) from None


def report_bench(result: dict, json_out: Path | None, output: OutputFormat) -> None:
    """The result as JSON (also to --json-out) or as tables; exits 1 naming the errors when requests failed."""
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
        if endpoint.has_front_door(target.outputs):
            # The Job would need a key in its spec, readable by whoever reads the namespace.
            raise fail("--in-cluster carries no API key, and the front door checks every request: run the bench "
                       "from a machine in the VPC after `eval \"$(pdctl client-config --env --key NAME)\"`", 2)
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


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command()(bench)
