"""The SLO model's validation in the lab, written down before the run: open-loop Poisson arrivals at
three rates (one past the lab's KV link), PD and colocated, TTFT and TPOT at p90, against the model.

`predict` writes what the model says for each app, rate and metric from the committed calibration
and the lab's engine (an H200's speed, an L4's memory, the stack's engine settings and the KV cache
kvCacheFromPlan renders); `table` reads the run's results and sets them side by side (error =
predicted / measured − 1). Neither refits anything.

TTFT is predicted over the requests the run sends: the lab's arrivals are seeded
(`measure.latency.poisson_arrival_times`, the seed the runner gives each rate), so the model's
stations (prefill then the hand-over on the link for PD; the engine for colocated, each a fixed
time, first come first served) are run over those very arrivals and the percentile taken as the lab
takes it. Below a station's rate this is the steady state's percentile for that sample; past the
link's rate, where the steady state has none (the queue grows without bound), it is the transient's:
how far the queue got within the requests sent. The steady-state figure (`ttft_at_percentile`,
`colocated_ttft`; unbounded past the link) is kept beside it. TPOT is the steady state's
(`decode_load`), the hand-overs reaching decode no faster than the link moves them.

The lab's link is UCX on one host: its rate is the sustained hand-overs per second the PD app
served closed-loop at concurrency 16 in the 2026-12-02 runs (the link saturated, every hand-over
queued behind the others), times the bytes one typical prompt moves in the model's count. That
sets the link's rate from runs other than the open-loop points the ingest share was fitted to.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from statistics import mean
from typing import Any

from facts.gpus import GPU_SPECS
from facts.instances import RECORDED_EC2_ANSWERS, instance_type
from facts.models import known_model
from facts.slo_calibration import CALIBRATION, Calibration
from lab.variants import parse_variants
from measure.latency import percentile, poisson_arrival_times
from measure.prometheus import nixl_metric_totals, samples
from serve_app.capacity import capacity_report
from serve_app.colocated_engine import flush_time, percentiles, run_engine
from serve_app.performance import ReplicaModel
from serve_app.slo_sizing import Targets, Workload, colocated_ttft, decode_load, ttft_at_percentile
from serve_app.slo_validation import lab_replica, pd_stations, ttfts_of_arrivals

MODEL = "Qwen/Qwen3.5-9B"
LAB_MODEL_KEY = "qwen35-9b"
PROMPT_TOKENS, OUTPUT_TOKENS = 512, 128
RATES = (2.0, 3.0, 8.0)  # requests/s: one well below the link, one at 3/4 of it, one twice its rate
REQUESTS_PER_RATE = 64
CLOSED_LOOP_REQUESTS = 12  # at concurrency 1, every app: the unqueued figures
SEED = 0  # the run's --seed: rate number i arrives with seed SEED + i (lab/runner.py _open_loop_pass)
PERCENTILE = 0.9
L4_BUDGET_MIB = 22_888  # g6.8xlarge's L4, what the lab holds each engine to
DEPLOYED_INSTANCE = "g6.8xlarge"
# The run's apps: the stack as rendered (KV over UCX on one host), PD and colocated at every rate; PD
# with UCX reading the KV over CUDA IPC at concurrency 1 only (the engine side apart from the link).
VARIANTS_FILE = "lab/variants/validation-open-loop.json"
CUDA_IPC_VARIANT = "cuda-ipc"
# UCX's GET over CUDA IPC moved a 512-token prompt's KV in under 5 ms (8 of 8 transfers, Llama-3-8B
# shape, lab/results/2026-12-02-h200-run3-report.md): more than 13 GB/s.
CUDA_IPC_BYTES_PER_SECOND = 13e9
CLOSED_LOOP_RESULTS = tuple(f"lab/results/2026-12-02-h200-qwen35-l4-budget-{n}-lab-result.json.gz" for n in (1, 2))
SATURATING_CONCURRENCY = 16
# The run, under the name it ran with (one detached chain on one H200, lab/gpu_run.sh), and the colocated
# app's rates its deadline skipped, run alone in a later deployment with the same seeds (the same arrivals).
VALIDATION_RESULT = "lab/results/2026-12-03-h200-qwen35-day-two-lab-result.json.gz"
COLOCATED_RESULT = "lab/results/2026-12-03-h200-qwen35-0824utc-colocated-lab-result.json.gz"
COLOCATED_VARIANTS_FILE = "lab/variants/validation-open-loop-colocated.json"
CALIBRATION_KEYS = ("prefill_compute_efficiency", "decode_bandwidth_efficiency", "request_overhead_seconds",
                    "decode_ingest_share", "prompt_intake_fixed_seconds", "stream_overhead_seconds", "measured")
PROBE = "lab/results/2026-12-03-h200-qwen35-first-start-bf16-memory-probe.json"
# The first run's metrics, scraped before tear-down: vLLM's inter-token latency histogram per engine.
VALIDATION_EXPOSITION = "lab/results/2026-12-03-h200-qwen35-day-two-metrics-exposition.prom.gz"
COLOCATED_APP = f"{LAB_MODEL_KEY}-colocated-ucx"
INTAKE_GAP_SECONDS = 0.05  # a gap this long or longer: a step that took a prompt in (a plain step is ~5 ms)


@dataclass(frozen=True)
class ValidationPlan:
    """One pre-registered validation run: its apps, rates, requests and seed, and the command that runs it."""

    variants_file: str
    rates: tuple[float, ...]
    requests_per_rate: int
    seed: int  # rate number i arrives with seed + i
    modes: tuple[str, ...]
    metrics_window_concurrency: int | None  # scrape Ray's metrics around this concurrency's pass (None: none)
    deadline_s: int  # the runner stops starting passes after this
    ready_timeout_s: int = 380  # how long the apps may take to start

    @property
    def run_options(self) -> str:
        window = ("" if self.metrics_window_concurrency is None
                  else f"--metrics-window-concurrency {self.metrics_window_concurrency} ")
        return (f"run --stack dev --models {LAB_MODEL_KEY} --variants {self.variants_file} --kv-cache-from {PROBE} "
                f"--kv-cache-bytes plan --cache-dir /tmp/lab-cc/valid --concurrencies 1 "
                f"--requests-per-slot {CLOSED_LOOP_REQUESTS} --min-requests {CLOSED_LOOP_REQUESTS} "
                f"{window}--rates {','.join(f'{r:g}' for r in self.rates)} "
                f"--requests-per-rate {self.requests_per_rate} --open-loop-modes {','.join(self.modes)} "
                f"--seed {self.seed} --deadline-s {self.deadline_s} --ready-timeout-s {self.ready_timeout_s}")


# The first run: PD and colocated at three rates (its colocated rates finished in a later deployment); on one
# H200 with the bundle unpacked (lab/gpu_run.sh), about 8 minutes, 5 engines starting cold.
FIRST_PLAN = ValidationPlan(VARIANTS_FILE, RATES, REQUESTS_PER_RATE, SEED, ("pd", "colocated"), 1, 520)
# Colocated again after its prompt intake was calibrated (facts/slo_calibration.py): fresh arrivals
# (seeds 100-103, none the calibration saw), four rates, twice the requests per rate (a p90 of 128).
COLOCATED_PLAN = ValidationPlan(COLOCATED_VARIANTS_FILE, (2.0, 3.0, 5.0, 8.0), 128, 100, ("colocated",), None, 900)
# Colocated a third time, its engine run step by step (serve_app/colocated_engine.py): fresh arrivals (seeds
# 200-203), 192 requests per rate, the ready timeout a cold machine's first start needs.
COLOCATED_STEPS_PLAN = ValidationPlan(COLOCATED_VARIANTS_FILE, (2.0, 4.0, 6.0, 8.0), 192, 200, ("colocated",), None,
                                      900, ready_timeout_s=600)
PLANS = {"first": FIRST_PLAN, "colocated": COLOCATED_PLAN, "colocated-steps": COLOCATED_STEPS_PLAN}


def read_result(path: Path) -> dict[str, Any]:
    """A lab results JSON, plain or gzipped."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def sustained_hand_overs_per_second(results: list[dict[str, Any]]) -> float:
    """Requests a second the stack's PD app served closed-loop at SATURATING_CONCURRENCY, mean over the passes."""
    rates = [row["summary"]["requests_per_s"] for doc in results for row in doc["timing"]
             if row["mode"] == "pd" and row["model"] == LAB_MODEL_KEY and row["concurrency"] == SATURATING_CONCURRENCY]
    return mean(rates)


