"""An update reaching the served stack under load, on one host: the serve config changed in place (Ray
Serve's own rolling update, what a dev stack with upgradeStrategy None does), blue/green (what KubeRay's
NewCluster upgrade does on a prod stack), or a replica evicted.

    python -m lab update --stack dev --change engine-args --path blue-green,in-place

The lab deploys the stack's PD app (its rendered `build_pd_openai_app` args with the lab overlay, Ray
Serve LLM's OpenAI ingress in front, as every lab run) and sends an open-loop streaming load to it
through `lab.switch.SwitchingProxy`, the stand-in for the Kubernetes serve Service. Then each `--path`
in turn, on that one deployment, moves the stack from the version it serves to the other one:

- `in-place`: the same Serve application redeployed with the other version's config. With one replica
  per phase Serve stops the old replica before it starts the new one
  (deployment_state.py `_stop_or_update_outdated_version_replicas`: rollout size max(0.2 × 1, 1)).
- `blue-green`: the other version deployed as a second Serve application (its own name, route prefix,
  engine ports and GPU share: a second RayCluster, on one host); once it is RUNNING the proxy sends new
  connections to it (KubeRay's switch of the Service's selector), the old application is kept for
  `deletion_delay_s` (rayClusterDeletionDelaySeconds) and then deleted.
- `evict` (with `--change evict`): the serving decode replica's process killed (`lab.faults`); Serve
  replaces it with the same version.

Versions by `--change`: `engine-args` sets ENGINE_ARGS_CHANGE on both phases' engines; `model` serves
a second generated model of the same kind (another seed, another folder) under the same served model
id, as a new checkpoint would be; `evict` has one version.

Per step the results say: requests sent and failed (by error), TTFT and TPOT p99 before, during and
after the update, the longest stretch in which no token reached any client, seconds from the change
until the new version served (its decode replica's first successful call in Serve's access lines:
a replica that was not running before the change, of the application the new version runs in) and
every request's raw sample. Arithmetic: `lab.recovery`, `measure.latency`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import apps, faults, ray_outputs, recovery, runner
from lab.provenance import gpu, provenance, versions
from lab.resilience import first_served, lab_apps_placed, ray_init, stop_ray
from lab.switch import SwitchingProxy
from lab.variants import Variant
from measure.latency import RequestSample, summarize

RESULT_SCHEMA = "lab-update-result/1"
CHANGES = ("engine-args", "model", "evict")
PATHS = ("in-place", "blue-green", "evict")
# The engine-args change: a serving knob vLLM takes whatever the model, that the stack does not set.
ENGINE_ARGS_CHANGE = {"enable_prefix_caching": False}
PD_ONLY = ("pd",)
# Open loop, short prompts and outputs: every request ends in seconds, so the old version's
# requests are done well within the deletion delay.
DEFAULT_LOAD = faults.LoadSpec(short_prompt_tokens=128, long_prompt_tokens=1024, output_tokens=64, rate_per_s=2.0)


@dataclass(frozen=True)
class UpdateTimes:
    before_s: float = 30.0  # load before each change: the baseline
    new_version_timeout_s: float = 480.0  # longest wait from the change for the new version to serve
    deletion_delay_s: float = 90.0  # blue/green: the old application kept after the switch
    after_s: float = 20.0  # load after the update is done
    # Longest stretch without a token that still counts as serving: the load's arrivals are seconds
    # apart at most, so a longer silence is the service stopping, not the load pausing.
    silence_limit_s: float = 5.0
    sample_every_s: float = 0.5


def check_steps(change: str, paths: Sequence[str]) -> None:
    """An eviction changes no version; a version change is in place or blue/green."""
    if change not in CHANGES:
        raise ValueError(f"change {change!r}: one of {', '.join(CHANGES)}")
    allowed = ("evict",) if change == "evict" else ("in-place", "blue-green")
    if not paths or any(p not in allowed for p in paths):
        raise ValueError(f"paths {list(paths)!r} for change {change!r}: a comma-separated list of {', '.join(allowed)}")


def versions_of(change: str, rendered_args: dict[str, Any], model: apps.LabModel, next_model: apps.LabModel | None,
                fake_engines: bool, kv_cache_memory_bytes: int | None,
                budget_utilization: float | None) -> tuple[list[apps.LabApp], dict[str, str]]:
    """The PD app of each version (two, or one for an eviction), each with its own engine ports and
    GPU share, and the workers' environment that goes with that many engines on the GPU."""
    models = [model]
    variants: tuple[Variant, ...] = (Variant(modes=PD_ONLY),)
    if change == "engine-args":
        variants = (Variant("v1", PD_ONLY), Variant("v2", PD_ONLY, engine_kwargs=ENGINE_ARGS_CHANGE))
    elif change == "model":
        if next_model is None:
            raise ValueError("a model change needs the next model")
        models = [model, next_model]
    built = lab_apps_placed(rendered_args, models, fake_engines, kv_cache_memory_bytes, budget_utilization,
                            variants=variants)
    env = apps.lab_environment(models, variants=variants, per_app=apps.engines_per_app(rendered_args))
    return built, env


