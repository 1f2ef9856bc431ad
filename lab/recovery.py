"""What a fault or a long run did to the service, from what the lab recorded: pure functions.

- `outage`: over the requests of a steady load, which failed after the fault and when requests
  succeeded again.
- `longest_silence`: over the same requests, the longest stretch in which no token reached any client
  (an outage that queues requests instead of failing them shows here).
- `back_after`: over periodic observations of Serve, when the killed thing was back.
- `counter_increase`: between two Prometheus scrapes, how much a counter (a histogram's `_count`)
  grew, a restarted replica's series (reset to zero, or new) counted from zero.
- `memory_trend`: over samples of one process's (or GPU's) memory, whether it grew.

Times are seconds on one monotonic clock (time.perf_counter on the lab host).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from measure.latency import RequestSample


def outage(samples: Sequence[RequestSample], injected_at: float) -> dict[str, Any]:
    """Requests hit by a fault injected at `injected_at`, and how long until they succeed again.

    Counted: every request still open at the injection or started after it. `time_to_success_s`:
    from the injection to the end of the first successful request that started after the last
    failed one started (after the injection, with no failure: the first success started after it).
    None when no request succeeded after the last failure: not recovered within the run.
    """
    exposed = [s for s in samples if s.end >= injected_at]
    failed = [s for s in exposed if not s.ok]
    since = max((s.start for s in failed), default=injected_at)
    recovered = [s.end for s in exposed if s.ok and s.start >= since]
    errors = Counter(error_kind(s.error) for s in failed)
    return {
        "requests_after_injection": len(exposed),
        "failed": len(failed),
        "first_failure_after_s": round(min(s.end for s in failed) - injected_at, 3) if failed else None,
        "last_failure_after_s": round(max(s.end for s in failed) - injected_at, 3) if failed else None,
        "time_to_success_s": round(min(recovered) - injected_at, 3) if recovered else None,
        "errors": dict(errors.most_common(5)),
    }


def longest_silence(samples: Sequence[RequestSample], start: float, end: float) -> float | None:
    """The longest stretch within [start, end] in which no request received a token, in seconds: under a
    load that keeps arriving, how long the service stopped answering, whether the requests meanwhile
    failed or waited. Tokens of requests that failed later count (they reached the client). None for
    an empty window."""
    if end <= start:
        return None
    edges = [start, *sorted(t for s in samples for t in s.token_times if start <= t <= end), end]
    return round(max(b - a for a, b in itertools.pairwise(edges)), 3)


_REQUEST_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}")


def error_kind(error: str | None) -> str:
    """An error without its request ids, cut short: what to count failures by."""
    return _REQUEST_ID.sub("<id>", error or "no tokens")[:160]


@dataclass(frozen=True)
class Observation:
    """Serve as the lab saw it at `at`: per deployment the ids of its RUNNING replicas, and the
    Serve controller's process (None while it cannot be reached)."""

    at: float
    running: Mapping[str, frozenset[str]]
    controller_pid: int | None


def back_after(observations: Sequence[Observation], injected_at: float,
               is_back: Callable[[Observation, Observation], bool]) -> float | None:
    """Seconds from the injection to the first observation after it where `is_back(before, now)`,
    `before` being the last observation before the injection. None: never within the run."""
    before = [o for o in observations if o.at < injected_at]
    if not before:
        raise ValueError("no observation before the injection")
    for now in (o for o in observations if o.at >= injected_at):
        if is_back(before[-1], now):
            return round(now.at - injected_at, 3)
    return None


def replica_replaced(deployment: str) -> Callable[[Observation, Observation], bool]:
    """As many RUNNING replicas of `deployment` as before, one of them new (Serve replaced the killed one)."""
    def check(before: Observation, now: Observation) -> bool:
        old, new = before.running.get(deployment, frozenset()), now.running.get(deployment, frozenset())
        return len(new) >= len(old) > 0 and bool(new - old)
    return check


def controller_replaced(before: Observation, now: Observation) -> bool:
    """A Serve controller answering again, in a new process."""
    return now.controller_pid is not None and now.controller_pid != before.controller_pid


def _series(text: str, name: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def counter_increase(before: str, after: str, name: str) -> float | None:
    """How much the counter `name` grew from scrape `before` to scrape `after`, summed over its
    series. A series that is new, or lower than before (its replica restarted), counts from zero.
    None when `after` has no such series at all (nothing exported it)."""
    old, new = _series(before, name), _series(after, name)
    if not new:
        return None
    return sum(value - old[key] if key in old and value >= old[key] else value for key, value in new.items())


def memory_trend(samples: Sequence[tuple[float, float]], *, warmup_s: float, tolerance: float = 0.05,
                 min_growth: float = 64.0) -> dict[str, Any]:
    """Whether memory grew over a run: (time, MiB) samples, the first `warmup_s` seconds left out.

    Compares the median of the first and the last quarter of what remains (medians, so one
    allocation spike does not decide); `grew` needs both a relative rise above `tolerance` and an
    absolute one above `min_growth` MiB. The least-squares slope is reported beside it, in MiB per
    minute, to read, not to decide.
    """
    if not samples:
        return {"samples": 0, "grew": None}
    start = samples[0][0] + warmup_s
    kept = [(t, v) for t, v in samples if t >= start]
    if len(kept) < 8:
        return {"samples": len(kept), "grew": None, "why": "fewer than 8 samples after warm-up"}
    quarter = len(kept) // 4
    first = statistics.median(v for _, v in kept[:quarter])
    last = statistics.median(v for _, v in kept[-quarter:])
    times = [t for t, _ in kept]
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(v for _, v in kept)
    spread = sum((t - mean_t) ** 2 for t in times)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in kept) / spread if spread else 0.0
    rise = last - first
    return {
        "samples": len(kept),
        "first_quarter_median_mib": round(first, 1),
        "last_quarter_median_mib": round(last, 1),
        "rise_mib": round(rise, 1),
        "slope_mib_per_min": round(slope * 60, 3),
        "grew": rise > min_growth and rise > tolerance * max(first, 1.0),
    }