def lab_engine(kv_bytes_per_second: float, stack: str = "dev", calibration: Calibration = CALIBRATION) -> ReplicaModel:
    """One engine as the lab runs it: the H200's speed, the L4's memory, the stack's engine settings and
    stream flushes, and the KV cache kvCacheFromPlan renders on the L4 (`run --kv-cache-bytes plan`)."""
    from lab.stack import stack_app

    model = known_model(MODEL)
    assert model is not None
    app = stack_app(stack)
    engine = app.engine_for("decode")
    replica = lab_replica(model, GPU_SPECS["H200"], usable_memory_mib=L4_BUDGET_MIB,
                          gpu_memory_utilization=engine.gpu_memory_utilization, max_model_len=engine.max_model_len,
                          kv_bytes_per_second=kv_bytes_per_second, engine=engine, calibration=calibration)
    planned = capacity_report(model, instance_type(RECORDED_EC2_ANSWERS[DEPLOYED_INSTANCE]), dtype=engine.dtype,
                              max_model_len=engine.max_model_len, gpu_memory_utilization=engine.gpu_memory_utilization,
                              enforce_eager=engine.enforce_eager, max_num_seqs=engine.max_num_seqs,
                              max_num_batched_tokens=engine.max_num_batched_tokens, fixed_kv_cache=True,
                              vllm_version="0.26.0")
    return replace(replica, kv_budget_bytes=planned.kv_budget_bytes,
                   kv_blocks=min(b for b in (planned.num_blocks, planned.num_blocks_restart) if b is not None),
                   stream_tick_seconds=app.stream_tick_seconds)