@dataclass
class _UpdateRun:
    """What the steps share: the versions, the proxy and the load, Serve's clock offset."""

    versions: list[apps.LabApp]
    proxy: SwitchingProxy
    load: faults.SteadyLoad
    times: UpdateTimes
    started: float
    wall_offset: float  # Serve's log times → the lab's clock

    def log(self, message: str) -> None:
        runner._log(message, self.started)

    def other(self, serving: apps.LabApp) -> apps.LabApp:
        """The version the serving app does not run (by its args: an in-place step keeps the name)."""
        return next(v for v in self.versions if v.args != serving.args)


def _decode_replicas(app: str, decode: str) -> frozenset[str]:
    return faults.observe(app, controller=False).running.get(decode, frozenset())


def _wait_served(app: str, decode: str, old: frozenset[str], run: _UpdateRun,
                 since: float) -> tuple[str, float] | None:
    """(replica, when) of the first successful call of a decode replica of `app` not in `old`, or None
    when none served within the timeout from `since`."""
    while time.perf_counter() - since < run.times.new_version_timeout_s:
        new = sorted(_decode_replicas(app, decode) - old)
        found = first_served(app, decode, new, run.wall_offset) if new else None
        if found is not None:
            return found[0], found[1]
        time.sleep(run.times.sample_every_s)
    return None


def _blue_green(serving: apps.LabApp, green: apps.LabApp, run: _UpdateRun, marks: dict[str, float]) -> dict[str, Any]:
    runner._deploy([green])
    ready = runner._wait_ready([green], run.times.new_version_timeout_s, run.started)[green.name]
    if "ready_after_s" not in ready:
        return {"green": ready}
    marks["green_running"] = time.perf_counter()
    marks["switched"] = run.proxy.switch(green.route_prefix)
    run.log(f"update: {green.name} RUNNING, new connections go to it")
    from ray import serve

    time.sleep(max(0.0, marks["switched"] + run.times.deletion_delay_s - time.perf_counter()))
    still_open = run.proxy.open_connections(serving.route_prefix)
    serve.delete(serving.name)
    marks["old_deleted"] = time.perf_counter()
    run.log(f"update: {serving.name} deleted, {still_open} connection(s) still open to it")
    return {"green": ready, "connections_to_old_open_at_deletion": still_open,
            "connections_to_old_after_switch": sum(1 for c in run.proxy.connections
                                                   if c.target == serving.route_prefix
                                                   and c.opened_at >= marks["switched"])}


