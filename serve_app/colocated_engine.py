"""A colocated engine (one vLLM engine doing prefill and decode) run step by step over arrivals: what its
requests' time to first token and time per output token come to. Pure arithmetic.

vLLM's scheduler, as the model takes it: every step decodes one token of each running sequence and
takes waiting prompts in first come first served, as far as the step's token budget
(`maxNumBatchedTokens` less the running sequences) and the engine's sequence cap (`maxNumSeqs`, what
its KV cache holds) allow; a prompt the budget cannot hold whole is taken in chunks over the next
steps. A step that decodes only takes `decode_step_seconds` at its batch; one that takes prompt tokens
in takes that, their prefill and the calibrated fixed time of such a step (`intake_seconds`, from
vLLM's own inter-token histogram). A prompt's first token comes at the end of the step that finishes
its prefill; the client sees it when Ray Serve LLM next flushes the stream (every
`streamBatchingIntervalMs` from the request's start), plus the time outside the engine
(`stream_overhead_seconds`); the last token is flushed as the stream ends.

Per-request counts are what the closed forms could not carry: a request that decodes through more
intake steps than average is the one at the percentile, and it lives longer, so it sees more of them.
The percentile is taken over seeded Poisson arrivals (`colocated_percentiles`), or over a lab run's own
arrivals (`run_engine`), so a finite run and its prediction see the same requests; both as
measure.latency takes them for the lab.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass, replace

from measure.latency import percentile, poisson_arrival_times
from serve_app.performance import ReplicaModel

# Requests simulated per engine for a percentile: a p99 still has 20 requests above it.
SIMULATED_REQUESTS = 2_000
ARRIVALS_SEED = 0


@dataclass(frozen=True)
class RequestTimes:
    """One request as its client measures it: from its start, seconds."""

    ttft_seconds: float
    e2e_seconds: float
    output_tokens: int

    @property
    def tpot_seconds(self) -> float:
        """(E2E − TTFT) / (tokens − 1), as `pdctl bench` and the lab take it."""
        return (self.e2e_seconds - self.ttft_seconds) / max(1, self.output_tokens - 1)


def flush_time(seconds: float, tick_seconds: float) -> float:
    """When a token produced `seconds` after the request's start reaches the stream's next flush."""
    return tick_seconds * math.ceil(seconds / tick_seconds - 1e-9) if tick_seconds > 0 else seconds


def run_engine(engine: ReplicaModel, arrivals: list[float], prompt_tokens: int,
               output_tokens: int) -> list[RequestTimes]:
    """Every request arriving at `arrivals` (seconds, ascending) on one engine, step by step; decode-only
    stretches between events are advanced in one go (nothing changes within them)."""
    context = prompt_tokens + output_tokens / 2
    cap = engine.batch_cap(prompt_tokens + output_tokens)
    budget = engine.max_num_batched_tokens or prompt_tokens
    fixed = engine.intake_seconds(prompt_tokens) - engine.prefill_seconds(prompt_tokens)
    # A step's time depends on its batch and prompt tokens only, which repeat over thousands of steps:
    # each is worked out once (most of `pdctl size`'s time went to working them out again).
    decode_seconds = functools.cache(lambda batch: engine.decode_step_seconds(batch, context))
    prefill_seconds = functools.cache(engine.prefill_seconds)
    waiting: deque[int] = deque()
    to_prefill = [prompt_tokens] * len(arrivals)
    left: dict[int, int] = {}  # running request → output tokens still to come
    first, last = [0.0] * len(arrivals), [0.0] * len(arrivals)
    now, arrived = 0.0, 0
    while arrived < len(arrivals) or waiting or left:
        while arrived < len(arrivals) and arrivals[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        if not waiting and not left:
            now = arrivals[arrived]
            continue
        batch = len(left)
        decode = decode_seconds(batch) if batch else 0.0
        room, taken = budget - batch, 0
        finished_prefill: list[int] = []
        while waiting and room > 0 and batch + len(finished_prefill) < cap:
            request = waiting[0]
            chunk = min(room, to_prefill[request])
            to_prefill[request] -= chunk
            room, taken = room - chunk, taken + chunk
            if to_prefill[request]:
                break  # the rest of this prompt rides the next step
            finished_prefill.append(waiting.popleft())
        if taken:
            steps, step = 1, decode + fixed + prefill_seconds(taken)
        else:
            # Decode only, until the next arrival or the next sequence to finish.
            steps = min(left.values())
            if arrived < len(arrivals):
                steps = min(steps, max(1, math.ceil((arrivals[arrived] - now) / decode)))
            step = decode
        now += steps * step
        for request in list(left):
            left[request] -= steps
            if left[request] <= 0:
                last[request] = now
                del left[request]
        for request in finished_prefill:
            first[request] = now
            if output_tokens > 1:
                left[request] = output_tokens - 1
            else:
                last[request] = now
    overhead = engine.calibration.stream_overhead_seconds
    return [RequestTimes(flush_time(first[r] - start, engine.stream_tick_seconds) + overhead,
                         last[r] - start + overhead, output_tokens) for r, start in enumerate(arrivals)]


def percentiles(times: list[RequestTimes], share: float) -> tuple[float, float]:
    """(TTFT, TPOT) at the `share` (0–1) percentile of `times`, as measure.latency takes a run's."""
    return (percentile([t.ttft_seconds for t in times], 100 * share),
            percentile([t.tpot_seconds for t in times], 100 * share))


def colocated_percentiles(engine: ReplicaModel, requests_per_second: float, prompt_tokens: int,
                          output_tokens: int, objective: float) -> tuple[float, float]:
    """(TTFT, TPOT) at the `objective` percentile on one engine that receives `requests_per_second`
    (a replica's share of the traffic), over SIMULATED_REQUESTS seeded Poisson arrivals."""
    # A colocated engine hands no KV over the network: the types of one GPU (whose networks differ)
    # share one simulation, which `pdctl size` would otherwise run again for each.
    return _colocated_percentiles(replace(engine, network_bytes_per_second=0.0), requests_per_second,
                                  prompt_tokens, output_tokens, objective)


@functools.lru_cache(maxsize=256)
def _colocated_percentiles(engine: ReplicaModel, requests_per_second: float, prompt_tokens: int,
                           output_tokens: int, objective: float) -> tuple[float, float]:
    return percentiles(run_engine(engine, poisson_arrival_times(requests_per_second, SIMULATED_REQUESTS,
                                                                ARRIVALS_SEED), prompt_tokens, output_tokens),
                       objective)
