"""`pdctl top`: the key figures of each phase, from the stack's Prometheus (the recorded series the
dashboard and the alerts read) or straight from Ray nodes' metrics endpoints.

Prometheus: one instant query per figure (`/api/v1/query`), windows as recorded (1 m rates, 5 m for
KV transfers). Ray endpoints (e.g. port-forwarded pods' :8080/metrics): two scrapes `window`
seconds apart; rates and percentiles come from the counters' and buckets' growth between them. A
replica's phase comes from Serve's `ray_serve_deployment_replica_starts_total`, exported on the
same node as its engine, so each endpoint carries its own replica → phase map. Ray does not export an
idle engine's vLLM gauges (running, waiting, KV cache): those figures then read None ("-").
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from components.manifests import prometheus_rules as rules
from measure.prometheus import histogram_quantile, samples
from serve_app.render import PHASE_DEPLOYMENT_PREFIX

PHASES = rules.PHASES
KV_TRANSFER = "kv_transfer"


@dataclass(frozen=True)
class Query:
    figure: str
    expr: str
    per_phase: bool = True


def _quantile(q: float, buckets: str) -> str:
    return f"histogram_quantile({q}, {buckets})"


def prometheus_queries() -> list[Query]:
    """What `top` asks Prometheus: the stack's recorded series (components/manifests/prometheus_rules.py)."""
    return [
        Query("replicas", f"count by (phase) ({rules.REPLICA_PHASE})"),
        Query("requests_per_second", rules.REQUEST_RATE),
        Query("running", rules.REQUESTS_RUNNING),
        Query("waiting", rules.REQUESTS_WAITING),
        Query("kv_cache_usage", rules.KV_CACHE_USAGE),
        Query("ttft_p50_seconds", _quantile(0.5, rules.TTFT_BUCKETS)),
        Query("ttft_p90_seconds", _quantile(0.9, rules.TTFT_BUCKETS)),
        Query("tpot_p50_seconds", _quantile(0.5, rules.TPOT_BUCKETS)),
        Query("tpot_p90_seconds", _quantile(0.9, rules.TPOT_BUCKETS)),
        Query("transfers_per_second", rules.NIXL_TRANSFERS, per_phase=False),
        Query("bytes_per_second", rules.NIXL_BYTES_RATE, per_phase=False),
        Query("seconds_per_transfer", f"{rules.NIXL_TRANSFER_SECONDS} / {rules.NIXL_TRANSFERS}", per_phase=False),
        Query("link_bytes_per_second", rules.NIXL_LINK_BYTES_PER_SECOND, per_phase=False),
        # Over the last 5 minutes from Prometheus; over the window between two scrapes from endpoints.
        Query("failed_transfers", rules.NIXL_FAILURES, per_phase=False),
    ]


PHASE_FIGURES = tuple(q.figure for q in prometheus_queries() if q.per_phase)
TRANSFER_FIGURES = tuple(q.figure for q in prometheus_queries() if not q.per_phase)


@dataclass
class Snapshot:
    """One refresh: figures per phase and for the KV transfer; None where there is no data."""

    source: str
    taken_at: float
    window_seconds: float | None
    phases: dict[str, dict[str, float | None]] = field(default_factory=dict)
    kv_transfer: dict[str, float | None] = field(default_factory=dict)
    unmapped_replicas: list[str] = field(default_factory=list)  # engines whose phase is unknown

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "taken_at": self.taken_at, "window_seconds": self.window_seconds,
                "phases": self.phases, KV_TRANSFER: self.kv_transfer, "unmapped_replicas": self.unmapped_replicas}


def _empty(source: str, window: float | None) -> Snapshot:
    return Snapshot(source=source, taken_at=time.time(), window_seconds=window,
                    phases={p: dict.fromkeys(PHASE_FIGURES) for p in PHASES},
                    kv_transfer=dict.fromkeys(TRANSFER_FIGURES))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


# ── From Prometheus ────────────────────────────────────────────────────────────────────────────

class SourceError(RuntimeError):
    """The source could not be read (unreachable, not Prometheus, an error answer)."""


def from_prometheus(url: str, get: Callable[[str, dict[str, str]], Any]) -> Snapshot:
    """`get(url, params) -> parsed JSON` of Prometheus's HTTP API."""
    snapshot = _empty(f"prometheus {url}", None)
    for query in prometheus_queries():
        answer = get(f"{url.rstrip('/')}/api/v1/query", {"query": query.expr})
        if not isinstance(answer, dict) or answer.get("status") != "success":
            raise SourceError(f"{url}: query {query.figure} answered {str(answer)[:200]}")
        for item in answer["data"]["result"]:
            value = _finite(float(item["value"][1]))
            if not query.per_phase:
                snapshot.kv_transfer[query.figure] = value
            elif item["metric"].get("phase") in snapshot.phases:
                snapshot.phases[item["metric"]["phase"]][query.figure] = value
    return snapshot


# ── From Ray's metrics endpoints ───────────────────────────────────────────────────────────────

Samples = list[tuple[str, dict[str, str], float]]


def replica_phases(scraped: Iterable[Samples]) -> dict[str, str]:
    phases = {}
    prefixes = {prefix: phase for phase, prefix in PHASE_DEPLOYMENT_PREFIX.items()}
    for page in scraped:
        for name, labels, _ in page:
            if name == rules.REPLICA_STARTS:
                for prefix, phase in prefixes.items():
                    if labels.get("deployment", "").startswith(prefix):
                        phases[labels.get("replica", "")] = phase
    return phases