def hand_over_bytes(engine: ReplicaModel) -> int:
    """One typical prompt's KV and state, in the model's count."""
    return PROMPT_TOKENS * engine.kv_bytes_per_token + engine.state_bytes_per_sequence


def _workload(rate: float) -> tuple[Workload, Targets]:
    return (Workload(rate, PROMPT_TOKENS, OUTPUT_TOKENS, PROMPT_TOKENS, OUTPUT_TOKENS),
            Targets(float("inf"), float("inf"), PERCENTILE))


def open_loop_point(engine: ReplicaModel, mode: str, rate: float, number: int,
                    requests: int = REQUESTS_PER_RATE, seed: int = SEED) -> dict[str, Any]:
    """The model's TTFT and TPOT p90 for `requests` arriving at `rate` as the run's rate number `number` sends
    them (the run's `--seed`: `seed`): PD through its stations, colocated run step by step."""
    workload, targets = _workload(rate)
    arrivals = poisson_arrival_times(rate, requests, seed + number)
    if mode == "pd":
        stations, fixed = pd_stations(engine, engine, PROMPT_TOKENS)
        steady = ttft_at_percentile(engine, engine, workload, targets, 1)
        load = decode_load(engine, workload, targets, 1, min(rate, 1 / engine.transfer_seconds(PROMPT_TOKENS)))
        ttft, tpot = percentile(ttfts_of_arrivals(arrivals, stations, fixed), 100 * PERCENTILE), load.tpot_seconds
        how: dict[str, Any] = {"stations_seconds": [round(s, 4) for s in stations]}
    else:
        steady = colocated_ttft(engine, workload, targets, 1)
        load = decode_load(engine, workload, targets, 1, colocated=True)
        ttft, tpot = percentiles(run_engine(engine, arrivals, PROMPT_TOKENS, OUTPUT_TOKENS), PERCENTILE)
        how = {"engine": "run step by step over these arrivals (serve_app/colocated_engine.py)"}
    return {"requests_per_second": rate, "requests": requests, "seed": seed + number,
            "ttft_p90_seconds": round(ttft, 4),
            "ttft_p90_steady_state_seconds": None if steady == float("inf") else round(steady, 4),
            "tpot_p90_seconds": round(tpot, 5), **how, "stall_share": round(load.stall_share, 3)}


def _concurrency_one_point(engine: ReplicaModel, mode: str) -> dict[str, Any]:
    """One request at a time: no queue, no stall; every request the same time."""
    if mode == "pd":
        stations, fixed = pd_stations(engine, engine, PROMPT_TOKENS)
        ttft = fixed + sum(stations)
        tpot = engine.decode_step_seconds(1, PROMPT_TOKENS + OUTPUT_TOKENS / 2)
    else:
        alone = run_engine(engine, [0.0], PROMPT_TOKENS, OUTPUT_TOKENS)[0]
        ttft, tpot = alone.ttft_seconds, alone.tpot_seconds
    return {"concurrency": 1, "requests": CLOSED_LOOP_REQUESTS, "ttft_p90_seconds": round(ttft, 4),
            "tpot_p90_seconds": round(tpot, 5)}


