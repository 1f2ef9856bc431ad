"""The SLO model against measurement: predicted vs measured TTFT and TPOT percentiles at several request
rates, and a calibration fitted to such measurements. Pure arithmetic.

A measurement is open-loop traffic (Poisson arrivals at `requests_per_second`) of one prompt and
output length against a known number of prefill and decode replicas, with the TTFT and TPOT at one
percentile (`pdctl bench` reports p90). `compare` predicts the same percentiles with the sizing's
own functions (the hand-overs reach decode no faster than the link moves them); `fit_calibration`
searches the efficiency factors that minimise the squared log error
(decode bandwidth efficiency from TPOT first, then prefill efficiency and request overhead from
TTFT), so a new GPU run becomes a new `facts.slo_calibration.Calibration`; `fit_ingest_share` fits
what the decode engine loses taking hand-overs in, from TPOT at rates where they arrive often.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from facts.gpus import GpuSpec
from facts.instances import InstanceType
from facts.models import ModelArchitecture
from facts.slo_calibration import CALIBRATION, Calibration
from serve_app.capacity import capacity_report
from serve_app.config import EngineSettings
from serve_app.performance import ReplicaModel
from serve_app.slo_sizing import Targets, Workload, decode_load, ttft_at_percentile

# Search grids: efficiencies in steps of 0.005 from 0.05 to 1, overhead in 1 ms steps up to 0.5 s,
# the decode engine's ingest share in steps of 0.005 from 0 to 1.
EFFICIENCY_GRID = tuple(round(0.05 + 0.005 * i, 3) for i in range(191))
SHARE_GRID = tuple(round(0.005 * i, 3) for i in range(201))
OVERHEAD_GRID = tuple(round(0.001 * i, 3) for i in range(501))


@dataclass(frozen=True)
class MeasuredPoint:
    """One open-loop run: its rate, request shape, and TTFT/TPOT at the comparison's percentile."""

    requests_per_second: float
    prompt_tokens: int
    output_tokens: int
    ttft_seconds: float
    tpot_seconds: float


@dataclass(frozen=True)
class Comparison:
    point: MeasuredPoint
    predicted_ttft_seconds: float
    predicted_tpot_seconds: float

    @property
    def ttft_error(self) -> float:
        """Predicted over measured, less 1: +0.25 is 25 % above the measurement."""
        return self.predicted_ttft_seconds / self.point.ttft_seconds - 1

    @property
    def tpot_error(self) -> float:
        return self.predicted_tpot_seconds / self.point.tpot_seconds - 1


def lab_replica(model: ModelArchitecture, gpu: GpuSpec, *, usable_memory_mib: int, gpu_memory_utilization: float,
                max_model_len: int, kv_bytes_per_second: float, enforce_eager: bool = False,
                calibration: Calibration = CALIBRATION, engine: EngineSettings | None = None) -> ReplicaModel:
    """One replica as the lab runs it: `gpu`'s compute and bandwidth, the engine's memory capped at
    `usable_memory_mib` (an L4's 22,888 MiB on an H200, as deployed), the KV handed over at the rate
    the lab measured (NIXL's bytes over its transfer time); `engine`: the limits it runs with
    (maxNumSeqs, CUDA graphs, batched tokens; None: unbounded). A lab run that fixes the KV cache size
    instead: `dataclasses.replace(replica, kv_budget_bytes=...)`."""
    node = InstanceType(name=f"lab {gpu.name}", vcpus=16, memory_gib=128, network_gbps=kv_bytes_per_second * 8 / 1e9,
                        gpus=1, gpu_model=gpu.name, gpu_memory_mib_usable=usable_memory_mib)
    report = capacity_report(model, node, dtype="auto", max_model_len=max_model_len,
                             gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                             max_num_seqs=None if engine is None else engine.max_num_seqs,
                             max_num_batched_tokens=None if engine is None else engine.max_num_batched_tokens)
    return ReplicaModel.from_capacity(report, model, gpu, calibration, engine=engine)


def _predict(point: MeasuredPoint, prefill: ReplicaModel, decode: ReplicaModel, percentile: float,
             replicas: tuple[int, int]) -> tuple[float, float]:
    workload = Workload(point.requests_per_second, point.prompt_tokens, point.output_tokens,
                        point.prompt_tokens, point.output_tokens)
    targets = Targets(math.inf, math.inf, percentile)
    # Past the link's rate the hand-overs reach decode only as fast as the link moves them.
    hand_overs = min(point.requests_per_second, replicas[0] / prefill.transfer_seconds(point.prompt_tokens))
    return (ttft_at_percentile(prefill, decode, workload, targets, replicas[0]),
            decode_load(decode, workload, targets, replicas[1], hand_overs).tpot_seconds)


