"""Serve autoscaling on the lab's one host: the load ramp and its arithmetic (pure functions).

    python -m lab scaling --stack dev --set decodeMaxReplicas=2 ...   (a GPU host: lab/README.md)
    python -m lab.rehearse_resilience_cpu OUT scaling                  (a CPU, engines faked)

The stack's rendered `autoscaling_config` (decode from 1 to its max, prefill as rendered) under a
ramp of a decode-heavy closed-loop load (short prompts, long outputs), driven by
`lab.resilience._scaling`:

1. `low`: `low_concurrency` clients for `low_s`. Serve's default policy wants
   ceil(ongoing requests / target_ongoing_requests) replicas, so a load of at most the target keeps
   decode at 1;
2. `high`: `high_concurrency` clients (more than the target × 1 replica) from the step until decode
   has 2 RUNNING replicas and the new one has served a request, then `hold_s` more (at most
   `up_timeout_s` from the step). Serve adds the replica once the ongoing requests, averaged over its
   look-back window (30 s by default) and pushed every 10 s, stayed above the target for
   `upscale_delay_s`;
3. `scale_down`: `low_concurrency` clients again from the drop until decode is back to 1 replica (at
   most `down_timeout_s`, then `after_s` more): the average must fall back under the target, then
   stay there for `downscale_delay_s`.

Serve is observed every `sample_every_s` (RUNNING replicas per deployment, `lab.faults.observe`).
"The new replica serves" has two witnesses, each reported: Serve's own access log of that replica
(its log file, named in Serve's replica details, and its Ray worker's stderr: on a GPU the PD
replicas' access lines reach only the stderr), whose first `CALL ... OK` line is written when the
replica has answered a request successfully (its time is Serve's log timestamp, wall clock to the ms,
put on the lab's clock); and Serve's per-replica request counter in Ray's /metrics, counted when
first seen above zero (exported every few seconds: a later time, an upper bound). Requests are
counted per part of the ramp by when they started, and each decode replica's count is kept at the drop.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lab.probe import LOG_PATTERNS
from lab.recovery import Observation, error_kind
from measure import prometheus
from measure.latency import RequestSample
from serve_app.errors import ConfigError

# The serving keys the scaling run sets over the dev stack (`--set`; the GPU command in lab/README.md
# and the CPU rehearsal): decode and prefill each autoscaled from 1 to 2 with their own target of 2
# ongoing requests; delays shorter than Serve's defaults (30 s up, 600 s down) so that deploy, ramp
# and shutdown fit one device call of 9 minutes.
STACK_OVERRIDES = ("decodeMaxReplicas=2", "prefillMaxReplicas=2", "decodeUpscaleDelaySeconds=10",
                   "decodeDownscaleDelaySeconds=30")
PHASES = ("low", "high", "scale_down")
SCALED_TO = 2
# Serve's log lines (Ray 2.58 and 2.60). A replica's access log (_private/logging_utils.py):
# "INFO 2026-12-01 10:00:01,234 Decode:qwen3_5-9b <replica> <request id> -- CALL chat OK 812.3ms";
# the controller's scaling decision (_private/deployment_state.py):
# "INFO ... controller 10890 -- Upscaling Deployment(name='Decode:m', app='tiny-pd') from 1 to 2
# replicas. Current ongoing requests: 3.25, current running replicas: 1."
STAMP = r"^\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) "
ACCESS_OK = re.compile(STAMP + r".* -- CALL \S+ OK ([\d.]+)ms\s*$")
# Ray Serve LLM's line once its vLLM engine has started (engines/vllm/vllm_engine.py).
ENGINE_STARTED = re.compile(STAMP + r".* -- Started vLLM engine\.\s*$")
# vLLM's lines when a compile cache answered (compilation/backends.py, compilation/decorators.py).
COMPILE_CACHE_HIT = re.compile(r"Directly load the compiled graph\(s\)|Directly load AOT compilation")
# vLLM's block size where it sets none of its own (its CUDA default; a hybrid model logs its own).
DEFAULT_BLOCK_SIZE = 16
# Serve's count of requests a replica processed; `ray.serve.metrics` tags each replica's series with
# application, deployment and replica (Serve's replica id, as in its replica details).
REQUEST_COUNTER = "ray_serve_deployment_request_counter_total"
DECISION = re.compile(STAMP + r"controller \d+ -- (?:Up|Down)scaling Deployment\(name='(.+?)', app='(.+?)'\) "
                      r"from (\d+) to (\d+) replicas\. Current ongoing requests: ([\d.]+)")


# A new decode replica serves only after its vLLM engine has started: 104–149 s on the H200 (decode
# replica restart 103.6 s in results/2026-12-01-h200-resilience-faults-result.json; replica start →
# engine up 146–149 s in results/2026-12-01-h200-knobs-report.md, its first deployment), after Serve's decision
# (~20 s). The first GPU scaling run waited 160 s and saw no second replica: too short a wait, not a
# verdict on autoscaling. 300 s leaves a margin over the slowest measured start.
NEW_REPLICA_WAIT_S = 300.0


@dataclass(frozen=True)
class Ramp:
    low_concurrency: int = 1
    high_concurrency: int = 12
    prompt_tokens: int = 64
    output_tokens: int = 256
    low_s: float = 30.0
    up_timeout_s: float = NEW_REPLICA_WAIT_S
    hold_s: float = 15.0
    down_timeout_s: float = 110.0
    after_s: float = 10.0
    sample_every_s: float = 1.0
    seed: int = 0

    def judges_scale_down(self) -> bool:
        """False with no wait for the scale-down (`down_timeout_s` 0): a scale-up run only."""
        return self.down_timeout_s > 0

    def longest_s(self) -> float:
        """The ramp's length when every wait runs out."""
        return self.low_s + self.up_timeout_s + self.hold_s + self.down_timeout_s + self.after_s


