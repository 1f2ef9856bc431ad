"""The workload a stack is sized for, and the verdict on whether its replicas meet the latency targets.

`WorkloadSettings` are the stack keys of the traffic at peak (peakRequestsPerSecond) and the request
shapes (typical and long prompt and output tokens); the targets are the SLO keys the alerts already
use (ttftSloSeconds, tpotSloSeconds, sloObjective: the percentile judged). `stack_slo` runs the
performance model (serve_app/slo_sizing.py) for each phase on its own GPU type and says how many
replicas the workload needs, and whether the configured ones (at the autoscaling maximum, at peak)
are enough.

A target no replica count can meet on the phase's GPU, even at the datasheet's peaks, is refused
(ConfigError naming the target and the floor). A target the calibrated model says no replica count
meets, or that the configured replicas fall short of at peak, is a warning (`pdctl plan --strict`
fails on it): the calibration is a measurement of one GPU and model shape, not a law.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field, field_validator, model_validator

from components.config.observability import ObservabilitySettings
from facts.gpus import gpu_spec
from facts.instances import InstanceType
from facts.slo_calibration import CALIBRATION, label_for
from serve_app.checks import CheckedApp
from serve_app.config import PHASES, Phase
from serve_app.errors import ConfigError
from serve_app.performance import ReplicaModel
from serve_app.settings import ServeAppSettings
from serve_app.slo_sizing import (
    MAX_REPLICAS,
    Floors,
    Targets,
    Workload,
    decode_load,
    decode_replicas_needed,
    floors,
    prefill_replicas_needed,
    ttft_at_percentile,
    ttft_unbounded,
)
from serve_app.stack_keys import StackKeyModel

# The SLO targets are the alerts' settings (components/config/observability.py).
TTFT_SETTING = ObservabilitySettings.field("ttft_slo_seconds")
TPOT_SETTING = ObservabilitySettings.field("tpot_slo_seconds")


class WorkloadSettings(StackKeyModel):
    """The traffic a stack must serve at peak, and the shapes of its requests."""

    peak_requests_per_second: float = Field(
        alias="peakRequestsPerSecond", gt=0, le=100_000, description='a number > 0 as a string, e.g. "0.5"')
    typical_prompt_tokens: int = Field(alias="typicalPromptTokens", ge=1, description="a whole number ≥ 1")
    typical_output_tokens: int = Field(alias="typicalOutputTokens", ge=1, description="a whole number ≥ 1")
    long_prompt_tokens: int = Field(alias="longPromptTokens", ge=1, description="a whole number ≥ 1")
    long_output_tokens: int = Field(alias="longOutputTokens", ge=1, description="a whole number ≥ 1")

    @field_validator("peak_requests_per_second", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return value  # pydantic refuses it, naming the key
        if not math.isfinite(number):
            raise ValueError("not a finite number")
        return value

    @model_validator(mode="after")
    def _long_at_least_typical(self) -> WorkloadSettings:
        for kind in ("prompt", "output"):
            typical, long = getattr(self, f"typical_{kind}_tokens"), getattr(self, f"long_{kind}_tokens")
            if long < typical:
                raise ConfigError(self.key(f"long_{kind}_tokens"), long,
                                  f"≥ {self.key(f'typical_{kind}_tokens')} ({typical})")
        return self

    def workload(self) -> Workload:
        return Workload(self.peak_requests_per_second, self.typical_prompt_tokens, self.typical_output_tokens,
                        self.long_prompt_tokens, self.long_output_tokens)


@dataclass(frozen=True)
class PhaseSlo:
    """One phase's verdict: the target it is judged on, what it needs, what it has."""

    phase: Phase
    instance_type: str
    gpu: str
    gpus_per_replica: int
    replicas_per_node: int
    target_key: str
    target_seconds: float
    needed_replicas: int | None  # None: no count up to serve_app.slo_sizing.MAX_REPLICAS meets it
    needed_nodes: int | None
    configured_min_replicas: int
    configured_max_replicas: int  # the autoscaling maximum, or the fixed count
    predicted_at_min_seconds: float  # the target's metric at the objective's percentile, at peak
    predicted_at_max_seconds: float
    floor_datasheet_seconds: float  # decode: TPOT at batch 1; prefill: the long prompt's TTFT, unqueued
    floor_predicted_seconds: float
    calibration: str  # how the predicted figures are labelled
    # What bounds the phase at its configured maximum besides time: a queue that never drains, or
    # decode's sequence cap; None when the time alone decides.
    bound: str | None = None

    @property
    def meets_at_max(self) -> bool:
        return self.needed_replicas is not None and self.configured_max_replicas >= self.needed_replicas

    def to_dict(self) -> dict[str, Any]:
        return {**{k: _json_value(v) for k, v in asdict(self).items()}, "meets_at_max": self.meets_at_max}


