"""What the front door costs in latency, and how it refuses under load, on one host (`python -m lab door`).

One deployment of the stack's PD app (its prefill and decode engines as `run` starts them: the lab
overlay, each engine on the deployment GPU's memory budget) behind two ingress apps:

- the door app: the app as the stack renders it with keys, `front_door.ingress:KeyedOpenAiIngress`
  reading a key table the lab writes (`front_door.keys.key_table_document`), its prefill and decode;
- the open app: Ray Serve LLM's own `OpenAiIngress` with the same deployment options, bound to the door
  app's decode deployment (a handle to it), so it checks no key and reaches the very same engines.

Same engines, same Serve proxy, one ingress replica each: the difference between the two paths is the
door's work in its ingress replica. Then, on that deployment:

1. timing: streamed completions (`lab.workload.run_load`, `measure.stream`) at each concurrency through
   both apps, passes alternating which app goes first, every prompt new (the prefix cache would
   otherwise flatter whichever app sends it second); every sample kept, percentiles pooled over the
   passes with each pass's own values beside them;
2. refusals under load: while `load_concurrency` clients stream through the door, requests with no
   key, a wrong key, a key revoked by rewriting the key table (after the ingress's reload period; no
   restart) and a key past its requests per minute; each answer's status, OpenAI error body and
   headers. Serve's own request counters of the decode and prefill deployments, before the load and
   after it, must have grown by exactly the requests the door let through: the refused ones never
   reached an engine. vLLM's request counter and the door's own counters are kept beside them;
3. an OpenAI SDK client made from the stack's `clientConfig` (its `base_url` swapped for this host's
   door, said so in the result) and a key gets a completion.

`door-result.json` holds every sample and answer, `door-report.md` the summary (lab/door_report.py).
With `fake_engines` (the CPU rehearsal, lab/rehearse_door_cpu.py) the engines are lab/fake_engine.py
and nothing else changes.
"""

from __future__ import annotations

import asyncio
import copy
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from front_door.keys import RELOAD_INTERVAL_S, KeyLimits, key_table_document
from lab import apps, faults, ray_outputs, runner, scaling, workload
from lab.provenance import gpu, provenance, versions
from lab.variants import Variant
from measure import prometheus
from measure.latency import distribution, summarize

RESULT_SCHEMA = "lab-door-result/1"
KEY_TABLE = "door-keys.json"
SALT = "lab"
# The keys of the run: one for the load and the timing, one with a requests-per-minute limit, one revoked
# under load. Made per run, never written down in plain text (the key table holds salted hashes).
LOAD_KEY, LIMITED_KEY, REVOKED_KEY = "lab", "limited", "revoked"
DOOR_SUFFIX, OPEN_SUFFIX = "door", "open"
VLLM_REQUESTS = "ray_vllm_request_success_total"
DOOR_REQUESTS = "ray_pd_door_requests_total"
# Counters settle when two scrapes this far apart read the same (Ray exports every METRICS_REPORT_INTERVAL_MS).
SETTLE_EVERY_S = 3.0
SETTLE_MAX_S = 30.0
PD_ONLY = Variant(modes=("pd",))


@dataclass(frozen=True)
class DoorSpec:
    """What the door run sends. `timing` is the closed-loop workload of both paths (its concurrencies,
    passes as `repeats`, requests per concurrency); the rest is the refusal phase."""

    timing: apps.Workload
    load_concurrency: int = 16
    limited_requests_per_minute: int = 3
    refused_requests: int = 3  # of each kind: no key, wrong key, revoked key, over the limit
    probe_output_tokens: int = 8
    load_lead_s: float = 1.0  # the load's clients are all in flight before the first probe


@dataclass(frozen=True)
class DoorApps:
    door: apps.LabApp
    open: apps.LabApp  # route and name only: its args are the door's (it binds to the door app's decode)

    @property
    def both(self) -> tuple[apps.LabApp, apps.LabApp]:
        return self.door, self.open


def make_keys() -> dict[str, str]:
    return {name: secrets.token_hex(24) for name in (LOAD_KEY, LIMITED_KEY, REVOKED_KEY)}


