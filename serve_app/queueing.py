"""Percentiles of waiting and of concurrency under Poisson arrivals: the queueing the SLO sizing needs.

Two approximations, stated where they are used:
- Prefill replicas as an M/D/c queue (Poisson arrivals, one prompt length, `c` replicas each doing
  one prefill at a time: prefill is compute-bound, so batching prompts does not shorten them).
  M/D/c has no closed form; the wait's tail is taken from M/M/c (Erlang C: P(W > t) = C(c, a) ·
  e^{-(cμ - λ)t}) with its time scaled by (1 + Cs²)/2 = 1/2 for deterministic service, the
  Allen–Cunneen correction, applied to the whole tail.
- Decode replicas as M/G/∞ (every request joins the running batch at once): the number of sequences
  in a batch is Poisson with the mean Little's law gives, so its percentile is a Poisson quantile.
"""

from __future__ import annotations

import math
from statistics import NormalDist

# Allen–Cunneen: a queue's wait scales with (Ca² + Cs²)/2; Poisson arrivals Ca² = 1, fixed service Cs² = 0.
DETERMINISTIC_SERVICE_WAIT_SCALE = 0.5


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability an arrival waits in M/M/c: `servers` = c, `offered_load` = λ/μ (< c)."""
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    if servers > offered_load + 10 * math.sqrt(offered_load) + 10:
        return 0.0  # ten standard deviations of the Poisson load spare: below 1e-20, and the recursion is O(c)
    blocking = 1.0  # Erlang B by its recursion, stable for any c
    for k in range(1, servers + 1):
        blocking = offered_load * blocking / (k + offered_load * blocking)
    return servers * blocking / (servers - offered_load * (1 - blocking))


def mdc_wait_percentile(rate: float, service_seconds: float, servers: int, percentile: float) -> float:
    """Seconds within which `percentile` of arrivals start service in M/D/c; inf when the queue
    grows without bound (λ · S ≥ c)."""
    load = rate * service_seconds
    if load >= servers:
        return math.inf
    waits = erlang_c(servers, load)
    if waits <= 1 - percentile:
        return 0.0
    drain_rate = servers / service_seconds - rate
    return DETERMINISTIC_SERVICE_WAIT_SCALE * math.log(waits / (1 - percentile)) / drain_rate


def poisson_quantile(mean: float, percentile: float) -> int:
    """Smallest k with P(X ≤ k) ≥ `percentile` for X ~ Poisson(`mean`)."""
    if mean <= 0:
        return 0
    if mean > 500:  # normal approximation, where the sum's e^-mean would underflow
        z = NormalDist().inv_cdf(percentile)
        return math.ceil(mean + z * math.sqrt(mean))
    term = math.exp(-mean)
    total, k = term, 0
    while total < percentile:
        k += 1
        term *= mean / k
        total += term
    return k