def predict(stack: str = "dev", repo: Path = Path("."), calibration: Calibration = CALIBRATION,
            plan: ValidationPlan = FIRST_PLAN) -> dict[str, Any]:
    """The predictions document: every app of `plan`'s run at concurrency 1 and at its open-loop rates, TTFT
    and TPOT p90, and how they were made."""
    closed_loop = [read_result(repo / path) for path in CLOSED_LOOP_RESULTS]
    per_second = sustained_hand_overs_per_second(closed_loop)
    ucx = lab_engine(1.0, stack, calibration)
    moved = hand_over_bytes(ucx)
    link = per_second * moved
    apps = []
    for variant in parse_variants(str(repo / plan.variants_file)):
        engine = lab_engine(CUDA_IPC_BYTES_PER_SECOND if variant.name == CUDA_IPC_VARIANT else link, stack,
                            calibration)
        rates = plan.rates if variant.rates is None else variant.rates
        for mode in variant.modes:
            apps.append({"app": f"{LAB_MODEL_KEY}-{mode}-{variant.name}", "mode": mode, "variant": variant.name,
                         "points": [_concurrency_one_point(engine, mode)]
                         + [open_loop_point(engine, mode, rate, number, plan.requests_per_rate, plan.seed)
                            for number, rate in enumerate(rates)]})
    return {
        "what": "the SLO model's TTFT and TPOT p90 for the lab's validation run, written before it ran",
        "method": __doc__,
        "run": f"python -m lab {plan.run_options}",
        "model": MODEL, "prompt_tokens": PROMPT_TOKENS, "output_tokens": OUTPUT_TOKENS, "percentile": PERCENTILE,
        "calibration": {key: getattr(calibration, key) for key in CALIBRATION_KEYS},
        "lab_engine": {"gpu": "H200", "memory_budget_mib": L4_BUDGET_MIB, "kv_cache_bytes": ucx.kv_budget_bytes,
                       "kv_blocks": ucx.kv_blocks, "max_num_seqs": ucx.max_num_seqs,
                       "sequences_at_prompt_plus_output": ucx.batch_cap(PROMPT_TOKENS + OUTPUT_TOKENS)},
        "lab_link": {"hand_overs_per_second": round(per_second, 3), "bytes_per_hand_over": moved,
                     "bytes_per_second": round(link), "from": list(CLOSED_LOOP_RESULTS),
                     "how": f"PD app, closed loop at concurrency {SATURATING_CONCURRENCY}, requests/s mean over "
                            "the passes, times one 512-token prompt's KV and state",
                     "cuda_ipc_bytes_per_second": CUDA_IPC_BYTES_PER_SECOND},
        "apps": apps,
    }