def write_key_table(path: Path, keys: Mapping[str, str], spec: DoorSpec) -> None:
    """The key table as the mounted Secret holds it, swapped in whole (as the kubelet updates a Secret)."""
    limits = {name: KeyLimits(requests_per_minute=spec.limited_requests_per_minute if name == LIMITED_KEY else None)
              for name in keys}
    staged = path.with_suffix(".new")
    staged.write_text(key_table_document(SALT, keys, limits))
    os.replace(staged, path)


def door_apps(keyed_args: dict[str, Any], model: apps.LabModel, *, kv_cache_memory_bytes: int | None,
              budget_utilization: float | None, seed: int, fake_engines: bool) -> DoorApps:
    """The door app (the stack's keyed PD app with the lab overlay, as `run` builds its PD app) and the
    open app's name and route beside it."""
    [pd] = apps.lab_apps(keyed_args, [model], kv_cache_memory_bytes=kv_cache_memory_bytes, seed=seed,
                         variants=(PD_ONLY,), budget_utilization=budget_utilization)
    args = copy.deepcopy(pd.args)
    if fake_engines:
        from lab.fake_engine import cpu_placement

        for role in ("prefill_config", "decode_config"):
            args[role] = cpu_placement(args[role])
    door = apps.LabApp(f"{pd.name}-{DOOR_SUFFIX}", model, "pd", f"{pd.route_prefix}/{DOOR_SUFFIX}", args,
                       pd.overlays, pd.variant)
    open_app = apps.LabApp(f"{pd.name}-{OPEN_SUFFIX}", model, "pd", f"{pd.route_prefix}/{OPEN_SUFFIX}", args,
                           pd.overlays, pd.variant)
    return DoorApps(door, open_app)


def _open_ingress(door: apps.LabApp):
    """Ray Serve LLM's own ingress, with the options the door's ingress has, bound to the door app's decode."""
    from ray import serve
    from ray.llm._internal.common.dict_utils import maybe_apply_llm_deployment_config_defaults
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
    from ray.llm._internal.serve.core.configs.openai_api_models import to_model_metadata
    from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress, make_fastapi_ingress

    decode = LLMConfig.model_validate(copy.deepcopy(door.args["decode_config"]))
    options = maybe_apply_llm_deployment_config_defaults(OpenAiIngress.get_deployment_options([decode]),
                                                         copy.deepcopy(door.args.get("ingress_deployment_config")))
    handle = serve.get_deployment_handle(faults.deployment_names(door.args)["decode"], app_name=door.name)
    return serve.deployment(make_fastapi_ingress(OpenAiIngress), **options).bind(
        llm_deployments={decode.model_id: handle},
        model_cards={decode.model_id: to_model_metadata(decode.model_id, decode)})


def _deploy_open(pair: DoorApps) -> None:
    from ray import serve

    serve.run_many([serve.RunTarget(target=_open_ingress(pair.door), name=pair.open.name,
                                    route_prefix=pair.open.route_prefix)],
                   wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)


# ── timing ────────────────────────────────────────────────────────────────────────────────────

def _prompts(app_index: int, model: apps.LabModel, spec: apps.Workload, count: int, concurrency: int,
             repeat: int) -> list[list[int]]:
    """Prompts no other pass, concurrency or app sends (one deployment's prefix cache serves both apps)."""
    low, high = model.prompt_token_range
    return workload.random_prompts(count, spec.prompt_tokens, low=low, high=high,
                                   seed=spec.seed + 1000 * concurrency + 100_000 * repeat + 10_000_000 * app_index)


async def _timed_pass(app: apps.LabApp, app_index: int, key: str, spec: apps.Workload, concurrency: int,
                      repeat: int) -> dict[str, Any]:
    count = spec.requests_at(concurrency)
    prompts = _prompts(app_index, app.model, spec, count, concurrency, repeat)
    samples, wall = await workload.run_load(app.base_url, app.model_id, prompts, spec.output_tokens, concurrency,
                                            api_key=key)
    return {"app": app.name, "path": DOOR_SUFFIX if app_index == 0 else OPEN_SUFFIX, "concurrency": concurrency,
            "repeat": repeat, "requests": count, "prompt_tokens": spec.prompt_tokens,
            "output_tokens": spec.output_tokens, "summary": summarize(samples, wall_seconds=wall),
            "samples": runner.raw_samples(samples)}