def _step(path: str, serving: apps.LabApp, run: _UpdateRun) -> tuple[dict[str, Any], apps.LabApp]:
    """One update under the load; its document and the app that serves after it."""
    decode = faults.deployment_names(serving.args)["decode"]
    step_start = time.perf_counter()
    time.sleep(run.times.before_s)
    old = _decode_replicas(serving.name, decode)
    marks = {"changed": time.perf_counter()}
    detail: dict[str, Any] = {}
    if path == "evict":
        target = serving
        killed = faults.inject("decode-replica", serving.name, faults.deployment_names(serving.args))
        detail = {"killed_pid": killed["killed_pid"], "deployment": killed["deployment"]}
    elif path == "in-place":
        target = dataclasses.replace(run.other(serving), name=serving.name, route_prefix=serving.route_prefix)
        runner._deploy([target])
    else:
        target = run.other(serving)
        old = frozenset()  # every replica of the green application is new
    run.log(f"update: {path} from {serving.name} ({version_label(serving)}) to {target.name} ({version_label(target)})")
    if path == "blue-green":
        detail = _blue_green(serving, target, run, marks)
    served = _wait_served(target.name, decode, old, run, marks["changed"]) if path != "blue-green" or \
        "switched" in marks else None
    if served is not None:
        marks["new_version_served"] = served[1]
    run.log(f"update: new version served after {after(marks['changed'], marks.get('new_version_served'))} s")
    done = marks["update_done"] = time.perf_counter()  # served (or timed out) and, blue/green, the old deleted
    time.sleep(run.times.after_s)
    marks["end"] = time.perf_counter()
    samples = [s for s in run.load.snapshot() if step_start <= s.start < marks["end"]]
    document = step_document(path, samples, step_start, marks, done, run.times.silence_limit_s)
    document.update(source=version_label(serving), target=version_label(target), app_after=target.name,
                    new_version_replica=served[0] if served else None, **detail)
    return document, target if served is not None or path != "blue-green" else serving


def version_label(app: apps.LabApp) -> str:
    """Which version an app runs: its model and the engine args its variant changes."""
    changed = dict(app.variant.engine_kwargs)
    return f"{app.model.key}{' ' + str(changed) if changed else ''}"


def after(origin: float, at: float | None) -> float | None:
    return None if at is None else round(at - origin, 3)


def _latency(samples: Sequence[RequestSample]) -> dict[str, Any]:
    summary = summarize(samples)
    return {"requests": summary["requests"],
            "ttft_p99_s": (summary["ttft_s"] or {}).get("p99"), "tpot_p99_s": (summary["tpot_s"] or {}).get("p99"),
            "e2e_max_s": max((s.e2e for s in samples if s.ok), default=None)}


def step_document(path: str, samples: Sequence[RequestSample], step_start: float, marks: dict[str, float],
                  done: float, silence_limit_s: float) -> dict[str, Any]:
    """A step's arithmetic (pure): its requests before the change (ended before it), during (open at
    the change or started before the update was done) and after; failures; the longest silence before
    and during; the marks in seconds from the change; the verdict."""
    changed = marks["changed"]
    before = [s for s in samples if s.end < changed]
    during = [s for s in samples if s.end >= changed and s.start < done]
    later = [s for s in samples if s.start >= done]
    hit = recovery.outage(samples, changed)
    silence = {"before": recovery.longest_silence(samples, step_start, changed),
               "during": recovery.longest_silence(samples, changed, done)}
    failed = sum(1 for s in samples if not s.ok)
    served_after = after(changed, marks.get("new_version_served"))
    kept_serving = failed == 0 and silence["during"] is not None and silence["during"] <= silence_limit_s
    return {
        "path": path,
        "marks_after_change_s": {k: after(changed, v) for k, v in marks.items()},
        "new_version_serves_after_s": served_after,
        "requests": {"sent": len(samples), "failed": failed, "errors": hit["errors"], "outage": hit},
        "latency": {"before": _latency(before), "during": _latency(during), "after": _latency(later)},
        "longest_silence_s": silence,
        "verdict": {"new_version_served": served_after is not None, "kept_serving": kept_serving,
                    "silence_limit_s": silence_limit_s},
        "samples_origin": "seconds from the change",
        "samples": runner.raw_samples(list(samples), origin=changed),
    }


