"""How many prefill and decode replicas a workload needs to meet its latency targets at a percentile,
on given GPU types: the performance model (serve_app/performance.py) under the queueing of
serve_app/queueing.py. Pure arithmetic.

Time to first token, at the objective's percentile, of a typical request:
    overhead + prefill wait (M/D/c over the prefill replicas, service = the typical prefill)
    + typical prefill + hand-over wait (M/D/c over the prefill nodes' links, service = one prompt's
    KV and state at the network rate: transfers share a node's link) + its KV hand-over
    + one decode step at batch 1.
Time per output token, at the percentile: one decode step at the percentile of the decode batch.
The batch's mean follows from Little's law, B = λ/n · output tokens · step(B) (a fixed point), its
percentile from M/G/∞ (Poisson); sequences are at the typical prompt plus half the typical output.
The engine decodes at most its cap at once (maxNumSeqs, and what its KV cache holds at the typical
prompt + output). The replicas' slots are an M/G/c queue (replicas × cap slots, each held for the
output's steps): at the percentile a request must find a free one (Erlang C ≤ 1 − objective), and the
step is timed at the batch the engine runs (padded to a CUDA graph, or eager above them).
The long case sets the floors: its prefill and hand-over, unqueued.

Colocated (one engine doing both phases, chunked prefill): TTFT and TPOT at the percentile come from
the engine run step by step over seeded Poisson arrivals at each replica's share of the traffic
(serve_app/colocated_engine.py: the steps that take prompts in stall the running sequences, and the
stream's flush ticks delay the first token); `decode_load(..., colocated=True)` keeps the share of the
engine's time those steps take and the sequence slots, as in PD.

Floors come two ways: at the datasheet peaks (nothing beats them: a target below is refused) and
with the calibration (what the stack is predicted to reach: a target below is a warning).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from serve_app.colocated_engine import colocated_percentiles
from serve_app.performance import ReplicaModel
from serve_app.queueing import erlang_c, mdc_wait_percentile, poisson_quantile
from serve_app.settings import ServeAppSettings

# Largest replica count searched: a GPU node group holds at most 64 nodes.
MAX_REPLICAS = 64
MAX_NUM_SEQS_KEY = ServeAppSettings.key("max_num_seqs")


@dataclass(frozen=True)
class Workload:
    """Traffic at peak and the request shapes."""

    requests_per_second: float
    typical_prompt_tokens: int
    typical_output_tokens: int
    long_prompt_tokens: int
    long_output_tokens: int

    @property
    def decode_context_tokens(self) -> float:
        """The context a decoding sequence holds on average: its prompt and half its output."""
        return self.typical_prompt_tokens + self.typical_output_tokens / 2


@dataclass(frozen=True)
class Targets:
    ttft_seconds: float
    tpot_seconds: float
    objective: float  # the share of requests that must meet both: the percentile judged


@dataclass(frozen=True)
class Floors:
    """The best a phase's GPU can do, whatever the replica count."""

    tpot_datasheet_seconds: float  # one decode step at batch 1, at 100 % of nominal bandwidth
    tpot_predicted_seconds: float  # the same, at the calibrated efficiency
    long_ttft_datasheet_seconds: float  # the long prompt's prefill at 100 % of peak + its KV hand-over
    long_ttft_predicted_seconds: float  # the same at the calibrated efficiency, + overhead + one decode step