def pass_order(repeat: int, concurrency_index: int) -> tuple[int, int]:
    """Which app goes first (0: the door, 1: the open app): alternating from one timed pass to the next."""
    return (0, 1) if (repeat + concurrency_index) % 2 else (1, 0)


def _timing(run: _DoorRun) -> None:
    spec, data = run.spec, run.data
    for repeat in range(1, spec.repeats + 1):  # pass by pass, so a run cut short loses whole passes
        for index, concurrency in enumerate(spec.concurrencies):
            if run.time_left() < run.pass_reserve_s:
                data["not_done"].append(f"c={concurrency} pass {repeat}: out of time")
                continue
            for app_index in pass_order(repeat, index):
                app = run.apps.both[app_index]
                row = asyncio.run(_timed_pass(app, app_index, run.keys[LOAD_KEY], spec, concurrency, repeat))
                data["timing"].append(row)
                run.save()
                s = row["summary"]
                run.log(f"{row['path']} c={concurrency} pass {repeat}: ok={s['requests']['succeeded']}/"
                        f"{s['requests']['total']} ttft_p50={_ms(s['ttft_s'])} e2e_p50={_ms(s['e2e_s'])}")


def pooled(rows: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    """mean, p50, p90, p99 over every successful request of `rows` (the passes' raw samples pooled)."""
    return distribution([s[key] for r in rows for s in r["samples"] if not s["error"] and s[key] is not None])


def latency_comparison(timing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per concurrency: each path's TTFT and E2E pooled and per pass, and the door's difference (door − open)
    pooled and per pass (passes paired by number)."""
    out = []
    for concurrency in sorted({r["concurrency"] for r in timing}):
        rows = {path: sorted((r for r in timing if r["concurrency"] == concurrency and r["path"] == path),
                             key=lambda r: r["repeat"]) for path in (DOOR_SUFFIX, OPEN_SUFFIX)}
        entry: dict[str, Any] = {"concurrency": concurrency,
                                 "requests": {path: sum(len(r["samples"]) for r in rs) for path, rs in rows.items()}}
        for key in ("ttft_s", "e2e_s"):
            door, open_ = pooled(rows[DOOR_SUFFIX], key), pooled(rows[OPEN_SUFFIX], key)
            per_pass = {path: {r["repeat"]: {q: dist[q] for q in ("p50", "p99")}
                               for r in rs if (dist := pooled([r], key))} for path, rs in rows.items()}
            paired = sorted(set(per_pass[DOOR_SUFFIX]) & set(per_pass[OPEN_SUFFIX]))
            entry[key] = {
                "pooled": {DOOR_SUFFIX: door, OPEN_SUFFIX: open_},
                "door_minus_open": {q: door[q] - open_[q] for q in ("p50", "p99")} if door and open_ else None,
                "per_pass": per_pass,
                "door_minus_open_per_pass": {q: [per_pass[DOOR_SUFFIX][n][q] - per_pass[OPEN_SUFFIX][n][q]
                                                 for n in paired] for q in ("p50", "p99")},
            }
        out.append(entry)
    return out


# ── refusals under load ───────────────────────────────────────────────────────────────────────

async def _probe(app: apps.LabApp, key: str | None, spec: DoorSpec, seed: int) -> dict[str, Any]:
    """One non-streamed completion through the door with `key` (None: no Authorization header)."""
    low, high = app.model.prompt_token_range
    prompt = workload.random_prompts(1, spec.timing.prompt_tokens, low=low, high=high, seed=seed)[0]
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    started = time.perf_counter()
    response = await workload.send_json(app.base_url, "/v1/completions", workload.completion_body(
        app.model_id, prompt, spec.probe_output_tokens, stream=False), headers)
    body = workload.json_or_text(response)
    kept = {name: response.headers[name] for name in ("retry-after", "www-authenticate") if name in response.headers}
    return {"status": response.status_code, "ms": round(1000 * (time.perf_counter() - started), 1),
            "headers": kept, "error": body.get("error") if isinstance(body, dict) else str(body)[:300],
            "completion_tokens": (body.get("usage") or {}).get("completion_tokens") if isinstance(body, dict) else None}


async def _refusals_under_load(run: _DoorRun) -> dict[str, Any]:
    """The load through the door, the probes while it runs, the load stopped; every answer kept."""
    spec, door, keys = run.door, run.apps.door, run.keys
    timing = spec.timing
    stop = asyncio.Event()
    # More prompts than the probes can outlast: the load ends when `stop` is set.
    prompts = _prompts(0, door.model, timing, 200 * spec.load_concurrency, spec.load_concurrency, 0)
    load = asyncio.create_task(workload.run_load(door.base_url, door.model_id, prompts, timing.output_tokens,
                                                 spec.load_concurrency, api_key=keys[LOAD_KEY], stop=stop))
    await asyncio.sleep(spec.load_lead_s)
    seeds = iter(range(timing.seed + 90_000_000, timing.seed + 91_000_000))
    n = spec.refused_requests

    async def probes(key: str | None, count: int) -> list[dict[str, Any]]:
        return [await _probe(door, key, spec, next(seeds)) for _ in range(count)]

    answers: dict[str, Any] = {
        "no_key": await probes(None, n),
        "wrong_key": await probes(secrets.token_hex(24), n),
        # The limited key's minute, used up at once, then refused.
        "limited_admitted": list(await asyncio.gather(*(_probe(door, keys[LIMITED_KEY], spec, next(seeds))
                                                        for _ in range(spec.limited_requests_per_minute)))),
    }
    answers["over_limit"] = await probes(keys[LIMITED_KEY], n)
    answers["revoked_before"] = await probes(keys[REVOKED_KEY], 1)
    write_key_table(run.key_table, {k: v for k, v in keys.items() if k != REVOKED_KEY}, spec)
    revoked_at = time.perf_counter()
    await asyncio.sleep(RELOAD_INTERVAL_S + 0.5)  # the ingress looks at the file every RELOAD_INTERVAL_S
    answers["revoked_key"] = await probes(keys[REVOKED_KEY], n)
    answers["revoked_waited_s"] = round(time.perf_counter() - revoked_at, 2)
    load_still_running = not load.done()
    stop.set()
    samples, wall = await load
    answers["load"] = {"concurrency": spec.load_concurrency, "in_flight_throughout": load_still_running,
                       "summary": summarize(samples, wall_seconds=wall), "samples": runner.raw_samples(samples)}
    return answers


def refused_ok(answer: dict[str, Any], status: int, code: str) -> bool:
    """The refusal a client should see: the status, OpenAI's error object with its code, the header."""
    error = answer.get("error")
    if answer["status"] != status or not isinstance(error, dict) or error.get("code") != code:
        return False
    if not {"message", "type", "param", "code"} <= set(error):
        return False
    if status == 401:
        return answer["headers"].get("www-authenticate") == "Bearer"
    retry_after = answer["headers"].get("retry-after", "")
    return retry_after.isdigit() and 1 <= int(retry_after) <= 60


def counter_totals(metrics_text: str, door_app: str, names: Mapping[str, str]) -> dict[str, Any]:
    """What the engines and the door counted so far: Serve's request counter of the door app's decode and
    prefill deployments, vLLM's finished requests (all engines; None: not exported, fake engines) and the
    door's requests by key and status."""
    found = prometheus.samples(metrics_text)
    vllm = [value for name, _, value in found if name == VLLM_REQUESTS]
    door: dict[str, float] = {}
    for name, labels, value in found:
        if name == DOOR_REQUESTS and labels.get("application", door_app) == door_app:
            label = f"{labels.get('api_key')}:{labels.get('code')}"
            door[label] = door.get(label, 0.0) + value
    return {"serve_requests": {phase: sum(scaling.requests_per_replica(metrics_text, door_app, name).values())
                               for phase, name in names.items()},
            "vllm_requests_finished": sum(vllm) if vllm else None, "door_requests": door}


def settled_counters(door_app: str, names: Mapping[str, str]) -> tuple[dict[str, Any], float]:
    """The counters once two scrapes SETTLE_EVERY_S apart agree (at most SETTLE_MAX_S); and how long that took."""
    started = time.perf_counter()
    last = counter_totals(_scrape(), door_app, names)
    while time.perf_counter() - started < SETTLE_MAX_S:
        time.sleep(SETTLE_EVERY_S)
        now = counter_totals(_scrape(), door_app, names)
        if now == last:
            break
        last = now
    return last, round(time.perf_counter() - started, 1)


def _scrape() -> str:
    text = ray_outputs.scrape_metrics()
    return "" if text.startswith("# scrape failed") else text


def engine_check(before: dict[str, Any], after: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """The engines' counters grew by the requests the door let through, no more: each refused one never
    reached them. vLLM counts each request once per engine (prefill and decode)."""
    admitted = (len(answers["load"]["samples"]) + len(answers["limited_admitted"]) + len(answers["revoked_before"]))
    refused = {kind: len(answers[kind]) for kind in ("no_key", "wrong_key", "over_limit", "revoked_key")}
    serve_delta = {phase: after["serve_requests"][phase] - before["serve_requests"][phase]
                   for phase in after["serve_requests"]}
    vllm_delta = (None if after["vllm_requests_finished"] is None or before["vllm_requests_finished"] is None
                  else after["vllm_requests_finished"] - before["vllm_requests_finished"])
    door_delta = {label: value - before["door_requests"].get(label, 0.0)
                  for label, value in after["door_requests"].items()
                  if value - before["door_requests"].get(label, 0.0)}
    return {"admitted": admitted, "refused": refused, "serve_requests_delta": serve_delta,
            "vllm_requests_finished_delta": vllm_delta, "vllm_expected": 2 * admitted,
            "door_requests_delta": door_delta,
            "engines_saw_only_admitted": bool(serve_delta) and all(v == admitted for v in serve_delta.values())}


# ── the OpenAI SDK from the stack's clientConfig ─────────────────────────────────────────────

def sdk_completion(client_config: Mapping[str, Any], door: apps.LabApp, key: str) -> dict[str, Any]:
    """An OpenAI client made from the stack's clientConfig and a key, its base_url's host swapped for this
    host's door (the NLB's DNS name is AWS's to give), gets a chat completion."""
    import openai

    stack_url = urlparse(client_config["base_url"])
    lab_url = urlparse(door.base_url)
    base_url = stack_url._replace(scheme=lab_url.scheme, netloc=lab_url.netloc,
                                  path=lab_url.path + stack_url.path).geturl()
    result: dict[str, Any] = {"client_config": dict(client_config), "base_url_used": base_url,
                              "swapped": f"base_url {client_config['base_url']} → {base_url} (this host's door)"}
    try:
        answer = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=workload.REQUEST_TIMEOUT_S
                               ).chat.completions.create(model=client_config["model"], max_tokens=16,
                                                         messages=[{"role": "user", "content": "hello"}])
        result.update(ok=bool(answer.choices) and answer.usage is not None and answer.usage.completion_tokens > 0,
                      model=answer.model, completion_tokens=answer.usage.completion_tokens if answer.usage else None,
                      text=answer.choices[0].message.content if answer.choices else None)
    except openai.OpenAIError as error:
        result.update(ok=False, error=f"{type(error).__name__}: {error}")
    return result


# ── the run ──────────────────────────────────────────────────────────────────────────────────

@dataclass
class _DoorRun(runner._LabRun):
    """A lab run (its results, folder and clock; `spec` the timing) with the door's parts."""

    door: DoorSpec
    apps: DoorApps
    keys: dict[str, str]
    key_table: Path
    pass_reserve_s: float

    def save(self) -> None:
        self.results.save()

    def log(self, message: str) -> None:
        runner._log(message, self.started)


def verdict(data: dict[str, Any]) -> dict[str, Any]:
    """Every check that can fail, and whether all passed."""
    items: dict[str, bool] = {f"ready:{name}": "ready_after_s" in entry for name, entry in data["apps"].items()}
    for row in data["timing"]:
        s = row["summary"]["requests"]
        items[f"timing_all_ok:{row['path']}-c{row['concurrency']}-pass{row['repeat']}"] = (
            s["failed"] == 0 and s["succeeded"] > 0)
    refusals = data.get("refusals")
    if refusals:
        for kind, status, code in (("no_key", 401, "invalid_api_key"), ("wrong_key", 401, "invalid_api_key"),
                                   ("revoked_key", 401, "invalid_api_key"), ("over_limit", 429, "rate_limit_exceeded")):
            items[f"refused:{kind}"] = bool(refusals[kind]) and all(refused_ok(a, status, code) for a in refusals[kind])
        items["admitted:limited_within_its_minute"] = all(a["status"] == 200 for a in refusals["limited_admitted"])
        items["admitted:revoked_key_before_revocation"] = all(a["status"] == 200 for a in refusals["revoked_before"])
        load = refusals["load"]
        items["load:in_flight_throughout"] = load["in_flight_throughout"]
        requests = load["summary"]["requests"]
        items["load:all_ok"] = requests["failed"] == 0 and requests["succeeded"] > 0
        counters = data["engine_counters"]
        items["engines:serve_counted_only_admitted"] = counters["engines_saw_only_admitted"]
        if counters["vllm_requests_finished_delta"] is not None:  # vLLM's own counter (not the fake engines')
            items["engines:vllm_counted_only_admitted"] = (
                counters["vllm_requests_finished_delta"] == counters["vllm_expected"])
    if "sdk_from_client_config" in data:
        items["sdk_from_client_config"] = bool(data["sdk_from_client_config"].get("ok"))
    return {"checks": items, "passed": bool(items) and all(items.values()) and not data["not_done"]}


def run_door(*, keyed_args: dict[str, Any], source: str, model: apps.LabModel, out_dir: Path, spec: DoorSpec,
             client_config: Mapping[str, Any], key_table: Path, keys: dict[str, str],
             kv_cache_memory_bytes: int | None, budget_utilization: float | None = None,
             extra_env: dict[str, str] | None = None, fake_engines: bool = False, ready_timeout_s: float = 300,
             deadline_s: float = 330, pass_reserve_s: float = 20) -> dict[str, Any]:
    """Deploy, time both paths, refuse under load, the SDK check, shut down. Returns the results document,
    written to `out_dir`/door-result.json after every step. `keyed_args` are the stack's PD args rendered
    with the keyed ingress reading `key_table` (which the caller has written with `keys`)."""
    started = time.perf_counter()
    pair = door_apps(keyed_args, model, kv_cache_memory_bytes=kv_cache_memory_bytes,
                     budget_utilization=budget_utilization, seed=spec.timing.seed, fake_engines=fake_engines)
    env = {**apps.lab_environment([model], variants=(PD_ONLY,), per_app=apps.engines_per_app(keyed_args)),
           "RAY_metrics_report_interval_ms": runner.METRICS_REPORT_INTERVAL_MS, **(extra_env or {})}
    # The door's code on the Ray workers' path, as the stack's ConfigMap puts it on the pods'.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), os.environ.get("PYTHONPATH", "")) if p)
    results = runner.Results(out_dir / "door-result.json", {
        "schema": RESULT_SCHEMA, "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "engines": "fake (lab/fake_engine.py): CPU rehearsal, no GPU result" if fake_engines else "vLLM",
        "host": {"gpu": gpu(), "cpus": os.cpu_count()}, "versions": versions(), "provenance": provenance(),
        "stack": {"source": source, "rendered_pd_serving_args": keyed_args},
        "apps": {a.name: {"path": path, "route_prefix": a.route_prefix}
                 for a, path in zip(pair.both, (DOOR_SUFFIX, OPEN_SUFFIX), strict=True)},
        "door_app_args": pair.door.args, "environment": env,
        "keys": {"table": str(key_table), "names": sorted(keys), "limited_requests_per_minute":
                 spec.limited_requests_per_minute},
        "spec": asdict(spec), "timing": [], "not_done": []})
    run = _DoorRun(results, spec.timing, out_dir, started, deadline_s, spec, pair, keys, key_table, pass_reserve_s)
    ray_address = os.environ.get("RAY_ADDRESS")
    from lab.resilience import ray_init

    ray_init(fake_engines, env)
    from ray import serve

    try:
        serve.start(http_options={"host": "127.0.0.1", "port": apps.HTTP_PORT})
        _deploy_and_measure(run, client_config, ready_timeout_s)
    finally:
        _finish(run, ray_address)
    return run.data


def _deploy_and_measure(run: _DoorRun, client_config: Mapping[str, Any], ready_timeout_s: float) -> None:
    data, pair = run.data, run.apps
    runner._deploy([pair.door])
    data["apps"][pair.door.name].update(runner._wait_ready([pair.door], ready_timeout_s, run.started)[pair.door.name])
    if "ready_after_s" not in data["apps"][pair.door.name]:
        run.save()
        return
    _deploy_open(pair)
    data["apps"][pair.open.name].update(runner._wait_ready([pair.open], 120, run.started)[pair.open.name])
    run.save()
    if "ready_after_s" not in data["apps"][pair.open.name]:
        return
    data["warmup"] = {a.name: asyncio.run(_warm_up(a, run)) for a in pair.both}
    run.save()
    _timing(run)
    data["latency"] = latency_comparison(data["timing"])
    run.save()
    names = faults.deployment_names(pair.door.args)
    before, before_s = settled_counters(pair.door.name, names)
    run.log(f"counters before the refusals (settled in {before_s} s): {before}")
    data["refusals"] = asyncio.run(_refusals_under_load(run))
    after, after_s = settled_counters(pair.door.name, names)
    data["engine_counters"] = {"before": before, "after": after, "settled_s": [before_s, after_s],
                               **engine_check(before, after, data["refusals"])}
    run.log(f"refusals: {[(k, [a['status'] for a in v]) for k, v in data['refusals'].items() if isinstance(v, list)]}")
    run.log(f"engines: {data['engine_counters']['serve_requests_delta']} for "
            f"{data['engine_counters']['admitted']} admitted; door {data['engine_counters']['door_requests_delta']}")
    run.save()
    data["sdk_from_client_config"] = sdk_completion(client_config, pair.door, run.keys[LOAD_KEY])
    run.log(f"OpenAI SDK from clientConfig: {data['sdk_from_client_config']}")
    run.save()


async def _warm_up(app: apps.LabApp, run: _DoorRun) -> dict[str, Any]:
    """A few requests through each path, kept out of the timing (the first pays the NIXL handshake)."""
    spec = run.spec
    prompts = _prompts(2 if app is run.apps.door else 3, app.model, spec, spec.warmup_requests, 1, 0)
    samples, _ = await workload.run_load(app.base_url, app.model_id, prompts, spec.output_tokens, 2,
                                         api_key=run.keys[LOAD_KEY])
    return {"requests": len(samples), "errors": [s.error for s in samples if not s.ok]}


def _finish(run: _DoorRun, ray_address: str | None) -> None:
    from lab.resilience import stop_ray

    data = run.data
    data["verdict"] = verdict(data)
    data["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    data["wall_s"] = round(time.perf_counter() - run.started, 1)
    run.save()
    ray_outputs.write_log_excerpt(ray_outputs.ray_log_dir(), run.out_dir / "door-ray-log-excerpt.txt")
    stop_ray(ray_address)
    run.log("shut down")


def _ms(dist: dict[str, float] | None, q: str = "p50") -> str:
    return "-" if not dist else f"{1000 * dist[q]:.1f}ms"