def _summary_point(samples: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [s for s in samples if s["error"] is None and s["ttft_s"] is not None]
    tpots = [(s["e2e_s"] - s["ttft_s"]) / (s["output_tokens"] - 1) for s in ok if s["output_tokens"] > 1]
    return {"requests": len(ok), "ttft_p90_seconds": percentile([s["ttft_s"] for s in ok], 90),
            "tpot_p90_seconds": percentile(tpots, 90)}


def _load_of(point: dict[str, Any]) -> tuple[str, float]:
    return ("rate", float(point["requests_per_second"])) if "requests_per_second" in point \
        else ("concurrency", float(point["concurrency"]))


def measured(results: list[dict[str, Any]]) -> dict[tuple[str, str, float], dict[str, Any]]:
    """{(app, "rate" or "concurrency", value): TTFT and TPOT p90 and the requests} from the runs' open-loop
    rows and closed-loop passes, samples pooled over the results and passes given (TPOT per request:
    (E2E − TTFT) / (tokens − 1), as `pdctl bench`)."""
    pooled: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for doc in results:
        for row in doc.get("open_loop", []):
            pooled.setdefault((row["app"], "rate", float(row["rate_per_s"])), []).extend(row["samples"])
        for row in doc.get("timing", []):
            pooled.setdefault((row["app"], "concurrency", float(row["concurrency"])), []).extend(row["samples"])
    return {key: _summary_point(samples) for key, samples in pooled.items()}


def _row(app: dict[str, Any], load: tuple[str, float], got: dict[str, Any], ttft: float, tpot: float) -> dict[str, Any]:
    """One line of the validation table: `app`'s measured p90s at `load` (`got`) beside the model's."""
    return {"app": app["app"], "mode": app["mode"], "variant": app["variant"], "load": load[0], "value": load[1],
            "requests": got["requests"],
            "ttft_measured": got["ttft_p90_seconds"], "ttft_predicted": ttft,
            "ttft_error": ttft / got["ttft_p90_seconds"] - 1,
            "tpot_measured": got["tpot_p90_seconds"], "tpot_predicted": tpot,
            "tpot_error": tpot / got["tpot_p90_seconds"] - 1}


def table(predictions: dict[str, Any], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Predicted against measured for every app and load the run measured (error: predicted / measured − 1)."""
    found = measured(results)
    rows = []
    for app in predictions["apps"]:
        for point in app["points"]:
            load = _load_of(point)
            got = found.get((app["app"], *load))
            if got is None or not got["requests"]:
                continue
            rows.append(_row(app, load, got, point["ttft_p90_seconds"], point["tpot_p90_seconds"]))
    return rows


def per_deployment(predictions: dict[str, Any], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`table` pooled over `results`, each row also holding every deployment's own p90s at that load (in the
    order given): the spread from one deployment to the next beside the pooled figure."""
    apart = [{(row["app"], row["load"], row["value"]): row for row in table(predictions, [doc])} for doc in results]
    rows = []
    for row in table(predictions, results):
        same = [rows_of[key] for rows_of in apart if (key := (row["app"], row["load"], row["value"])) in rows_of]
        rows.append(row | {"ttft_deployments": [r["ttft_measured"] for r in same],
                           "tpot_deployments": [r["tpot_measured"] for r in same]})
    return rows


def replayed(result: dict[str, Any], engine: ReplicaModel, app: str = COLOCATED_APP) -> list[dict[str, Any]]:
    """`app`'s open-loop rates in a run against its engine run step by step over the arrivals that run
    recorded (each request's start): the model after the fact, the requests as sent, nothing refitted."""
    rows = []
    for row in result.get("open_loop", []):
        if row["app"] != app:
            continue
        ok = [s for s in row["samples"] if s["error"] is None and s["ttft_s"] is not None]
        ttft, tpot = percentiles(run_engine(engine, [s["start_s"] for s in ok], PROMPT_TOKENS, OUTPUT_TOKENS),
                                 PERCENTILE)
        named = {"app": app, "mode": "colocated", "variant": app.rsplit("-", 1)[1]}
        rows.append(_row(named, ("rate", float(row["rate_per_s"])), _summary_point(ok), ttft, tpot))
    return rows


# The deployments of 2026-12-03 whose colocated app ran concurrency 1 before its rates: the time outside the
# engine is read from them (Calibration.stream_overhead_seconds).
STREAM_OVERHEAD_RESULTS = (VALIDATION_RESULT, COLOCATED_RESULT,
                           "lab/results/2026-12-03-h200-qwen35-1112utc-colocated-lab-result.json.gz")


def stream_overhead(results: list[dict[str, Any]], engine: ReplicaModel) -> dict[str, Any]:
    """The colocated TTFT p50 at concurrency 1 in each deployment, and their mean less the engine's first token
    (its intake step) flushed on the stream's next tick: the time a request spends outside the engine."""
    medians = [percentile([s["ttft_s"] for s in row["samples"] if s["error"] is None], 50)
               for doc in results for row in doc["timing"]
               if row["app"] == COLOCATED_APP and row["concurrency"] == 1]
    flushed = flush_time(engine.intake_seconds(PROMPT_TOKENS), engine.stream_tick_seconds)
    return {"p50s_seconds": medians, "first_token_flushed_seconds": flushed,
            "overhead_seconds": mean(medians) - flushed}


def logged_rates(run_log: str, app: str = COLOCATED_APP) -> dict[float, dict[str, Any]]:
    """{rate: requests, TTFT and TPOT p90} from the runner's progress lines of `app`'s open-loop rates
    (what a run cut short before its results file leaves; the runner prints them to 0.1 ms)."""
    pattern = re.compile(rf"\] {re.escape(app)} rate=([\d.]+)/s: ok=(\d+)/\d+ ttft_p90=([\d.]+)ms "
                         rf"tpot_p90=([\d.]+)ms")
    return {float(rate): {"requests": int(ok), "ttft_p90_seconds": float(ttft) / 1000,
                          "tpot_p90_seconds": float(tpot) / 1000}
            for rate, ok, ttft, tpot in pattern.findall(run_log)}


def cut_short_table(predictions: dict[str, Any], result: dict[str, Any], run_log: str) -> list[dict[str, Any]]:
    """`table` for a run whose results file holds its closed-loop pass only: its open-loop rates from the log."""
    rows = table(predictions, [result])
    app = predictions["apps"][0]
    logged = logged_rates(run_log, app["app"])
    for point in app["points"]:
        got = logged.get(float(point.get("requests_per_second", 0)))
        if got is not None:
            rows.append(_row(app, _load_of(point), got, point["ttft_p90_seconds"], point["tpot_p90_seconds"]))
    return rows


def link_windows(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{PD app: transfers, bytes and seconds per transfer, bytes a second} from NIXL's own metrics over the
    app's closed-loop window (`--metrics-window-concurrency`): every engine's series summed, after less
    before, which is that app's alone since only it was under load. Seconds are NIXL's transfer timer
    (`ray_vllm_nixl_xfer_time_seconds`), not the whole hand-over."""
    links = {}
    for name, window in result.get("metrics_windows", {}).items():
        before, after = (nixl_metric_totals("\n".join(window[side]) + "\n") for side in ("before", "after"))
        moved = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
        transfers = moved.get("ray_vllm_nixl_xfer_time_seconds_count", 0.0)
        if not transfers:
            continue
        seconds, size = moved["ray_vllm_nixl_xfer_time_seconds_sum"], moved["ray_vllm_nixl_bytes_transferred_sum"]
        links[name.rsplit("-c", 1)[0]] = {"transfers": transfers, "bytes_per_transfer": size / transfers,
                                          "seconds_per_transfer": seconds / transfers,
                                          "bytes_per_second": size / seconds}
    return links


def intake_stall(exposition: str, app: str = COLOCATED_APP) -> dict[str, float]:
    """What a colocated engine's running sequences waited when a step took a prompt in, from vLLM's own
    inter-token latency histogram of `app`'s engine (the replica Serve names under `app`): the gaps of
    INTAKE_GAP_SECONDS or more, counted and averaged at their buckets' middles, and the gaps between half
    that and it (none: the long gaps stand apart from the plain steps)."""
    parsed = samples(exposition)
    replica = next(labels["replica"] for _, labels, _ in parsed if "replica" in labels
                   and labels.get("application") == app and labels.get("deployment", "").startswith("LLMServer:"))
    cumulative = sorted((float(labels["le"]), value) for name, labels, value in parsed
                        if name == "ray_vllm_inter_token_latency_seconds_bucket" and labels.get("ReplicaId") == replica)
    buckets = [(lower, upper, count - below) for (lower, below), (upper, count) in pairwise(cumulative)]
    long = [(n, (lower + (upper if upper != float("inf") else lower)) / 2) for lower, upper, n in buckets
            if lower >= INTAKE_GAP_SECONDS]
    long_gaps = sum(n for n, _ in long)
    return {"gaps": cumulative[-1][1], "long_gaps": long_gaps,
            "long_gap_mean_seconds": sum(n * middle for n, middle in long) / long_gaps,
            "gaps_just_below": sum(n for lower, upper, n in buckets
                                   if lower >= INTAKE_GAP_SECONDS / 2 and upper <= INTAKE_GAP_SECONDS)}


def signed_percent(error: float) -> str:
    return f"{error:+.0%}".replace("-", "−").replace("%", " %")


def markdown(rows: list[dict[str, Any]]) -> str:
    """The validation table as docs/SIZING.md shows it; rows from `per_deployment` also show each deployment's
    p90s in brackets beside the pooled one."""
    spread = bool(rows) and "ttft_deployments" in rows[0]
    heading = "pooled (each deployment)" if spread else "measured"
    lines = [f"| app | load | requests | TTFT p90 {heading} | predicted | error | TPOT p90 {heading} | "
             "predicted | error |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        load = f"{row['value']:g} req/s" if row["load"] == "rate" else f"concurrency {row['value']:g}"
        ttft, tpot = f"{row['ttft_measured'] * 1000:,.0f} ms", f"{row['tpot_measured'] * 1000:.2f} ms"
        if spread:
            ttft += f" ({', '.join(f'{t * 1000:,.0f}' for t in row['ttft_deployments'])})"
            tpot += f" ({', '.join(f'{t * 1000:.2f}' for t in row['tpot_deployments'])})"
        lines.append(f"| {row['mode']}, {row['variant']} | {load} | {row['requests']} | {ttft} | "
                     f"{row['ttft_predicted'] * 1000:,.0f} ms | {signed_percent(row['ttft_error'])} | {tpot} | "
                     f"{row['tpot_predicted'] * 1000:.2f} ms | {signed_percent(row['tpot_error'])} |")
    return "\n".join(lines) + "\n"