def check_ramp(ramp: Ramp, decode_config: Mapping[str, Any]) -> dict[str, Any]:
    """Decode's rendered autoscaling config, refused (ConfigError) if this ramp cannot show 1 → 2 → 1."""
    autoscaling = decode_config.get("deployment_config", {}).get("autoscaling_config")
    if not autoscaling or autoscaling["min_replicas"] != 1 or autoscaling["max_replicas"] < SCALED_TO:
        raise ConfigError("decodeMaxReplicas", (autoscaling or {}).get("max_replicas", 0),
                          f"≥ {SCALED_TO} with decodeReplicas 1 (--set decodeMaxReplicas={SCALED_TO})",
                          "the scaling run shows decode autoscaling from 1 to 2 replicas and back")
    for option in ("low_s", "up_timeout_s", "hold_s", "down_timeout_s", "after_s"):
        if not getattr(ramp, option) >= 0:
            raise ConfigError(f"--{option.replace('_', '-')}", getattr(ramp, option), "seconds ≥ 0")
    target = autoscaling["target_ongoing_requests"]
    if not 1 <= ramp.low_concurrency <= target:
        raise ConfigError("--low-concurrency", ramp.low_concurrency,
                          f"1 to decodeTargetOngoingRequests ({target}), so 1 replica is enough")
    if ramp.high_concurrency <= target:
        raise ConfigError("--high-concurrency", ramp.high_concurrency,
                          f"more than decodeTargetOngoingRequests ({target}) × 1 replica")
    return dict(autoscaling)


def first_at(observations: Sequence[Observation], since: float, deployment: str, count: int,
             *, at_least: bool) -> float | None:
    """The time of the first observation from `since` on with `count` (or, `at_least`, ≥ `count`)
    RUNNING replicas of `deployment`; None: not seen."""
    for seen in observations:
        running = len(seen.running.get(deployment, ()))
        if seen.at >= since and (running >= count if at_least else running == count):
            return seen.at
    return None


def new_replicas(observations: Sequence[Observation], since: float, deployment: str) -> list[str]:
    """Replicas of `deployment` RUNNING at some observation from `since` on but not in the last one before."""
    before = [o for o in observations if o.at < since]
    old = before[-1].running.get(deployment, frozenset()) if before else frozenset()
    found: list[str] = []
    for seen in observations:
        if seen.at >= since:
            found += sorted(r for r in seen.running.get(deployment, ()) if r not in old and r not in found)
    return found