def _json_value(value: Any) -> Any:
    """Seconds to 0.1 ms; an infinite time (a queue that never drains) as null."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


@dataclass(frozen=True)
class StackSlo:
    """The SLO sizing of a stack: per phase, or why there is none."""

    workload: Workload
    targets: Targets
    phases: tuple[PhaseSlo, ...] = ()
    note: str | None = None  # why it was not sized
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"workload": asdict(self.workload), "targets": asdict(self.targets),
                "phases": {p.phase: p.to_dict() for p in self.phases}, "note": self.note,
                "calibration_source": CALIBRATION.source, "warnings": list(self.warnings)}


def unknown_link(instance: InstanceType) -> str | None:
    """Why the KV hand-over cannot be timed on `instance`, and what would time it; None when it can."""
    if instance.network_bytes_per_second > 0:
        return None
    return (f"{instance.name} has no network bandwidth on record, and the KV hand-over's time needs it "
            "(its network cards in facts/instances.py)")


def replica_models(serving_app: CheckedApp, instances: dict[Phase, InstanceType]) -> dict[Phase, ReplicaModel] | str:
    """Each phase's `ReplicaModel` from a checked app's capacity reports and its phases' instance
    types; a string says why there are none (no model facts, a GPU without vendor figures)."""
    if serving_app.model is None or not serving_app.capacity:
        return "no capacity report (model facts unknown), so the SLO is not sized"
    models: dict[Phase, ReplicaModel] = {}
    for phase in PHASES:
        spec = gpu_spec(instances[phase].gpu_model)
        if spec is None:
            return (f"no vendor figures for the {instances[phase].gpu_model} GPU (facts/gpus.py), "
                    "so the SLO is not sized")
        unknown = unknown_link(instances[phase])
        if unknown:
            return f"{unknown}: the SLO is not sized"
        models[phase] = ReplicaModel.from_capacity(serving_app.capacity[phase], serving_app.model, spec,
                                                   engine=serving_app.config.engine_for(phase),
                                                   stream_tick_seconds=serving_app.config.stream_tick_seconds)
    return models


def refuse_unreachable(prefill: ReplicaModel, decode: ReplicaModel, workload: Workload, targets: Targets,
                       instance_types: dict[Phase, str]) -> Floors:
    """The floors of these GPUs; ConfigError when a target is below what the datasheet allows."""
    bounds = floors(prefill, decode, workload)
    if targets.tpot_seconds < bounds.tpot_datasheet_seconds:
        raise TPOT_SETTING.refuse(
            targets.tpot_seconds,
            f"≥ {bounds.tpot_datasheet_seconds * 1000:.0f} ms on decode's {decode.gpu.name} "
            f"({instance_types['decode']}), or a GPU with more memory bandwidth",
            f"every decode step reads the {decode.weight_bytes / 1e9:.1f} GB of weights at the {decode.gpu.name}'s "
            f"{decode.gpu.memory_bytes_per_second * decode.gpus_per_replica / 1e9:,.0f} GB/s: no replica count "
            "decodes faster")
    if targets.ttft_seconds < bounds.long_ttft_datasheet_seconds:
        raise TTFT_SETTING.refuse(
            targets.ttft_seconds,
            f"≥ {bounds.long_ttft_datasheet_seconds * 1000:.0f} ms for a {workload.long_prompt_tokens}-token prompt "
            f"(longPromptTokens) on prefill's {prefill.gpu.name} ({instance_types['prefill']})",
            f"its prefill at the {prefill.gpu.name}'s datasheet peak plus its KV hand-over take that long: "
            "no replica count is faster")
    return bounds


def stack_slo(settings: WorkloadSettings, targets: Targets, serving_app: CheckedApp,
              instances: dict[Phase, InstanceType]) -> StackSlo:
    """The SLO verdict of a stack whose PD app `serving_app` (a CheckedApp) runs each phase on
    `instances[phase]` (an InstanceType). Raises ConfigError for a target no replica count meets."""
    workload = settings.workload()
    max_model_len = min(serving_app.config.engine_for(p).max_model_len for p in PHASES)
    if workload.long_prompt_tokens + workload.long_output_tokens > max_model_len:
        raise settings.field("long_prompt_tokens").refuse(
            workload.long_prompt_tokens, f"≤ {max_model_len - workload.long_output_tokens} (maxModelLen "
            f"{max_model_len} less longOutputTokens {workload.long_output_tokens})", "vLLM refuses a longer request")
    models = replica_models(serving_app, instances)
    if isinstance(models, str):
        return StackSlo(workload, targets, note=models)
    names: dict[Phase, str] = {p: instances[p].name for p in PHASES}
    prefill, decode = models["prefill"], models["decode"]
    bounds = refuse_unreachable(prefill, decode, workload, targets, names)
    predicted_floor = {"prefill": bounds.long_ttft_predicted_seconds, "decode": bounds.tpot_predicted_seconds}
    datasheet_floor = {"prefill": bounds.long_ttft_datasheet_seconds, "decode": bounds.tpot_datasheet_seconds}
    # The target's metric at the objective's percentile, at peak, as a function of the replica count.
    metrics: dict[Phase, Callable[[int], float]] = {
        "prefill": lambda n: ttft_at_percentile(prefill, decode, workload, targets, n),
        "decode": lambda n: decode_load(decode, workload, targets, n).tpot_seconds}
    needed_replicas = {"prefill": prefill_replicas_needed(prefill, decode, workload, targets),
                       "decode": decode_replicas_needed(decode, workload, targets)}
    bounds_at: dict[Phase, Callable[[int], str | None]] = {
        "prefill": lambda n: ttft_unbounded(prefill, workload, n),
        "decode": lambda n: decode_load(decode, workload, targets, n).shortfall()}
    phases, warnings = [], []
    for phase in PHASES:
        needed, metric = needed_replicas[phase], metrics[phase]
        replicas = serving_app.config.phase(phase).replicas
        per_node = serving_app.nodes[phase].replicas_per_node
        setting, target = ((TTFT_SETTING, targets.ttft_seconds) if phase == "prefill"
                           else (TPOT_SETTING, targets.tpot_seconds))
        result = PhaseSlo(
            phase=phase, instance_type=names[phase], gpu=models[phase].gpu.name,
            gpus_per_replica=models[phase].gpus_per_replica, replicas_per_node=per_node,
            target_key=setting.key, target_seconds=target, needed_replicas=needed,
            needed_nodes=None if needed is None else -(-needed // per_node),
            configured_min_replicas=replicas.min_replicas, configured_max_replicas=replicas.most,
            predicted_at_min_seconds=metric(replicas.min_replicas), predicted_at_max_seconds=metric(replicas.most),
            floor_datasheet_seconds=datasheet_floor[phase], floor_predicted_seconds=predicted_floor[phase],
            calibration=label_for(models[phase].gpu.name),
            bound=bounds_at[phase](replicas.most))
        phases.append(result)
        warnings.extend(_shortfall(result, settings))
    return StackSlo(workload, targets, tuple(phases), warnings=tuple(warnings))


def _shortfall(result: PhaseSlo, settings: WorkloadSettings) -> list[str]:
    rate = f"{settings.key('peak_requests_per_second')} {settings.peak_requests_per_second:g}"
    if result.needed_replicas is None:
        at_most = f" (at {result.configured_max_replicas}: {result.bound})" if result.bound else ""
        return [f"{result.target_key} {result.target_seconds:g}: no {result.phase} replica count up to "
                f"{MAX_REPLICAS} meets it at {rate} on {result.gpu} ({result.instance_type}){at_most}; predicted floor "
                f"{result.floor_predicted_seconds * 1000:.0f} ms ({result.calibration}): raise the target, lower the "
                f"rate, or pick a faster GPU (`pdctl size`)"]
    if result.floor_predicted_seconds > result.target_seconds:
        floor = "the long prompt's time to first token" if result.phase == "prefill" else "a decode step"
        return [f"{result.target_key} {result.target_seconds:g}: {floor} on {result.gpu} ({result.instance_type}) "
                f"is predicted at {result.floor_predicted_seconds * 1000:.0f} ms with no queue "
                f"({result.calibration}): no replica count meets it for every request"]
    if result.meets_at_max:
        return []
    most_key = ServeAppSettings.key(f"{result.phase}_max_replicas")
    return [f"{result.phase}: {result.needed_replicas} replicas needed for {result.target_key} "
            f"{result.target_seconds:g} at {rate}, the stack has at most {result.configured_max_replicas} "
            f"({result.bound or f'predicted {result.predicted_at_max_seconds * 1000:.0f} ms at the percentile'}; "
            f"{result.calibration}): "
            f"raise {most_key}"]
