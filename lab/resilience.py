"""The lab's resilience runs on one host: faults under load, the soak, and bad requests.

`run_resilience(kind, ...)` starts Ray and Serve, deploys the stack's PD app (its rendered args with
the lab overlay) and a colocated baseline of the same model (`runner.lab_apps`), waits until both
are ready, runs `kind`, writes `<kind>-result.json` after every step, and shuts down:

- `faults`: `lab.faults` — each fault in turn under a steady mixed load;
- `soak`: the steady load for `duration_s`, the serving processes' and GPUs' memory sampled;
- `bad-requests`: `lab.bad_requests` — the list, a burst, a normal request, no replica restart.

With `fake_engines` (CPU rehearsal) the engines are `lab.fake_engine` and the engines' placement
bundles hold no GPU; everything else runs as on the GPU host. Results of a rehearsal say so.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab import bad_requests, faults, runner, soak
from lab.overlay import GiB
from measure.latency import summarize

KINDS = ("faults", "soak", "bad-requests")
RESULT_SCHEMA = "lab-resilience-result/1"
BURST_SIZE = 256
FAKE_ENGINE_CPUS = 8
DEFAULT_LOAD = faults.LoadSpec()
DEFAULT_TIMES = faults.FaultTimes()


def _apps(rendered_args: dict[str, Any], model: runner.LabModel, fake_engines: bool) -> list[runner.LabApp]:
    apps = runner.lab_apps(rendered_args, [model], kv_cache_memory_bytes=4 * GiB)
    if not fake_engines:
        return apps
    from lab.fake_engine import cpu_placement

    placed = []
    for app in apps:
        args = copy.deepcopy(app.args)
        for role in ("prefill_config", "decode_config"):
            if role in args:
                args[role] = cpu_placement(args[role])
        if "llm_configs" in args:
            args["llm_configs"] = [cpu_placement(c) for c in args["llm_configs"]]
        placed.append(runner.LabApp(app.name, app.model, app.mode, app.route_prefix, args, app.overlays))
    return placed


def _ray_init(fake_engines: bool, env: dict[str, str]) -> None:
    import ray

    os.environ.update(env)
    runtime_env = None
    if fake_engines:
        from lab.fake_engine import env as fake_env

        runtime_env = {"env_vars": {**fake_env(), "PYTHONPATH": os.getcwd()}}
    # Fake engines on a small CPU machine: logical CPUs for the five replicas (they hardly compute).
    ray.init(_metrics_export_port=runner.METRICS_PORT, log_to_driver=False, runtime_env=runtime_env,
             **({"num_gpus": 0, "num_cpus": FAKE_ENGINE_CPUS} if fake_engines else {}))
    # The state API (faults.observe) finds "the" Ray by this: there may be others on the host.
    # run_resilience puts back what was there at shutdown.
    os.environ["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address


def run_resilience(kind: str, *, rendered_args: dict[str, Any], source: str, model: runner.LabModel, out_dir: Path,
                   fake_engines: bool = False, fault_names: tuple[str, ...] = faults.FAULTS,
                   load: faults.LoadSpec = DEFAULT_LOAD, times: faults.FaultTimes = DEFAULT_TIMES,
                   duration_s: float = 600.0, sample_every_s: float = 5.0, warmup_s: float = 60.0,
                   burst_size: int = BURST_SIZE, ready_timeout_s: float = 420) -> dict[str, Any]:
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} not in {KINDS}")
    started = time.perf_counter()
    # The colocated baseline only where greedy outputs are compared.
    apps = [a for a in _apps(rendered_args, model, fake_engines) if kind == "faults" or a.mode == "pd"]
    pd = next(a for a in apps if a.mode == "pd")
    colocated = next((a for a in apps if a.mode == "colocated"), None)
    env = runner.lab_environment([model])
    results = runner.Results(out_dir / f"{kind}-result.json", {
        "schema": RESULT_SCHEMA, "kind": kind,
        "engines": "fake (lab/fake_engine.py): CPU rehearsal, no GPU result" if fake_engines else "vLLM",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"gpu": runner._gpu(), "cpus": os.cpu_count()}, "versions": runner._versions(),
        "stack": {"source": source, "rendered_pd_serving_args": rendered_args},
        "apps": {a.name: {"mode": a.mode, "route_prefix": a.route_prefix} for a in apps},
        "environment": env, "load": asdict(load),
    })
    data = results.data

    def log(message: str) -> None:
        runner._log(message, started)

    ray_address = os.environ.get("RAY_ADDRESS")
    _ray_init(fake_engines, env)
    from ray import serve

    try:
        serve.start(http_options={"host": "127.0.0.1", "port": runner.HTTP_PORT})
        runner._deploy(apps)
        data["ready"] = runner._wait_ready(apps, ready_timeout_s, started)
        results.save()
        if not all("ready_after_s" in entry for entry in data["ready"].values()):
            data["verdict"] = {"passed": False, "why": "apps not ready"}
            return data
        names = faults.deployment_names(pd.args)
        if kind == "bad-requests":
            max_model_len = int(pd.args["decode_config"]["engine_kwargs"]["max_model_len"])

            def replicas() -> dict[str, frozenset[str]]:
                return dict(faults.observe(pd.name).running)

            data["bad_requests"] = asyncio.run(bad_requests.run_bad_requests(
                pd.base_url, pd.model_id, max_model_len, burst_size=burst_size, replicas=replicas))
            data["verdict"] = {"passed": data["bad_requests"]["passed"]}
            return data
        steady = faults.SteadyLoad(pd.base_url, pd.model_id, load, model.prompt_token_range).start()
        if kind == "soak":
            sampler = soak.MemorySampler(lambda: soak.memory_sample(pd.name, list(names.values())),
                                         sample_every_s).start()
            time.sleep(duration_s)
            series = sampler.stop()
            samples = steady.stop()
            requests = summarize(samples)["requests"]
            trends = soak.trends(series, warmup_s)
            data["soak"] = {"duration_s": duration_s, "sample_every_s": sample_every_s, "warmup_s": warmup_s,
                            "requests": requests, "memory": trends,
                            "series": {k: [(round(t - started, 1), round(v, 1)) for t, v in points]
                                       for k, points in series.items()}}
            data["verdict"] = soak.soak_verdict(requests["failed"], requests["succeeded"], trends)
            return data
        wl = runner.Workload()
        assert colocated is not None
        baseline = asyncio.run(runner._greedy_outputs(colocated, wl))

        def greedy_check() -> dict[str, Any]:
            result = runner.compare_greedy_outputs(baseline, asyncio.run(runner._greedy_outputs(pd, wl)), wl)
            return {k: v for k, v in result.items() if k != "per_sequence"}

        fault_run = faults.FaultRun(app=pd.name, names=names, load=steady, scrape_metrics=runner._scrape_metrics,
                                    log_dir=runner.ray_log_dir(), greedy_check=greedy_check, times=times)
        data["faults"] = []
        for fault in fault_names:
            try:
                data["faults"].append(faults.run_fault(fault, fault_run, log))
            except RuntimeError as error:  # nothing to kill: say so, go on
                data["faults"].append({"fault": fault, "error": str(error), "recovered": False})
            results.save()
        data["load_summary"] = summarize(steady.stop())["requests"]
        data["verdict"] = faults.verdict([f for f in data["faults"] if "error" not in f])
        data["verdict"]["passed"] = data["verdict"]["passed"] and not any("error" in f for f in data["faults"])
        return data
    finally:
        data["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        data["wall_s"] = round(time.perf_counter() - started, 1)
        results.save()
        runner.write_log_excerpt(runner.ray_log_dir(), out_dir / f"{kind}-ray-log-excerpt.txt")
        import ray

        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            if ray_address is None:
                os.environ.pop("RAY_ADDRESS", None)
            else:
                os.environ["RAY_ADDRESS"] = ray_address
        log("shut down")
