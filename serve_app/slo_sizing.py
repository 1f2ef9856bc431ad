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
A decode replica also must hold that percentile batch in its KV cache, at the typical prompt + output.
The long case sets the floors: its prefill and hand-over, unqueued.

Floors come two ways: at the datasheet peaks (nothing beats them: a target below is refused) and
with the calibration (what the stack is predicted to reach: a target below is a warning).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from serve_app.performance import ReplicaModel
from serve_app.queueing import mdc_wait_percentile, poisson_quantile

# Largest replica count searched: a GPU node group holds at most 64 nodes.
MAX_REPLICAS = 64


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
    mean_batch: float  # sequences decoding at once per replica, on average (inf: it never drains)
    batch_at_percentile: int
    tpot_seconds: float  # at the percentile batch
    sequences_that_fit: int  # in one replica's KV cache at the typical prompt + output


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


def decode_load(decode: ReplicaModel, workload: Workload, targets: Targets, replicas: int) -> DecodeLoad:
    context = workload.decode_context_tokens
    fit = decode.sequences_that_fit(workload.typical_prompt_tokens + workload.typical_output_tokens)
    # Little's law, B = k · step(B) with k = λ/n · O and step(B) = max(f + m·B, c·B): its least
    # fixed point is k·f / (1 - k·m) when k·m < 1 and k·c < 1; otherwise the batch never drains.
    k = workload.requests_per_second / replicas * workload.typical_output_tokens
    fixed, memory, compute = decode.decode_step_terms(context)
    if k * memory >= 1 or k * compute >= 1:
        return DecodeLoad(math.inf, 2**31, math.inf, fit)
    batch = k * fixed / (1 - k * memory)
    at_percentile = max(1, poisson_quantile(batch, targets.objective))
    return DecodeLoad(batch, at_percentile, decode.decode_step_seconds(at_percentile, context), fit)


def decode_meets(load: DecodeLoad, targets: Targets) -> bool:
    return load.tpot_seconds <= targets.tpot_seconds and load.batch_at_percentile <= load.sequences_that_fit


def fewest_replicas(meets: Callable[[int], bool]) -> int | None:
    """The smallest replica count from 1 to MAX_REPLICAS that `meets`, None if none does."""
    return next((n for n in range(1, MAX_REPLICAS + 1) if meets(n)), None)


def prefill_replicas_needed(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload,
                            targets: Targets) -> int | None:
    return fewest_replicas(
        lambda n: ttft_at_percentile(prefill, decode, workload, targets, n) <= targets.ttft_seconds)


def decode_replicas_needed(decode: ReplicaModel, workload: Workload, targets: Targets) -> int | None:
    return fewest_replicas(lambda n: decode_meets(decode_load(decode, workload, targets, n), targets))