def _series(page: Samples, name: str) -> dict[tuple[tuple[str, str], ...], tuple[dict[str, str], float]]:
    return {tuple(sorted(labels.items())): (labels, value) for sample, labels, value in page if sample == name}


def _deltas(before: Samples, after: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    """Growth of each counter series between two scrapes; a series new in `after` grew from 0, one
    that went down was restarted (counted from 0 too), as Prometheus's rate() reads resets."""
    old = _series(before, name)
    grown = []
    for key, (labels, value) in _series(after, name).items():
        previous = old.get(key, (labels, 0.0))[1]
        grown.append((labels, value - previous if value >= previous else value))
    return grown


def from_ray_endpoints(pages_before: list[Samples], pages_after: list[Samples], window: float,
                       source: str) -> Snapshot:
    """Figures from two scrapes of the same endpoints, `window` seconds apart."""
    snapshot = _empty(source, window)
    phase_of = replica_phases(pages_after)
    before = [s for page in pages_before for s in page]
    after = [s for page in pages_after for s in page]
    unmapped: set[str] = set()

    def phase(labels: dict[str, str]) -> str | None:
        found = phase_of.get(labels.get("ReplicaId", ""))
        if found is None:
            unmapped.add(labels.get("ReplicaId", "") or "(none)")
        return found

    for p in PHASES:
        snapshot.phases[p]["replicas"] = float(sum(1 for v in phase_of.values() if v == p))
    _engine_gauges(snapshot, after, phase)
    _request_rates(snapshot, before, after, phase, window)
    _latency_quantiles(snapshot, before, after, phase)
    _kv_transfer(snapshot.kv_transfer, before, after, window)
    snapshot.unmapped_replicas = sorted(unmapped)
    return snapshot


def _engine_gauges(snapshot: Snapshot, after: Samples, phase: Callable[[dict[str, str]], str | None]) -> None:
    """Running and waiting requests summed per phase, KV cache use at its fullest engine."""
    for figure, metric, combine in (("running", rules.VLLM_RUNNING, sum), ("waiting", rules.VLLM_WAITING, sum),
                                    ("kv_cache_usage", rules.VLLM_KV_CACHE_USAGE, max)):
        values: dict[str, list[float]] = defaultdict(list)
        for labels, value in _series(after, metric).values():
            if (found_phase := phase(labels)) is not None:
                values[found_phase].append(value)
        for name, found in values.items():
            snapshot.phases[name][figure] = combine(found)


def _request_rates(snapshot: Snapshot, before: Samples, after: Samples,
                   phase: Callable[[dict[str, str]], str | None], window: float) -> None:
    """Finished requests per second, for each phase that has a replica."""
    requests: dict[str, float] = defaultdict(float)
    for labels, grown in _deltas(before, after, rules.VLLM_REQUEST_SUCCESS):
        if (found_phase := phase(labels)) is not None:
            requests[found_phase] += grown
    for p in PHASES:
        if snapshot.phases[p]["replicas"]:
            snapshot.phases[p]["requests_per_second"] = requests[p] / window


def _latency_quantiles(snapshot: Snapshot, before: Samples, after: Samples,
                       phase: Callable[[dict[str, str]], str | None]) -> None:
    """TTFT and TPOT p50/p90 per phase, from the histogram buckets that grew in the window."""
    for prefix, histogram in (("ttft", rules.VLLM_TTFT), ("tpot", rules.VLLM_TPOT)):
        buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
        for labels, grown in _deltas(before, after, f"{histogram}_bucket"):
            if (found_phase := phase(labels)) is not None:
                buckets[found_phase][float(labels["le"])] += grown
        for name, counts in buckets.items():
            snapshot.phases[name][f"{prefix}_p50_seconds"] = histogram_quantile(0.5, counts)
            snapshot.phases[name][f"{prefix}_p90_seconds"] = histogram_quantile(0.9, counts)


def _kv_transfer(kv: dict[str, float | None], before: Samples, after: Samples, window: float) -> None:
    """NIXL's KV transfers in the window: rate, bytes, time per transfer, link speed, failures."""
    totals = {name: sum(g for _, g in _deltas(before, after, name))
              for name in (f"{rules.NIXL_XFER_TIME}_count", f"{rules.NIXL_XFER_TIME}_sum", f"{rules.NIXL_BYTES}_sum",
                           rules.NIXL_FAILED)}
    transfers, seconds = totals[f"{rules.NIXL_XFER_TIME}_count"], totals[f"{rules.NIXL_XFER_TIME}_sum"]
    moved = totals[f"{rules.NIXL_BYTES}_sum"]
    kv["transfers_per_second"] = transfers / window
    kv["bytes_per_second"] = moved / window
    kv["seconds_per_transfer"] = seconds / transfers if transfers else None
    # As recorded: bytes per second of in-flight time, in-flight time per second capped at 1.
    kv["link_bytes_per_second"] = (moved / window) / min(seconds / window, 1) if seconds else None
    kv["failed_transfers"] = totals[rules.NIXL_FAILED]


def scrape(urls: list[str], get_text: Callable[[str], str]) -> list[Samples]:
    pages = []
    for url in urls:
        try:
            pages.append(samples(get_text(url)))
        except ValueError as exc:
            raise SourceError(f"{url}: not Prometheus text ({str(exc)[:200]})") from None
    return pages