@dataclass(frozen=True)
class DecodeLoad:
    """The decode replicas' batch at peak, as their engines run it."""

    mean_batch: float | None  # sequences in flight per replica on average, the cap aside; None: never drains
    batch_at_percentile: int | None  # the same at the objective's percentile; None: never drains
    cap: int  # most sequences one engine decodes at once: maxNumSeqs and its KV cache
    cap_reason: str  # which of the two binds, in the user's words
    tpot_seconds: float  # one step at the batch an engine runs at the percentile (its cap at most)
    replicas: int
    sequences_in_flight: float  # what the arrivals keep decoding over all replicas, on average
    waiting_share: float  # of requests that find every sequence slot taken (1: the queue never drains)
    objective: float
    stall_share: float  # of an engine's time its steps stall for what arrives (≥ 1: all of it)
    stall_for: str  # what it stalls for: taking in KV hand-overs (PD), prefilling prompts (colocated)

    @property
    def fits(self) -> bool:
        """At the objective's percentile a request finds a free sequence slot on arrival."""
        return self.waiting_share <= 1 - self.objective

    def shortfall(self) -> str | None:
        """Why the replicas fall short on sequence slots, in a user's words; None when they do not."""
        if self.stall_share >= 1:
            return (f"{self.stall_for} alone would keep each engine busy ({self.stall_share:.0%} of its time): "
                    "it never gets to a decode step")
        slots = f"{self.replicas} replica{'s' if self.replicas > 1 else ''} × {self.cap} sequences ({self.cap_reason})"
        if self.sequences_in_flight >= self.replicas * self.cap:
            return (f"the peak keeps about {self.sequences_in_flight:,.0f} sequences decoding, more than {slots}: "
                    "the decode queue grows without bound")
        if not self.fits:
            return (f"{self.waiting_share:.0%} of requests would wait for a free sequence slot on {slots}, more than "
                    f"the {1 - self.objective:.0%} the objective allows")
        return None


def floors(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload) -> Floors:
    context = workload.decode_context_tokens
    long_prompt = workload.long_prompt_tokens
    return Floors(
        tpot_datasheet_seconds=decode.decode_step_seconds(1, context, datasheet=True),
        tpot_predicted_seconds=decode.decode_step_seconds(1, context),
        long_ttft_datasheet_seconds=prefill.prefill_seconds(long_prompt, datasheet=True)
        + prefill.transfer_seconds(long_prompt),
        long_ttft_predicted_seconds=prefill.request_overhead_seconds + prefill.prefill_seconds(long_prompt)
        + prefill.transfer_seconds(long_prompt) + decode.decode_step_seconds(1, long_prompt),
    )


def ttft_at_percentile(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload, targets: Targets,
                       replicas: int) -> float:
    prompt = workload.typical_prompt_tokens
    service = prefill.prefill_seconds(prompt)
    wait = mdc_wait_percentile(workload.requests_per_second, service, replicas, targets.objective)
    hand_over = prefill.transfer_seconds(prompt)
    # Measured in the lab: past the link's rate the hand-over queue grows without bound (TTFT p90 5 s
    # at 6 requests/s over a 0.37 GB/s link; docs/SIZING.md#validation).
    hand_over_wait = mdc_wait_percentile(workload.requests_per_second, hand_over, replicas, targets.objective)
    return (prefill.request_overhead_seconds + wait + service + hand_over_wait + hand_over
            + decode.decode_step_seconds(1, prompt))


def ttft_unbounded(prefill: ReplicaModel, workload: Workload, replicas: int) -> str | None:
    """What makes the time to first token grow without bound at `replicas` prefill replicas, in a
    user's words (the prefill queue, or the hand-over queue on the KV link); None when neither does."""
    prompt, rate = workload.typical_prompt_tokens, workload.requests_per_second
    plural, verb = ("s", "finish") if replicas > 1 else ("", "finishes")
    prefills = replicas / prefill.prefill_seconds(prompt)
    if rate >= prefills:
        return (f"{replicas} prefill replica{plural} {verb} at most {prefills:,.1f} prompts of {prompt:,} tokens a "
                f"second, the peak brings {rate:g}: the prefill queue grows without bound")
    hand_overs = replicas / prefill.transfer_seconds(prompt)
    if rate >= hand_overs:
        return (f"the KV link of {replicas} prefill node{plural} at {prefill.network_bytes_per_second / 1e9:g} GB/s "
                f"hands over at most {hand_overs:,.1f} prompts of {prompt:,} tokens a second, the peak brings "
                f"{rate:g}: the hand-over queue grows without bound")
    return None