def run_update(change: str, paths: Sequence[str], *, rendered_args: dict[str, Any], source: str,
               model: apps.LabModel, out_dir: Path, next_model: apps.LabModel | None = None,
               fake_engines: bool = False, load: faults.LoadSpec = DEFAULT_LOAD,
               times: UpdateTimes = UpdateTimes(), ready_timeout_s: float = 480,
               extra_env: dict[str, str] | None = None, kv_cache_memory_bytes: int | None = None,
               budget_utilization: float | None = None) -> dict[str, Any]:
    """Deploy the first version, run the load through the proxy, each path in turn; the results
    document (written to `update-result.json` after every step)."""
    check_steps(change, paths)
    if load.rate_per_s is None:
        raise ValueError("the update run's load is open-loop: give it rate_per_s")
    started = time.perf_counter()
    built, env = versions_of(change, rendered_args, model, next_model, fake_engines, kv_cache_memory_bytes,
                             budget_utilization)
    env = {**env, **(extra_env or {})}
    results = runner.Results(out_dir / "update-result.json", {
        "schema": RESULT_SCHEMA, **provenance(),
        "engines": "fake (lab/fake_engine.py): CPU rehearsal, stand-in numbers, no GPU result" if fake_engines
        else "vLLM",
        "host": {"gpu": gpu(), "cpus": os.cpu_count()}, "versions": versions(),
        "stack": {"source": source, "rendered_pd_serving_args": rendered_args},
        "change": change, "paths": list(paths), "load": asdict(load), "times": asdict(times),
        "app_versions": {a.name: {"route_prefix": a.route_prefix, "version": version_label(a),
                                  "overlays": a.overlays} for a in built},
        "environment": env, "started_at": datetime.now(UTC).isoformat(timespec="seconds"), "steps": []})
    data = results.data
    ray_address = os.environ.get("RAY_ADDRESS")
    ray_init(fake_engines, env)
    from ray import serve

    proxy = None
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": apps.HTTP_PORT})
        serving = built[0]
        runner._deploy([serving])
        data["ready"] = runner._wait_ready([serving], ready_timeout_s, started)
        results.save()
        if "ready_after_s" not in data["ready"][serving.name]:
            data["verdict"] = {"passed": False, "why": "the first version did not become ready"}
            return data
        proxy = SwitchingProxy(apps.HTTP_PORT, serving.route_prefix).start()
        steady = faults.SteadyLoad(proxy.base_url, serving.model_id, load, model.prompt_token_range).start()
        run = _UpdateRun(built, proxy, steady, times, started,
                         wall_offset=time.time() - time.perf_counter())
        try:
            for path in paths:
                step, serving = _step(path, serving, run)
                data["steps"].append(step)
                results.save()
        finally:
            steady.stop()
        data["verdict"] = run_verdict(data["steps"])
        return data
    except Exception as error:  # the document keeps what ran and says why it stopped
        data["verdict"] = {"passed": False, "error": f"{type(error).__name__}: {error}"}
        raise
    finally:
        if proxy is not None:
            proxy.stop()
        data["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        results.save()
        ray_outputs.write_log_excerpt(ray_outputs.ray_log_dir(), out_dir / "update-ray-log-excerpt.txt")
        stop_ray(ray_address)
        runner._log("shut down", started)


def run_verdict(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Passed: every step's new version served, and every blue/green step kept serving (what the prod
    stack's NewCluster upgrade is for). An in-place step or an eviction with one replica per phase is
    expected to stop serving for a while: its `kept_serving` is reported, not required."""
    checks = {}
    for number, step in enumerate(steps, 1):
        checks[f"{number}:{step['path']}:new_version_served"] = step["verdict"]["new_version_served"]
        if step["path"] == "blue-green":
            checks[f"{number}:blue-green:kept_serving"] = step["verdict"]["kept_serving"]
    return {"checks": checks, "passed": bool(checks) and all(checks.values())}
