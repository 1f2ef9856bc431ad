"""Latency and throughput arithmetic for streamed LLM requests. Pure functions, stable API.

Definitions (the same as `vllm bench serve`, so numbers compare):
- TTFT: request sent → first streamed chunk with content. Under PD this includes prefill, the KV
  transfer to the decode GPU and the first decode step, so it is measured on the client.
- ITL (inter-token latency): gap between consecutive content chunks as the client receives them,
  pooled over all requests. It measures the stream, not decoding, wherever the server batches its
  stream: Ray Serve LLM flushes every `stream_batching_interval_ms` (the stack's
  streamBatchingIntervalMs, default 50 ms), so its gaps are ~0 (tokens of one flush) or ~one interval
  (the next flush) whatever the decode speed (ITL_CAVEAT).
- TPOT (time per output token): (E2E − TTFT) / (output tokens − 1), per request with ≥ 2 tokens.
  It divides by the server's own token count (usage), so flush batching averages out: the
  per-token decode figure to compare across servers.
- E2E: request sent → stream closed.
- Throughput: output tokens (and input + output tokens) over the wall time of the whole run.
- Goodput: requests that met every service-level objective given (TTFT, TPOT, E2E), per second of
  the run, as `vllm bench serve --goodput` counts them.
Percentiles interpolate linearly between closest ranks (numpy's default method).

Times are seconds from one monotonic clock (the bench reads its event loop's `loop.time()`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PERCENTILES = (50, 90, 99)

# Ray Serve LLM's stream batching: docs/SOURCES.md#stream-batching.
ITL_CAVEAT = (
    "ITL is the gap between streamed chunks as they arrive. Ray Serve LLM flushes its stream every "
    "stream_batching_interval_ms (the stack's streamBatchingIntervalMs, default 50 ms), so under it ITL shows "
    "the flush (gaps of ~0 or ~one interval), not decoding: read TPOT, which divides by the server's token "
    "count, for per-token speed."
)


@dataclass(frozen=True)
class RequestSample:
    start: float
    end: float
    token_times: Sequence[float] = field(default_factory=tuple)  # arrival of each content chunk
    output_tokens: int | None = None  # from the server's usage; None: one token per chunk
    prompt_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and len(self.token_times) > 0

    @property
    def tokens_out(self) -> int:
        return self.output_tokens if self.output_tokens is not None else len(self.token_times)

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.start

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def tpot(self) -> float | None:
        if self.tokens_out < 2:
            return None
        return (self.e2e - self.ttft) / (self.tokens_out - 1)

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False)]


def poisson_arrival_times(rate: float, count: int, seed: int) -> list[float]:
    """Seconds from the start at which `count` requests of a Poisson process of `rate` a second arrive:
    seeded, so an open-loop run's arrivals can be replayed (and predicted) exactly."""
    rng, due, times = random.Random(seed), 0.0, []
    for _ in range(count):
        due += rng.expovariate(rate)
        times.append(due)
    return times


def percentile(values: Sequence[float], q: float) -> float:
    """q-th percentile (0–100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float]) -> dict[str, float] | None:
    """mean and p50/p90/p99 of `values`; None when there are none."""
    if not values:
        return None
    out = {"mean": sum(values) / len(values)}
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(values, q)
    return out


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must all meet to count as goodput; None: not required.
    A request with one output token has no TPOT and cannot miss that objective."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))

    def met_by(self, sample: RequestSample) -> bool:
        if not sample.ok:
            return False
        tpot = sample.tpot
        return ((self.ttft_s is None or sample.ttft <= self.ttft_s)
                and (self.tpot_s is None or tpot is None or tpot <= self.tpot_s)
                and (self.e2e_s is None or sample.e2e <= self.e2e_s))

    def to_dict(self) -> dict:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}


def goodput(samples: Sequence[RequestSample], slo: Slo, wall_seconds: float) -> dict:
    """How many requests met every objective of `slo`: count, share of all requests, and per second."""
    good = sum(1 for s in samples if slo.met_by(s))
    return {
        "slo": slo.to_dict(),
        "good_requests": good,
        "fraction": good / len(samples) if samples else None,
        "requests_per_s": good / wall_seconds if wall_seconds > 0 else None,
    }


def per_request(samples: Sequence[RequestSample]) -> dict[str, list]:
    """Each request's start (seconds after the first), TTFT and E2E (None for a failed request) and
    output tokens, in completion order, to the microsecond: the raw data beside a summary, in columns."""
    first = min((s.start for s in samples), default=0.0)
    return {"start_s": [round(s.start - first, 6) for s in samples],
            "ttft_s": [round(s.ttft, 6) if s.ok else None for s in samples],
            "e2e_s": [round(s.e2e, 6) if s.ok else None for s in samples],
            "output_tokens": [s.tokens_out if s.ok else None for s in samples]}


def summarize(samples: Iterable[RequestSample], wall_seconds: float | None = None, slo: Slo | None = None) -> dict:
    """Summary of a benchmark run.

    `wall_seconds`: duration of the whole run; defaults to first start → last end of the samples.
    Keys: requests{total,succeeded,failed}, errors (distinct messages), ttft_s/itl_s/tpot_s/e2e_s
    (each {mean,p50,p90,p99} or None), input_tokens, output_tokens, wall_s, requests_per_s,
    output_tokens_per_s, total_tokens_per_s; with an `slo`, goodput (see `goodput`).
    """
    samples = list(samples)
    ok = [s for s in samples if s.ok]
    if wall_seconds is None:
        wall_seconds = (max(s.end for s in samples) - min(s.start for s in samples)) if samples else 0.0
    output_tokens = sum(s.tokens_out for s in ok)
    input_tokens = sum(s.prompt_tokens or 0 for s in ok)

    def rate(amount: float) -> float | None:
        return amount / wall_seconds if wall_seconds > 0 else None

    summary = {
        "requests": {"total": len(samples), "succeeded": len(ok), "failed": len(samples) - len(ok)},
        "errors": sorted({s.error or "empty stream" for s in samples if not s.ok}),
        "ttft_s": distribution([s.ttft for s in ok]),
        "itl_s": distribution([gap for s in ok for gap in s.itls]),
        "tpot_s": distribution([t for s in ok if (t := s.tpot) is not None]),
        "e2e_s": distribution([s.e2e for s in ok]),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "wall_s": wall_seconds,
        "requests_per_s": rate(len(ok)),
        "output_tokens_per_s": rate(output_tokens),
        "total_tokens_per_s": rate(input_tokens + output_tokens),
    }
    if slo:
        summary["goodput"] = goodput(samples, slo, wall_seconds)
    return summary