def decode_load(decode: ReplicaModel, workload: Workload, targets: Targets, replicas: int,
                hand_overs_per_second: float | None = None, *, colocated: bool = False) -> DecodeLoad:
    """`hand_overs_per_second`: KV hand-overs reaching the decode replicas (None: the arrival rate,
    each request's as it comes; fewer where a saturated link holds them back). `colocated`: the engine
    prefills the prompts too, in chunks between its decode steps, instead of taking in hand-overs."""
    context = workload.decode_context_tokens
    tokens = workload.typical_prompt_tokens + workload.typical_output_tokens
    fit, cap = decode.sequences_that_fit(tokens), decode.batch_cap(tokens)
    cap_reason = f"{MAX_NUM_SEQS_KEY} {cap}" if cap < fit else f"what its KV cache holds at {tokens:,} tokens each"
    # What arrives stalls the engine's steps while it is taken in: the steps get 1 - ρ of its time.
    arriving = workload.requests_per_second if hand_overs_per_second is None else hand_overs_per_second
    prompt = workload.typical_prompt_tokens
    stall_for = "taking the prompts in" if colocated else "taking in the KV hand-overs"
    stall = (prompt_intake_share(arriving / replicas, decode.intake_seconds(prompt)) if colocated
             else arriving / replicas * decode.ingest_seconds(prompt))
    if stall >= 1:
        return DecodeLoad(None, None, cap, cap_reason, math.inf, replicas, math.inf, 1.0, targets.objective, stall,
                          stall_for)
    stretch = 1 / (1 - stall)
    # Little's law, B = k · step(B) with k = λ/n · O and step(B) = max(f + m·B, c·B): its least
    # fixed point is k·f / (1 - k·m) when k·m < 1 and k·c < 1; otherwise the batch never drains.
    k = workload.requests_per_second / replicas * workload.typical_output_tokens
    fixed, memory, compute = (term * stretch for term in decode.decode_step_terms(context))
    batch = k * fixed / (1 - k * memory) if k * memory < 1 and k * compute < 1 else None
    at_percentile = None if batch is None else max(1, poisson_quantile(batch, targets.objective))
    if colocated and batch is not None and cap >= 1:
        tpot = colocated_percentiles(decode, workload.requests_per_second / replicas, prompt,
                                     workload.typical_output_tokens, targets.objective)[1]
    else:
        # Past the cap an engine runs the cap and the rest wait: the step is the cap's.
        tpot = stretch * decode.decode_step_seconds(cap if at_percentile is None else min(at_percentile, cap),
                                                    context)
    # Sequence slots as M/G/c: replicas × cap slots, each held for the output's steps.
    in_flight = workload.requests_per_second * workload.typical_output_tokens * tpot
    return DecodeLoad(batch, at_percentile, cap, cap_reason, tpot, replicas, in_flight,
                      erlang_c(replicas * cap, in_flight), targets.objective, stall, stall_for)


def prompt_intake_share(prompts_per_second: float, intake_seconds: float) -> float:
    """Of a colocated engine's time, the share its steps spend taking prompts in, at `prompts_per_second`
    Poisson arrivals: prompts that arrive while a step takes others in wait for the next step and share it
    (vLLM schedules every waiting prompt its token budget holds), so the intake steps come at
    λ / (λs + e^(−λs)) a second (s: one intake's time) and their share never reaches 1."""
    load = prompts_per_second * intake_seconds
    return load / (load + math.exp(-load)) if load else 0.0


def decode_meets(load: DecodeLoad, targets: Targets) -> bool:
    return load.fits and load.tpot_seconds <= targets.tpot_seconds


def colocated_ttft(engine: ReplicaModel, workload: Workload, targets: Targets, replicas: int) -> float:
    """TTFT at the percentile when each engine does both phases (serve_app/colocated_engine.py); unbounded
    (inf) where the engine's steps never drain what arrives."""
    load = decode_load(engine, workload, targets, replicas, colocated=True)
    if load.mean_batch is None or load.cap < 1:
        return math.inf
    return colocated_percentiles(engine, workload.requests_per_second / replicas, workload.typical_prompt_tokens,
                                 workload.typical_output_tokens, targets.objective)[0]


def colocated_meets(engine: ReplicaModel, workload: Workload, targets: Targets, replicas: int) -> bool:
    return (colocated_ttft(engine, workload, targets, replicas) <= targets.ttft_seconds
            and decode_meets(decode_load(engine, workload, targets, replicas, colocated=True), targets))


