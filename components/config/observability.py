"""How long Prometheus keeps metrics and on how much disk, and the SLOs the alerts hold the endpoint to."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from facts.metrics import VLLM_TPOT_BUCKETS_SECONDS, VLLM_TTFT_BUCKETS_SECONDS
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackField, StackKeyModel

# beyond it: the WAL and the head block live outside that budget, and the Prometheus storage docs
# advise a size limit well below the disk (they suggest 80-85 %), so the volume never fills first.
METRICS_RETENTION_SIZE_SHARE = 0.8
# The slow SLO burn alerts look back 6 h and the dashboards default to a day: less retention
# would leave them blind.
MIN_METRICS_RETENTION_DAYS = 1
MAX_METRICS_RETENTION_DAYS = 366
_PROMETHEUS_RETENTION = re.compile(r"^([1-9]\d*)([dw])$")
# A fraction of requests the TTFT/TPOT SLOs promise; the burn-rate alerts (14.4x / 6x of the error
# budget, the SRE workbook's multiwindow alerts) need a budget small enough to burn.
MIN_SLO_OBJECTIVE = 0.9
MAX_SLO_OBJECTIVE = 0.9999


def retention_days(value: str) -> int | None:
    """Days in a Prometheus retention of whole days or weeks ("15d", "2w"), None if not one."""
    match = _PROMETHEUS_RETENTION.match(value)
    if match is None:
        return None
    return int(match.group(1)) * (7 if match.group(2) == "w" else 1)


def _bucket_bound(value: float, bounds: tuple[float, ...], setting: StackField, histogram: str) -> float:
    # An SLO threshold between two bucket bounds cannot be counted exactly from a classic histogram:
    # the burn rate would be an interpolation, not a count of requests over the threshold.
    if value not in bounds:
        raise setting.refuse(value, "one of " + ", ".join(f"{b:g}" for b in bounds),
                             f"the SLO is counted from vLLM's {histogram} histogram, whose buckets end at these bounds")
    return value


class ObservabilitySettings(StackKeyModel):
    """How long Prometheus keeps metrics and on how much disk, and the SLOs the alerts hold the
    endpoint to."""

    retention: str = Field(alias="metricsRetention", description=(
        f"whole days or weeks as Prometheus writes them, {MIN_METRICS_RETENTION_DAYS}d to "
        f"{MAX_METRICS_RETENTION_DAYS}d, e.g. 15d or 2w"))
    storage_gib: int = Field(alias="metricsStorageGiB", ge=10, le=16384, description="an integer from 10 to 16384")
    ttft_slo_seconds: float = Field(alias="ttftSloSeconds", description=(
        "one of vLLM's time-to-first-token bucket bounds, as a string: "
        + ", ".join(f"{b:g}" for b in VLLM_TTFT_BUCKETS_SECONDS)))
    tpot_slo_seconds: float = Field(alias="tpotSloSeconds", description=(
        "one of vLLM's time-per-output-token bucket bounds, as a string: "
        + ", ".join(f"{b:g}" for b in VLLM_TPOT_BUCKETS_SECONDS)))
    slo_objective: float = Field(alias="sloObjective", ge=MIN_SLO_OBJECTIVE, le=MAX_SLO_OBJECTIVE, description=(
        f'a fraction from {MIN_SLO_OBJECTIVE} to {MAX_SLO_OBJECTIVE} as a string, e.g. "0.99"'))

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        days = retention_days(value)
        if days is None or not MIN_METRICS_RETENTION_DAYS <= days <= MAX_METRICS_RETENTION_DAYS:
            raise ConfigError(cls.key("retention"), value, cls.model_fields["retention"].description or "",
                              "the slow SLO burn alerts look back 6 hours and the dashboards a day")
        return value

    @field_validator("ttft_slo_seconds")
    @classmethod
    def _ttft_bound(cls, value: float) -> float:
        return _bucket_bound(value, VLLM_TTFT_BUCKETS_SECONDS, cls.field("ttft_slo_seconds"), "time_to_first_token")

    @field_validator("tpot_slo_seconds")
    @classmethod
    def _tpot_bound(cls, value: float) -> float:
        return _bucket_bound(value, VLLM_TPOT_BUCKETS_SECONDS, cls.field("tpot_slo_seconds"),
                             "request_time_per_output_token")

    @property
    def retention_size(self) -> str:
        """Prometheus `retentionSize` (its GB are GiB) for the volume."""
        return f"{int(self.storage_gib * METRICS_RETENTION_SIZE_SHARE)}GB"

    @property
    def error_budget(self) -> float:
        return 1 - self.slo_objective