def replica_counts(observations: Sequence[Observation], names: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Per phase, the fewest and most RUNNING replicas observed (observations that could not reach
    Serve, which list no deployment, left out)."""
    counts: dict[str, dict[str, int]] = {}
    for phase, deployment in names.items():
        seen = [len(o.running[deployment]) for o in observations if deployment in o.running]
        counts[phase] = {"min": min(seen, default=0), "max": max(seen, default=0)}
    return counts


def timeline(observations: Sequence[Observation], names: Mapping[str, str], origin: float) -> list[dict[str, Any]]:
    """The replica counts per phase at the first observation and at each change, seconds from `origin`."""
    rows: list[dict[str, Any]] = []
    last: dict[str, int] | None = None
    for seen in observations:
        if not seen.running:
            continue  # Serve not reached
        now = {phase: len(seen.running.get(deployment, ())) for phase, deployment in names.items()}
        if now != last:
            rows.append({"t_s": round(seen.at - origin, 1), **now})
            last = now
    return rows


def requests_by_phase(samples: Sequence[RequestSample], bounds: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """Per part of the ramp, the requests that started in it: succeeded, failed, the failures' kinds."""
    out: dict[str, Any] = {}
    for phase, (start, end) in bounds.items():
        inside = [s for s in samples if start <= s.start < end]
        failed = [s for s in inside if not s.ok]
        kinds: dict[str, int] = {}
        for sample in failed:
            kinds[error_kind(sample.error)] = kinds.get(error_kind(sample.error), 0) + 1
        out[phase] = {"succeeded": len(inside) - len(failed), "failed": len(failed), "errors": kinds}
    return out


def serve_log_time(match: re.Match[str]) -> float:
    """A Serve log line's time as epoch seconds (Serve writes the host's local time, to the ms)."""
    return time.mktime(time.strptime(match[1], "%Y-%m-%d %H:%M:%S")) + int(match[2]) / 1000


def served_ok_calls(log_text: str) -> list[tuple[float, float]]:
    """A replica's successful calls from its Serve log: (wall-clock time the call ended, its seconds)."""
    return [(serve_log_time(m), float(m[3]) / 1000) for m in map(ACCESS_OK.match, log_text.splitlines()) if m]


def served_ok_times(log_text: str) -> list[float]:
    """Wall-clock times of a replica's successful calls, from its Serve log."""
    return [end for end, _ in served_ok_calls(log_text)]


def engine_start(log_text: str, engine_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What one replica's engine start logged: when it was up (wall clock), its KV cache in tokens and
    blocks (tokens / block size: vLLM logs no block count), whether a compile cache answered, and
    vLLM's own compile and engine-init seconds; None where the log holds no such line."""
    def number(name: str) -> float | None:
        found = LOG_PATTERNS[name].search(log_text)
        return float(found[1].replace(",", "")) if found else None

    started = [serve_log_time(m) for m in map(ENGINE_STARTED.match, log_text.splitlines()) if m]
    tokens = number("kv_tokens")
    block_size = int(number("attention_block_size") or engine_kwargs.get("block_size") or DEFAULT_BLOCK_SIZE)
    return {"engine_started_at": min(started, default=None),
            "kv_tokens": None if tokens is None else int(tokens),
            "kv_blocks": None if tokens is None else int(tokens) // block_size, "block_size": block_size,
            "compile_cache_hit": bool(COMPILE_CACHE_HIT.search(log_text)),
            "torch_compile_s": number("torch_compile_s"), "init_engine_s": number("init_engine_s")}


def requests_per_replica(metrics_text: str, app: str, deployment: str) -> dict[str, float]:
    """Requests each replica of `deployment` in `app` has processed, by Serve's replica id, from a
    Ray node's /metrics text; {} when the text is not Prometheus exposition (a failed scrape)."""
    try:
        found = prometheus.samples(metrics_text)
    except ValueError:
        return {}
    counts: dict[str, float] = {}
    for name, labels, value in found:
        if name == REQUEST_COUNTER and (labels.get("application"), labels.get("deployment")) == (app, deployment):
            counts[labels["replica"]] = counts.get(labels["replica"], 0.0) + value
    return counts


def decisions(log_text: str, app: str, deployment: str) -> list[dict[str, Any]]:
    """The Serve controller's scaling decisions for one deployment, from its log: wall-clock time,
    replicas from and to, and the ongoing requests (averaged over the look-back) it decided on."""
    return [{"at": serve_log_time(m), "from": int(m[5]), "to": int(m[6]), "ongoing_requests": float(m[7])}
            for m in map(DECISION.match, log_text.splitlines()) if m and (m[3], m[4]) == (deployment, app)]


def first_decision(found: Sequence[Mapping[str, Any]], since: float, *, up: bool) -> Mapping[str, Any] | None:
    """Serve's first decision from `since` on to add (`up`) or remove replicas."""
    for decision in sorted(found, key=lambda d: d["at"]):
        if decision["at"] >= since and (decision["to"] > decision["from"] if up else decision["to"] < decision["from"]):
            return decision
    return None


def after(origin: float, at: float | None) -> float | None:
    return None if at is None else round(at - origin, 1)


def verdict(counts: Mapping[str, Mapping[str, int]], *, scaled_up_at: float | None, new_replica_served_at: float | None,
            scaled_down_at: float | None, requests: Mapping[str, Mapping[str, Any]],
            judge_scale_down: bool = True) -> dict[str, Any]:
    checks = {
        "decode_reached_2": scaled_up_at is not None and counts["decode"]["max"] == SCALED_TO,
        "new_decode_replica_served": new_replica_served_at is not None,
        **({"decode_returned_to_1": scaled_down_at is not None} if judge_scale_down else {}),
        "prefill_stayed_at_1": counts["prefill"] == {"min": 1, "max": 1},
        "zero_failed_requests": all(r["failed"] == 0 for r in requests.values()),
        "requests_succeeded_in_every_phase": all(r["succeeded"] > 0 for r in requests.values()),
    }
    return {"checks": checks, "passed": all(checks.values())}