def colocated_replicas_needed(engine: ReplicaModel, workload: Workload, targets: Targets) -> int | None:
    return fewest_replicas(lambda n: colocated_meets(engine, workload, targets, n))


@dataclass(frozen=True)
class HandOver:
    """A typical prompt's KV hand-over on the stack's link, and what the peak gets if NIXL falls back
    to a slower path (UCX on EFA: a failure mode, not a configuration)."""

    bytes_moved: int  # one typical prompt's KV and state
    link_bytes_per_second: float
    link_seconds: float
    per_node_per_second: float  # hand-overs one prefill node's link carries a second
    fallback_bytes_per_second: float
    fallback_seconds: float
    fallback_per_node_per_second: float
    fallback_ttft_seconds: float  # at the configured prefill replicas, at peak (inf: the queue never drains)
    fallback_tpot_seconds: float  # at the configured decode replicas, at peak, ingest included


def hand_over(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload, targets: Targets,
              replicas: tuple[int, int], fallback_bytes_per_second: float) -> HandOver:
    """The hand-over at `replicas` (prefill, decode) on the stack's link and on the fallback's."""
    prompt = workload.typical_prompt_tokens
    slow = {phase: replace(model, network_bytes_per_second=fallback_bytes_per_second)
            for phase, model in (("prefill", prefill), ("decode", decode))}
    seconds, fallback = prefill.transfer_seconds(prompt), slow["prefill"].transfer_seconds(prompt)
    return HandOver(
        bytes_moved=prompt * prefill.kv_bytes_per_token + prefill.state_bytes_per_sequence,
        link_bytes_per_second=prefill.network_bytes_per_second, link_seconds=seconds,
        per_node_per_second=1 / seconds, fallback_bytes_per_second=fallback_bytes_per_second,
        fallback_seconds=fallback, fallback_per_node_per_second=1 / fallback,
        fallback_ttft_seconds=ttft_at_percentile(slow["prefill"], slow["decode"], workload, targets, replicas[0]),
        fallback_tpot_seconds=decode_load(slow["decode"], workload, targets, replicas[1],
                                          min(workload.requests_per_second, replicas[0] / fallback)).tpot_seconds)


def fewest_replicas(meets: Callable[[int], bool]) -> int | None:
    """The smallest replica count from 1 to MAX_REPLICAS that `meets`, None if none does. More replicas
    share the same traffic, so a count that meets stays met above it: bisected, because each colocated
    try simulates an engine (`pdctl size` asks every GPU type, and a linear walk to MAX_REPLICAS took
    most of its time)."""
    if not meets(MAX_REPLICAS):
        return None
    low, high = 0, MAX_REPLICAS  # meets(high); low: 0 or a count that does not meet
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


def prefill_replicas_needed(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload,
                            targets: Targets) -> int | None:
    return fewest_replicas(
        lambda n: ttft_at_percentile(prefill, decode, workload, targets, n) <= targets.ttft_seconds)


def decode_replicas_needed(decode: ReplicaModel, workload: Workload, targets: Targets) -> int | None:
    return fewest_replicas(lambda n: decode_meets(decode_load(decode, workload, targets, n), targets))


def highest_rate(meets: Callable[[float], bool], most: float = 10_000.0) -> float:
    """The highest request rate (to 2 significant figures) at which `meets` holds, 0 if none does:
    `meets` must hold below a rate and fail above it."""
    low, high = 0.0, most
    if not meets(1e-6):
        return 0.0
    while high - low > max(low, 1e-3) * 0.005:
        middle = (low + high) / 2
        low, high = (middle, high) if meets(middle) else (low, middle)
    return low


def pd_meets(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload, targets: Targets,
             replicas: tuple[int, int]) -> bool:
    """Whether `replicas` (prefill, decode) meet both targets at the workload's peak."""
    return (ttft_at_percentile(prefill, decode, workload, targets, replicas[0]) <= targets.ttft_seconds
            and decode_meets(decode_load(decode, workload, targets, replicas[1]), targets))
