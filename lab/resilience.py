"""The lab's resilience runs on one host: faults under load, the soak, bad requests, and the bench
side by side, each on the stack's PD app.

`run_resilience(kinds, ...)` starts Ray and Serve, deploys the stack's PD app (its rendered args with
the lab overlay) and, where faults are injected, a colocated baseline of the same model
(`apps.lab_apps`), waits until they are ready, runs each kind in order on that one deployment,
writes `<kind>-result.json` after every step, and shuts down:

- `bench-compare`: `lab.bench_compare` — `pdctl bench` beside `vllm bench serve` on the PD app;
- `bad-requests`: `lab.bad_requests` — the list, a burst, a normal request, no replica restart;
- `faults`: `lab.faults` — each fault in turn under a steady mixed load;
- `soak`: the steady load for `duration_s`, the serving processes' and GPUs' memory sampled;
- `scaling`: `lab.scaling` — a load ramp under the stack's rendered autoscaling config: decode
  from 1 to 2 replicas and back, prefill watched, requests counted through both.

One deployment for several kinds saves its start-up (minutes on a GPU host) per kind; a kind that
runs after `faults` meets replicas that were restarted, as a production endpoint would.

With `fake_engines` (CPU rehearsal) the engines are `lab.fake_engine` and the engines' placement
bundles hold no GPU; everything else runs as on the GPU host. Results of a rehearsal say so.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import apps, bad_requests, bench_compare, faults, ray_outputs, runner, scaling, soak
from lab.overlay import GiB
from lab.provenance import gpu, versions
from lab.recovery import Observation
from lab.variants import Variant
from measure.latency import RequestSample, summarize

KINDS = ("bench-compare", "bad-requests", "faults", "soak", "scaling")
RESULT_SCHEMA = "lab-resilience-result/1"
BURST_SIZE = 256
FAKE_ENGINE_CPUS = 8
DEFAULT_LOAD = faults.LoadSpec()
DEFAULT_TIMES = faults.FaultTimes()
DEFAULT_RAMP = scaling.Ramp()


@dataclass(frozen=True)
class RunOptions:
    """What the kinds take besides the deployment."""

    fault_names: tuple[str, ...] = faults.FAULTS
    load: faults.LoadSpec = DEFAULT_LOAD
    times: faults.FaultTimes = DEFAULT_TIMES
    duration_s: float = 600.0  # soak
    sample_every_s: float = 5.0
    warmup_s: float = 60.0
    burst_size: int = BURST_SIZE
    bench_requests: int = 128  # bench-compare: timed requests per tool and round
    bench_concurrency: int = 8  # bench-compare: requests in flight
    bench_rounds: int = 3  # bench-compare: rounds of both tools, order alternating; medians judged
    ramp: scaling.Ramp = DEFAULT_RAMP


def lab_apps_placed(rendered_args: dict[str, Any], models: list[apps.LabModel], fake_engines: bool,
                    kv_cache_memory_bytes: int | None, budget_utilization: float | None,
                    variants: tuple[Variant, ...] = ()) -> list[apps.LabApp]:
    """`apps.lab_apps`, each engine on the GPU budget given (none: a fixed 4 GiB KV cache); with
    `fake_engines`, placed on the CPU."""
    built = apps.lab_apps(rendered_args, models, kv_cache_memory_bytes=kv_cache_memory_bytes or 4 * GiB,
                          budget_utilization=budget_utilization, variants=variants)
    if not fake_engines:
        return built
    from lab.fake_engine import cpu_placement

    placed = []
    for app in built:
        args = copy.deepcopy(app.args)
        for role in ("prefill_config", "decode_config"):
            if role in args:
                args[role] = cpu_placement(args[role])
        if "llm_configs" in args:
            args["llm_configs"] = [cpu_placement(c) for c in args["llm_configs"]]
        placed.append(dataclasses.replace(app, args=args))
    return placed


def ray_init(fake_engines: bool, env: dict[str, str]) -> None:
    import ray

    os.environ.update(env)
    runtime_env = None
    if fake_engines:
        from lab.fake_engine import env as fake_env

        runtime_env = {"env_vars": {**fake_env(), "PYTHONPATH": os.getcwd()}}
    # Fake engines on a small CPU machine: logical CPUs for the replicas (they hardly compute).
    ray.init(_metrics_export_port=ray_outputs.METRICS_PORT, log_to_driver=False, runtime_env=runtime_env,
             resources=apps.phase_resources(),
             **({"num_gpus": 0, "num_cpus": FAKE_ENGINE_CPUS} if fake_engines else {}))
    # The state API (faults.observe) finds "the" Ray by this: there may be others on the host.
    # run_resilience puts back what was there at shutdown.
    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address


def _bench_compare(pd: apps.LabApp, model: apps.LabModel, options: RunOptions, out_dir: Path,
                   data: dict[str, Any]) -> None:
    side = bench_compare.SideBySide(base_url=pd.base_url, model=pd.model_id, tokenizer=model.path,
                                    requests=options.bench_requests, concurrency=options.bench_concurrency,
                                    seed=options.load.seed, rounds=options.bench_rounds)
    data["side_by_side"] = bench_compare.run(side, out_dir / "side-by-side")
    data["verdict"] = {"passed": bool((data["side_by_side"].get("comparison") or {}).get("agree"))}


def _bad_requests(pd: apps.LabApp, options: RunOptions, data: dict[str, Any]) -> None:
    max_model_len = int(pd.args["decode_config"]["engine_kwargs"]["max_model_len"])

    def replicas() -> dict[str, frozenset[str]]:
        return dict(faults.observe(pd.name).running)

    data["bad_requests"] = asyncio.run(bad_requests.run_bad_requests(
        pd.base_url, pd.model_id, max_model_len, burst_size=options.burst_size, replicas=replicas))
    data["verdict"] = {"passed": data["bad_requests"]["passed"]}


def _soak(pd: apps.LabApp, model: apps.LabModel, options: RunOptions, data: dict[str, Any],
          started: float) -> None:
    names = faults.deployment_names(pd.args)
    steady = faults.SteadyLoad(pd.base_url, pd.model_id, options.load, model.prompt_token_range).start()
    try:
        sampler = soak.MemorySampler(lambda: soak.memory_sample(pd.name, list(names.values())),
                                     options.sample_every_s).start()
        time.sleep(options.duration_s)
        series = sampler.stop()
    finally:  # the load stops with the soak, whatever ended it
        requests = summarize(steady.stop())["requests"]
    trends = soak.trends(series, options.warmup_s)
    data["soak"] = {"duration_s": options.duration_s, "sample_every_s": options.sample_every_s,
                    "warmup_s": options.warmup_s, "requests": requests, "memory": trends,
                    "series": {k: [(round(t - started, 1), round(v, 1)) for t, v in points]
                               for k, points in series.items()}}
    data["verdict"] = soak.soak_verdict(requests["failed"], requests["succeeded"], trends)


def _faults(pd: apps.LabApp, colocated: apps.LabApp, model: apps.LabModel, options: RunOptions,
            data: dict[str, Any], save: Callable[[], None], log: Callable[[str], None]) -> None:
    wl = apps.Workload()
    baseline = asyncio.run(runner._greedy_outputs(colocated, wl))

    def greedy_check() -> dict[str, Any]:
        result = runner.compare_greedy_outputs(baseline, asyncio.run(runner._greedy_outputs(pd, wl)), wl)
        return {k: v for k, v in result.items() if k != "per_sequence"}

    steady = faults.SteadyLoad(pd.base_url, pd.model_id, options.load, model.prompt_token_range).start()
    fault_run = faults.FaultRun(app=pd.name, names=faults.deployment_names(pd.args), load=steady,
                                scrape_metrics=ray_outputs.scrape_metrics, log_dir=ray_outputs.ray_log_dir(),
                                greedy_check=greedy_check, times=options.times)
    data["faults"] = []
    for fault in options.fault_names:
        try:
            data["faults"].append(faults.run_fault(fault, fault_run, log))
        except RuntimeError as error:  # nothing to kill: say so, go on
            data["faults"].append({"fault": fault, "error": str(error), "recovered": False})
        save()
    data["load_summary"] = summarize(steady.stop())["requests"]
    data["verdict"] = faults.verdict([f for f in data["faults"] if "error" not in f])
    data["verdict"]["passed"] = data["verdict"]["passed"] and not any("error" in f for f in data["faults"])


def _replica_logs(app: str, deployment: str) -> dict[str, list[Path]]:
    """Where each replica's Serve access lines and engine start can be, by replica id: its Serve log
    file (as Serve's replica details name it) and its Ray worker's stderr and stdout. The worker's
    stderr is needed on a GPU: in the H200 runs the PD replicas' Serve log files stop at vLLM's engine
    start (the access lines of their requests reach only the worker's stderr), the colocated
    replicas' do not; vLLM's engine core, a child of the replica, logs to the worker's stdout."""
    listed = (faults.serve_details() or {}).get("applications", {}).get(app, {}).get("deployments", {})
    log_dir, logs = ray_outputs.ray_log_dir(), {}
    for replica in listed.get(deployment, {}).get("replicas", []):
        paths = [log_dir / replica["log_file_path"].lstrip("/")] if replica.get("log_file_path") else []
        if replica.get("worker_id"):
            paths += sorted(log_dir.glob(f"worker-{replica['worker_id']}-*.err"))
            paths += sorted(log_dir.glob(f"worker-{replica['worker_id']}-*.out"))
        logs[replica["replica_id"]] = paths
    return logs


def _ok_lines(path: Path) -> int | None:
    return len(scaling.served_ok_times(path.read_text(errors="replace"))) if path.is_file() else None


def first_served(app: str, deployment: str, replicas: Sequence[str],
                  wall_offset: float) -> tuple[str, float, float] | None:
    """(replica, time on the lab's clock, seconds the call took) of the earliest successful call in
    the access lines of `replicas`; None: none served yet."""
    logs, found = _replica_logs(app, deployment), []
    for replica in replicas:
        for path in logs.get(replica, []):
            if path.is_file():
                text = path.read_text(errors="replace")
                found += [(end - wall_offset, replica, took) for end, took in scaling.served_ok_calls(text)]
    if not found:
        return None
    end, replica, took = min(found)
    return replica, end, took


def _engine_starts(logs: dict[str, list[Path]], engine_kwargs: dict[str, Any],
                   wall_offset: float) -> dict[str, dict[str, Any]]:
    """Each replica's engine start as its logs tell it (scaling.engine_start), times on the lab's clock."""
    found = {}
    for replica, paths in logs.items():
        text = "\n".join(p.read_text(errors="replace") for p in paths if p.is_file())
        start = scaling.engine_start(text, engine_kwargs)
        at = start.pop("engine_started_at")
        found[replica] = {**start, "engine_started_at": None if at is None else at - wall_offset}
    return found


def _decisions(app: str, deployment: str, wall_offset: float) -> list[dict[str, Any]]:
    """The Serve controller's scaling decisions for `deployment` (its logs), times on the lab's clock."""
    found = []
    for log in sorted((ray_outputs.ray_log_dir() / "serve").glob("controller_*.log")):
        found += scaling.decisions(log.read_text(errors="replace"), app, deployment)
    return sorted(({**d, "at": d["at"] - wall_offset} for d in found), key=lambda d: d["at"])


@dataclass
class _ScalingRun:
    """One scaling run as it goes: Serve's observations, the new decode replica's first service and the
    ramp's marks (perf_counter times)."""

    pd: apps.LabApp
    model: apps.LabModel
    ramp: scaling.Ramp
    decode: str
    wall_offset: float  # Serve's log and decision times → the lab's clock
    origin: float
    observations: list[Observation] = field(default_factory=list)
    served: list[tuple[str, float]] = field(default_factory=list)  # the access log's witness: (replica, first OK)
    first_call_s: float | None = None  # how long that first OK call took
    counted: list[tuple[str, float]] = field(default_factory=list)  # the request counter's: (replica, first > 0)
    step: float = 0.0
    drop: float = 0.0
    end: float = 0.0
    scaled_up_at: float | None = None
    scaled_down_at: float | None = None

    def watch(self, seconds: float, done: Callable[[], bool] = lambda: False) -> bool:
        """Observe Serve every sample_every_s for `seconds` or until `done()`."""
        end = time.perf_counter() + seconds
        while True:
            self.observations.append(faults.observe(self.pd.name, controller=False))
            if done():
                return True
            if time.perf_counter() >= end:
                return False
            time.sleep(self.ramp.sample_every_s)

    def load(self, concurrency: int, seed: int) -> faults.SteadyLoad:
        ramp = self.ramp
        spec = faults.LoadSpec(concurrency=concurrency, short_prompt_tokens=ramp.prompt_tokens,
                               long_prompt_tokens=ramp.prompt_tokens, output_tokens=ramp.output_tokens, seed=seed)
        return faults.SteadyLoad(self.pd.base_url, self.pd.model_id, spec, self.model.prompt_token_range).start()

    def decode_requests(self) -> dict[str, float]:
        return scaling.requests_per_replica(ray_outputs.scrape_metrics(), self.pd.name, self.decode)

    def new_replicas(self) -> list[str]:
        return scaling.new_replicas(self.observations, self.step, self.decode)

    def scaled_up_and_served(self) -> bool:
        if scaling.first_at(self.observations, self.step, self.decode, scaling.SCALED_TO, at_least=True) is None:
            return False
        new = self.new_replicas()
        first = first_served(self.pd.name, self.decode, new, self.wall_offset)
        self.served[:] = [first[:2]] if first else []
        self.first_call_s = first[2] if first else None
        if not self.counted:
            requests = self.decode_requests()
            self.counted[:] = [(r, time.perf_counter()) for r in new if requests.get(r, 0) > 0][:1]
        return bool(self.served or self.counted)

    def back_to_one(self) -> float | None:
        return scaling.first_at(self.observations, self.drop, self.decode, 1, at_least=False)


def _scaling(pd: apps.LabApp, model: apps.LabModel, options: RunOptions, data: dict[str, Any],
             log: Callable[[str], None]) -> None:
    ramp, names = options.ramp, faults.deployment_names(pd.args)
    autoscaling = scaling.check_ramp(ramp, pd.args["decode_config"])
    run = _ScalingRun(pd, model, ramp, names["decode"], wall_offset=time.time() - time.perf_counter(),
                      origin=time.perf_counter())
    low = run.load(ramp.low_concurrency, ramp.seed)
    run.watch(ramp.low_s)
    run.step = time.perf_counter()
    log(f"scaling: load step {ramp.low_concurrency} → {ramp.high_concurrency} clients")
    high = run.load(ramp.high_concurrency - ramp.low_concurrency, ramp.seed + 1)
    run.watch(ramp.up_timeout_s, run.scaled_up_and_served)
    run.scaled_up_at = scaling.first_at(run.observations, run.step, run.decode, scaling.SCALED_TO, at_least=True)
    log(f"scaling: decode {scaling.SCALED_TO} RUNNING after {scaling.after(run.step, run.scaled_up_at)} s, new "
        f"replica served after {scaling.after(run.step, run.served[0][1] if run.served else None)} s (access log), "
        f"{scaling.after(run.step, run.counted[0][1] if run.counted else None)} s (request counter)")
    run.watch(ramp.hold_s)
    run.drop = time.perf_counter()
    requests_at_drop = run.decode_requests()
    replica_logs = _replica_logs(pd.name, run.decode)
    new_logs = {r: replica_logs.get(r, []) for r in run.new_replicas()}
    engines = _engine_starts(replica_logs, pd.args["decode_config"]["engine_kwargs"], run.wall_offset)
    high.stop()  # its clients finish the requests they are in
    log(f"scaling: load drop to {ramp.low_concurrency} client(s)")
    if run.scaled_up_at is not None and ramp.judges_scale_down():
        run.watch(ramp.down_timeout_s, lambda: run.back_to_one() is not None)
    run.scaled_down_at = run.back_to_one() if run.scaled_up_at else None
    log(f"scaling: decode back to 1 RUNNING after {scaling.after(run.drop, run.scaled_down_at)} s")
    run.watch(ramp.after_s)
    run.end = time.perf_counter()
    samples = low.stop() + high.snapshot()
    _record_scaling(run, names, autoscaling, samples, requests_at_drop, new_logs, engines, data)


def _record_scaling(run: _ScalingRun, names: dict[str, str], autoscaling: dict[str, Any],
                    samples: list[RequestSample], requests_at_drop: dict[str, float],
                    new_logs: dict[str, list[Path]], engines: dict[str, dict[str, Any]], data: dict[str, Any]) -> None:
    """The scaling run's document and verdict: replica counts, Serve's decisions, requests by part of the ramp."""
    decisions = _decisions(run.pd.name, run.decode, run.wall_offset)
    counts = scaling.replica_counts(run.observations, names)
    requests = scaling.requests_by_phase(samples, {"low": (run.origin, run.step), "high": (run.step, run.drop),
                                                   "scale_down": (run.drop, run.end)})
    served_at = min([at for _, at in run.served + run.counted], default=None)
    data["scaling"] = {
        "ramp": asdict(run.ramp),
        "autoscaling_config": {"decode": autoscaling, "prefill": run.pd.args["prefill_config"]["deployment_config"]},
        "deployments": names,
        "marks_s": {"step": scaling.after(run.origin, run.step), "drop": scaling.after(run.origin, run.drop),
                    "end": scaling.after(run.origin, run.end)},
        **_scale_up_and_down(run, decisions, requests_at_drop, new_logs),
        "new_replica_start": _new_replica_start(run, decisions, engines),
        "failed_requests": sum(r["failed"] for r in requests.values()),
        "serving_judged_by": "the new replica's first `CALL ... OK` line (Serve's access log, in its Serve log "
                             "file or its worker's stderr), "
                             f"or its `{scaling.REQUEST_COUNTER}` above 0 in Ray's /metrics, whichever came first",
        "replicas": counts,
        "timeline": scaling.timeline(run.observations, names, run.origin),
        "requests": requests,
        "serve_decisions": [{**d, "at": scaling.after(run.origin, d["at"])} for d in decisions],
    }
    data["verdict"] = scaling.verdict(counts, scaled_up_at=run.scaled_up_at, new_replica_served_at=served_at,
                                      scaled_down_at=run.scaled_down_at, requests=requests,
                                      judge_scale_down=run.ramp.judges_scale_down())


def _new_replica_start(run: _ScalingRun, decisions: list[dict[str, Any]],
                       engines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The new decode replica from Serve's decision to its first token, and its engine beside the
    first replica's (KV blocks; whether a compile cache answered). Its first token came after its
    first successful call began and by the time that call ended: both bounds are kept."""
    up = scaling.first_decision(decisions, run.step, up=True)
    decided: float | None = up["at"] if up else None
    new = run.served[0] if run.served else None
    started = {r: e["engine_started_at"] for r, e in engines.items()}
    engines = {r: {k: v for k, v in e.items() if k != "engine_started_at"} for r, e in engines.items()}
    new_id = new[0] if new else next((r for r in run.new_replicas() if r in engines), None)
    started_at = started.get(new_id or "")
    to_engine: float | None = None
    to_token: dict[str, float | None] = {"after": None, "by": None}
    if decided is not None:
        to_engine = scaling.after(decided, started_at)
        to_token = {"after": scaling.after(decided, new[1] - (run.first_call_s or 0.0)) if new else None,
                    "by": scaling.after(decided, new[1]) if new else None}
    return {
        "decision_to_engine_started_s": to_engine,
        "decision_to_first_token_s": to_token,
        "engine": engines.get(new_id or ""),
        "first_replica_engine": next((e for r, e in engines.items() if r != new_id), None),
    }


def _scale_up_and_down(run: _ScalingRun, decisions: list[dict[str, Any]], requests_at_drop: dict[str, float],
                       new_logs: dict[str, list[Path]]) -> dict[str, Any]:
    """When Serve decided, when the replicas ran and served, from the step up and from the drop down."""
    step, drop, served, counted = run.step, run.drop, run.served, run.counted
    up, down = scaling.first_decision(decisions, step, up=True), scaling.first_decision(decisions, drop, up=False)
    return {
        "scale_up": {
            "serve_decision_after_s": scaling.after(step, (up or {}).get("at")),
            "ongoing_requests_at_decision": (up or {}).get("ongoing_requests"),
            "second_replica_running_after_s": scaling.after(step, run.scaled_up_at),
            "new_replica": next((r for r, _ in served + counted), None),
            "new_replica_first_request_ok_after_s": scaling.after(step, served[0][1] if served else None),
            "new_replica_requests_counted_after_s": scaling.after(step, counted[0][1] if counted else None),
            # Per file: the successful calls it holds (None: no such file), not just that it exists.
            "new_replica_ok_lines": {r: {str(path): _ok_lines(path) for path in paths}
                                     for r, paths in new_logs.items()},
        },
        "decode_requests_by_replica_at_drop": requests_at_drop,
        "scale_down": {
            "serve_decision_after_s": scaling.after(drop, (down or {}).get("at")),
            "ongoing_requests_at_decision": (down or {}).get("ongoing_requests"),
            "back_to_one_running_after_s": scaling.after(drop, run.scaled_down_at),
        },
    }


@dataclass(frozen=True)
class _Deployment:
    """The deployed apps and what each kind run on them takes."""

    pd: apps.LabApp
    colocated: apps.LabApp | None  # deployed only where faults are injected
    model: apps.LabModel
    options: RunOptions
    out_dir: Path
    started: float

    def log(self, message: str) -> None:
        runner._log(message, self.started)


def run_resilience(kinds: Sequence[str], *, rendered_args: dict[str, Any], source: str, model: apps.LabModel,
                   out_dir: Path, fake_engines: bool = False, options: RunOptions = RunOptions(),
                   ready_timeout_s: float = 420, compile_caches: dict[str, Any] | None = None,
                   extra_env: dict[str, str] | None = None, kv_cache_memory_bytes: int | None = None,
                   budget_utilization: float | None = None) -> dict[str, dict[str, Any]]:
    """Each kind's results document, by kind (the ones that ran; a failed deploy runs none).
    `kv_cache_memory_bytes` and `budget_utilization` hold each engine to a GPU's budget (a probe-memory
    result: `lab.commands.common.kv_cache_from_probe`); none: a fixed 4 GiB KV cache.
    `extra_env` reaches Ray and every engine (the compile caches' folder: `lab.probe.compile_cache_env`,
    so a replica Serve adds finds what the first one compiled, at the same path); `compile_caches`
    says in the results what those caches held at the start (`lab.probe.prepare_caches`)."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds {list(kinds)!r}: each one of {KINDS}")
    if "scaling" in kinds:  # refused before Ray starts
        scaling.check_ramp(options.ramp, rendered_args["decode_config"])
    started = time.perf_counter()
    # The colocated baseline only where greedy outputs are compared.
    deployed = [a for a in lab_apps_placed(rendered_args, [model], fake_engines, kv_cache_memory_bytes,
                                               budget_utilization)
                if "faults" in kinds or a.mode == "pd"]
    deployment = _Deployment(pd=next(a for a in deployed if a.mode == "pd"),
                             colocated=next((a for a in deployed if a.mode == "colocated"), None),
                             model=model, options=options, out_dir=out_dir, started=started)
    env = {**apps.lab_environment([model], per_app=apps.engines_per_app(rendered_args)), **(extra_env or {})}
    common = {
        "schema": RESULT_SCHEMA,
        "engines": "fake (lab/fake_engine.py): CPU rehearsal, no GPU result" if fake_engines else "vLLM",
        "host": {"gpu": gpu(), "cpus": os.cpu_count()}, "versions": versions(),
        "stack": {"source": source, "rendered_pd_serving_args": rendered_args},
        "apps": {a.name: {"mode": a.mode, "route_prefix": a.route_prefix} for a in deployed},
        "environment": env, "compile_caches": compile_caches, "load": asdict(options.load), "sequence": list(kinds),
    }
    documents: dict[str, dict[str, Any]] = {}
    ray_address = os.environ.get("RAY_ADDRESS")
    ray_init(fake_engines, env)
    from ray import serve

    try:
        serve.start(http_options={"host": "127.0.0.1", "port": apps.HTTP_PORT})
        runner._deploy(deployed)
        ready = runner._wait_ready(deployed, ready_timeout_s, started)
        for kind in kinds:
            results = runner.Results(out_dir / f"{kind}-result.json", {
                **common, "kind": kind, "ready": ready,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds")})
            documents[kind] = results.data
            _run_kind(kind, deployment, ready, results)
        return documents
    finally:
        _shut_down(deployment, ray_address)


def _run_kind(kind: str, deployment: _Deployment, ready: dict[str, dict[str, Any]], results: runner.Results) -> None:
    """One kind on the deployment, its document saved however it ends: a kind that crashes is failed
    with its error, and the kinds after it still run."""
    data, log = results.data, deployment.log
    kind_started = time.perf_counter()
    try:
        if not all("ready_after_s" in entry for entry in ready.values()):
            data["verdict"] = {"passed": False, "why": "apps not ready"}
            return
        log(f"{kind}: start")
        pd, model, options = deployment.pd, deployment.model, deployment.options
        if kind == "bench-compare":
            _bench_compare(pd, model, options, deployment.out_dir, data)
        elif kind == "bad-requests":
            _bad_requests(pd, options, data)
        elif kind == "soak":
            _soak(pd, model, options, data, deployment.started)
        elif kind == "scaling":
            _scaling(pd, model, options, data, log)
        else:
            assert deployment.colocated is not None
            _faults(pd, deployment.colocated, model, options, data, results.save, log)
        log(f"{kind}: {'passed' if data['verdict'].get('passed') else 'FAILED'}")
    except Exception as error:  # one kind's crash must not cost the kinds after it their run
        data["verdict"] = {"passed": False, "error": f"{type(error).__name__}: {error}"}
        log(f"{kind}: FAILED with {type(error).__name__}: {error}")
    finally:
        data["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        data["wall_s"] = round(time.perf_counter() - kind_started, 1)
        results.save()


def _shut_down(deployment: _Deployment, ray_address: str | None) -> None:
    """Ray's log excerpt written, Serve and Ray shut down, RAY_ADDRESS as it was before the run."""
    ray_outputs.write_log_excerpt(ray_outputs.ray_log_dir(), deployment.out_dir / "resilience-ray-log-excerpt.txt")
    stop_ray(ray_address)
    deployment.log("shut down")


def stop_ray(ray_address: str | None) -> None:
    """Serve and Ray shut down, RAY_ADDRESS put back as it was before `ray_init`."""
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
        if ray_address is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = ray_address