def compare(points: list[MeasuredPoint], prefill: ReplicaModel, decode: ReplicaModel, percentile: float,
            replicas: tuple[int, int] = (1, 1)) -> list[Comparison]:
    """The model's TTFT and TPOT at `percentile` for each measured point (`replicas`: prefill, decode)."""
    return [Comparison(point, *_predict(point, prefill, decode, percentile, replicas)) for point in points]


def ttfts_of_arrivals(arrivals: list[float], services: tuple[float, ...], fixed_seconds: float,
                      replicas: int = 1) -> list[float]:
    """Each request's TTFT when the requests arriving at `arrivals` (seconds, ascending) pass the model's
    stations in turn, first come first served, each a fixed `services` time on one of `replicas` (a
    request keeps the replica it starts on: a prefill node hands over on its own link), plus
    `fixed_seconds`. What a finite run gets where the steady state has none: past a station's rate its
    queue grows with every request sent, so the percentile is the transient's over the requests sent."""
    free = [[0.0] * replicas for _ in services]
    ttfts = []
    for arrival in arrivals:
        node = min(range(replicas), key=free[0].__getitem__)
        done = arrival
        for station, service in zip(free, services, strict=True):
            done = station[node] = max(done, station[node]) + service
        ttfts.append(fixed_seconds + done - arrival)
    return ttfts


def pd_stations(prefill: ReplicaModel, decode: ReplicaModel, prompt_tokens: int) -> tuple[tuple[float, ...], float]:
    """PD's stations for `ttfts_of_arrivals` (the prefill, then its hand-over on the link) and the fixed rest
    (the request's overhead and one decode step), as `ttft_at_percentile` counts them."""
    return ((prefill.prefill_seconds(prompt_tokens), prefill.transfer_seconds(prompt_tokens)),
            prefill.request_overhead_seconds + decode.decode_step_seconds(1, prompt_tokens))


def _squared_log_error(pairs: list[tuple[float, float]]) -> float:
    return sum(math.log(predicted / measured) ** 2 if math.isfinite(predicted) else math.inf
               for predicted, measured in pairs)


def fit_calibration(points: list[MeasuredPoint], prefill: ReplicaModel, decode: ReplicaModel, percentile: float,
                    template: Calibration, replicas: tuple[int, int] = (1, 1)) -> Calibration:
    """`template` (its provenance fields filled in by the caller) with the factors that fit `points` best."""
    def tpot_error(efficiency: float) -> float:
        trial = replace(decode, calibration=replace(decode.calibration, decode_bandwidth_efficiency=efficiency))
        return _squared_log_error([(_predict(p, prefill, trial, percentile, replicas)[1], p.tpot_seconds)
                                   for p in points])

    decode_efficiency = min(EFFICIENCY_GRID, key=tpot_error)
    fitted_decode = replace(decode, calibration=replace(decode.calibration,
                                                        decode_bandwidth_efficiency=decode_efficiency))

    def best_overhead(efficiency: float) -> tuple[float, float]:
        """(error, overhead) of the best overhead at this prefill efficiency: the overhead only adds."""
        calibration = replace(prefill.calibration, prefill_compute_efficiency=efficiency, request_overhead_seconds=0.0)
        trial = replace(prefill, calibration=calibration)
        rest = [(_predict(p, trial, fitted_decode, percentile, replicas)[0], p.ttft_seconds) for p in points]
        return min((_squared_log_error([(o + r, m) for r, m in rest]), o) for o in OVERHEAD_GRID)

    errors = {efficiency: best_overhead(efficiency) for efficiency in EFFICIENCY_GRID}
    prefill_efficiency = min(errors, key=lambda e: errors[e][0])
    overhead = errors[prefill_efficiency][1]
    return replace(template, prefill_compute_efficiency=prefill_efficiency,
                   decode_bandwidth_efficiency=decode_efficiency, request_overhead_seconds=overhead)


def fit_ingest_share(points: list[MeasuredPoint], prefill: ReplicaModel, decode: ReplicaModel, percentile: float,
                     replicas: tuple[int, int] = (1, 1)) -> float:
    """The decode engine's ingest share (`Calibration.decode_ingest_share`) that fits the measured TPOT
    best, the other factors as `decode` has them: what the hand-overs arriving between steps cost."""
    def tpot_error(share: float) -> float:
        trial = replace(decode, calibration=replace(decode.calibration, decode_ingest_share=share))
        return _squared_log_error([(_predict(p, prefill, trial, percentile, replicas)[1], p.tpot_seconds)
                                   for p in points])

    return min(SHARE_GRID, key=tpot_error)
