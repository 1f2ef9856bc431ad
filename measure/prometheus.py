"""Totals of metric series from Prometheus text exposition (what a Ray node's /metrics serves).

Parsed by `prometheus_client`'s own text parser (the library Ray exports its metrics with), not by
hand: label values may hold spaces, braces, commas and escaped quotes, and a line may carry a
timestamp after its value.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

# vLLM's NixlConnector metrics (`vllm:nixl_*`) as Ray Serve LLM exports them from each engine:
# histograms of transfer time, bytes and descriptors per transfer, among others.
NIXL_METRIC_PREFIX = "ray_vllm_nixl_"


def metric_totals(text: str, prefix: str) -> dict[str, float]:
    """Sum of every sample of each metric whose name starts with `prefix` (labels folded).

    Keyed by the sample's name: a histogram gives `<name>_sum` and `<name>_count`. Its `_bucket`
    series are left out: their samples are cumulative per `le` bound, so their sum means nothing;
    a summary's quantile samples are left out for the same reason (its `_sum` and `_count` are
    kept). `prometheus_client` names a counter's samples `<name>_total` even where the text wrote
    them without the suffix. Raises ValueError when `text` is not Prometheus text exposition (an
    HTML error page, JSON).
    """
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith(prefix) or sample.name.endswith("_bucket"):
                continue
            if family.type == "summary" and "quantile" in sample.labels:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def nixl_metric_totals(text: str) -> dict[str, float]:
    """`metric_totals` of the ray_vllm_nixl_* series: how many KV transfers, bytes and seconds."""
    return metric_totals(text, NIXL_METRIC_PREFIX)


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of an exposition as (sample name, labels, value); ValueError when not Prometheus text."""
    return [(sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text) for sample in family.samples]


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus's `histogram_quantile` over cumulative bucket counts by upper bound (`+Inf` as
    float('inf')): linear interpolation inside the bucket the rank falls in; the highest finite bound
    when it falls in +Inf; None without observations (Prometheus's NaN)."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != float("inf"):
        return None
    total = buckets[float("inf")]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for upper in bounds:
        count = buckets[upper]
        if count >= rank:
            if upper == float("inf"):
                return bounds[-2] if len(bounds) > 1 else None
            if lower == 0.0 and upper <= 0:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below) if count > below else upper
        lower, below = upper, count
    return None
