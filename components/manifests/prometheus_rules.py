"""What the PD endpoint's metrics mean, as Prometheus rules: recording rules that give every vLLM
and NIXL figure a `phase` (prefill or decode), and alerts for the silent failures this product
exists to prevent. Built from the validated settings; returned as a PrometheusRule
(monitoring.coreos.com/v1) whose `spec.groups` is a Prometheus rule file, so `promtool check
rules` and `promtool test rules` read exactly what the cluster gets (tests/components).

Telling prefill from decode: vLLM's metrics (`ray_vllm_*`) carry the Serve replica's id
(`ReplicaId`) but not its deployment; Serve's own replica metrics carry both (`replica`,
`deployment`). Every replica increments `ray_serve_deployment_replica_starts_total` once when it
starts (ray/serve/_private/replica.py), so that series names each live replica from its first
second, requests or not: `pd:replica_phase:info` maps ReplicaId → phase, and every per-phase
figure joins on it. The deployment names are Ray Serve LLM's (`Prefill:<id>`, `Decode:<id>`,
serve_app.render.deployment_names).

Label values of `le` are written as Prometheus 3 stores them (a float with a decimal point,
"2.5", "1.0"; Prometheus 3.0 migration guide) and as Ray exports them.

Series names recorded here are what the dashboard (dashboards/pd.json) and `pdctl top` read, so the
three cannot disagree on what "TTFT of prefill" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.config.observability import ObservabilitySettings
from components.config.serving import ServingSettings
from components.scheduling import MONITORING_NAMESPACE
from facts.metrics import DCGM_FB_FREE, DCGM_FB_USED
from serve_app.capacity import UCX_ON_EFA_BYTES_PER_SECOND
from serve_app.config import PHASES as APP_PHASES
from serve_app.render import deployment_names

PROMETHEUS_RULE_API_VERSION = "monitoring.coreos.com/v1"
PHASES = APP_PHASES
RUNBOOK_DOC = "docs/OBSERVABILITY.md#runbooks"

# ── Source metrics (Ray's prefix; facts/metrics.py says where each comes from) ─────────────────
REPLICA_STARTS = "ray_serve_deployment_replica_starts_total"
VLLM_RUNNING = "ray_vllm_num_requests_running"
VLLM_WAITING = "ray_vllm_num_requests_waiting"
VLLM_KV_CACHE_USAGE = "ray_vllm_kv_cache_usage_perc"
VLLM_REQUEST_SUCCESS = "ray_vllm_request_success_total"
VLLM_PROMPT_TOKENS = "ray_vllm_prompt_tokens_total"
SERVE_REQUESTS = "ray_serve_deployment_request_counter_total"
VLLM_TTFT = "ray_vllm_time_to_first_token_seconds"
VLLM_TPOT = "ray_vllm_request_time_per_output_token_seconds"
VLLM_ITL = "ray_vllm_inter_token_latency_seconds"
NIXL_XFER_TIME = "ray_vllm_nixl_xfer_time_seconds"
NIXL_BYTES = "ray_vllm_nixl_bytes_transferred"
NIXL_FAILED = "ray_vllm_nixl_num_failed_transfers_total"
KUBE_RESTARTS = "kube_pod_container_status_restarts_total"  # kube-state-metrics
UP = "up"  # Prometheus's own, per scrape target

# ── Recorded series ────────────────────────────────────────────────────────────────────────────
REPLICA_PHASE = "pd:replica_phase:info"
REQUESTS_RUNNING = "pd:vllm_requests_running:sum"
REQUESTS_WAITING = "pd:vllm_requests_waiting:sum"
KV_CACHE_USAGE = "pd:vllm_kv_cache_usage:max"
REQUEST_RATE = "pd:vllm_requests:rate1m"
TTFT_BUCKETS = "pd:vllm_ttft_seconds_bucket:rate1m"
TPOT_BUCKETS = "pd:vllm_tpot_seconds_bucket:rate1m"
ITL_BUCKETS = "pd:vllm_itl_seconds_bucket:rate1m"
NIXL_TRANSFERS = "pd:nixl_transfers:rate5m"
NIXL_TRANSFER_SECONDS = "pd:nixl_transfer_seconds:rate5m"
NIXL_BYTES_RATE = "pd:nixl_bytes:rate5m"
NIXL_LINK_BYTES_PER_SECOND = "pd:nixl_link_bytes_per_second:rate5m"
NIXL_FAILURES = "pd:nixl_failed_transfers:increase5m"
SLO_WINDOWS = ("5m", "30m", "1h", "6h")


def slo_bad_ratio(slo: str, window: str) -> str:
    """Recorded share of requests over the SLO threshold, per phase, over `window`."""
    return f"pd:{slo}_slo_bad:ratio_rate{window}"


# ── Judgement constants (why each number, next to it) ─────────────────────────────────────────
# Multiwindow, multi-burn-rate SLO alerts (Google SRE workbook, "Alerting on SLOs"): 14.4x the
# budget over 1 h (and 5 m, so it stops soon after the burn does) spends 2 % of a 30-day budget
# in an hour: page. 6x over 6 h (and 30 m) spends 5 % in 6 h: ticket.
FAST_BURN = 14.4
SLOW_BURN = 6.0
# The capacity report's transfer rate is the node's nominal network rate with no NIXL handshake or
# notification cost (serve_app/capacity.py): a lower bound. Three times its time is slow for real.
KV_TRANSFER_SLOWDOWN_TOLERANCE = 3.0
# Below ~16 MiB per transfer, NIXL's per-transfer overhead rather than the link sets the time, so
# throughput says nothing about the backend; above it, LIBFABRIC on EFA runs at GB/s.
MIN_BYTES_PER_TRANSFER_FOR_LINK_CHECK = 16 * 2**20
# A "UCX-like" link: within 3x of the ~0.3 GB/s UCX reaches over EFA, and under half the node's
# nominal rate (docs/SOURCES.md#kv-transfer-libfabric; serve_app/capacity.py UCX_ON_EFA_BYTES_PER_SECOND).
UCX_LIKE_FACTOR = 3.0
# A phase is idle when its engines had no queue at all and used under half their KV cache for the
# whole window, while the other phase's queue never emptied.
SATURATION_WINDOW = "10m"
IDLE_KV_CACHE_USAGE = 0.5
KV_CACHE_NEAR_FULL = 0.95


def le_label(bound: float) -> str:
    """A histogram bound as the `le` label value Prometheus 3 stores ("2.5", "1.0")."""
    return repr(float(bound))


def _by_phase(expr: str, *, by: str = "phase", aggregation: str = "sum") -> str:
    """`expr` (vLLM series with ReplicaId) aggregated per phase through the replica → phase map."""
    return f"{aggregation} by ({by}) ({expr} * on (ReplicaId) group_left (phase) {REPLICA_PHASE})"


def _phase_map_expr(names: dict[str, str]) -> str:
    parts = [
        f'label_replace(label_replace({REPLICA_STARTS}{{deployment="{names[phase]}"}}, '
        f'"phase", "{phase}", "", ""), "ReplicaId", "$1", "replica", "(.*)")'
        for phase in PHASES
    ]
    return f"group by (ReplicaId, deployment, phase) ({' or '.join(parts)})"


def _nixl_failures_expr() -> str:
    # The counter has no series until its first increment (Ray exports a counter once it has been
    # incremented); increase() over a series that starts at 1 reads 0, so a new series counts whole.
    return (f"sum((increase({NIXL_FAILED}[5m]) > 0) or ({NIXL_FAILED} unless {NIXL_FAILED} offset 5m))")


def _bad_ratio_expr(histogram: str, threshold: float, window: str) -> str:
    """Share of requests whose `histogram` observation exceeded `threshold` over `window`, per phase:
    1 − (bucket at the threshold) / (all). The threshold is a bucket bound (the settings check it),
    so this counts requests rather than interpolating between bounds."""
    within = _by_phase(f'rate({histogram}_bucket{{le="{le_label(threshold)}"}}[{window}])')
    total = _by_phase(f"rate({histogram}_count[{window}])")
    return f"1 - ({within} / {total})"


def recording_rules(serving: ServingSettings, observability: ObservabilitySettings) -> list[dict[str, Any]]:
    """Per-phase figures the dashboard, the alerts and `pdctl top` share."""
    names = deployment_names(serving.app.config)
    rules: list[dict[str, Any]] = [
        {"record": REPLICA_PHASE, "expr": _phase_map_expr(names)},
        {"record": REQUESTS_RUNNING, "expr": _by_phase(VLLM_RUNNING)},
        {"record": REQUESTS_WAITING, "expr": _by_phase(VLLM_WAITING)},
        {"record": KV_CACHE_USAGE, "expr": _by_phase(VLLM_KV_CACHE_USAGE, aggregation="max")},
        {"record": REQUEST_RATE, "expr": _by_phase(f"rate({VLLM_REQUEST_SUCCESS}[1m])")},
        {"record": TTFT_BUCKETS, "expr": _by_phase(f"rate({VLLM_TTFT}_bucket[1m])", by="phase, le")},
        {"record": TPOT_BUCKETS, "expr": _by_phase(f"rate({VLLM_TPOT}_bucket[1m])", by="phase, le")},
        {"record": ITL_BUCKETS, "expr": _by_phase(f"rate({VLLM_ITL}_bucket[1m])", by="phase, le")},
        # KV transfers are pulled by decode; summed over every engine that reports them.
        {"record": NIXL_TRANSFERS, "expr": f"sum(rate({NIXL_XFER_TIME}_count[5m]))"},
        {"record": NIXL_TRANSFER_SECONDS, "expr": f"sum(rate({NIXL_XFER_TIME}_sum[5m]))"},
        {"record": NIXL_BYTES_RATE, "expr": f"sum(rate({NIXL_BYTES}_sum[5m]))"},
        # Transfer seconds per second is the mean number of transfers in flight (Little's law).
        # Bytes per second of in-flight time, with that capped at 1, is the link's rate whether
        # transfers overlap (then wall-clock bytes/s) or not (then bytes per transfer-second).
        {"record": NIXL_LINK_BYTES_PER_SECOND,
         "expr": f"{NIXL_BYTES_RATE} / clamp_max({NIXL_TRANSFER_SECONDS}, 1)"},
        {"record": NIXL_FAILURES, "expr": _nixl_failures_expr()},
    ]
    for slo, histogram, threshold in (("ttft", VLLM_TTFT, observability.ttft_slo_seconds),
                                      ("tpot", VLLM_TPOT, observability.tpot_slo_seconds)):
        for window in SLO_WINDOWS:
            rules.append({"record": slo_bad_ratio(slo, window), "expr": _bad_ratio_expr(histogram, threshold, window)})
    return rules


@dataclass(frozen=True)
class KvTransferPrediction:
    """The capacity report's KV transfer figures for this stack's app (serve_app/capacity.py)."""

    network_bytes_per_second: float
    max_prompt_seconds: float
    max_prompt_bytes: int


def kv_transfer_prediction(serving: ServingSettings) -> KvTransferPrediction | None:
    """None when the app has no capacity report (a model this project has no facts for)."""
    report = (serving.app.capacity or {}).get("prefill")
    if report is None or not report.network_bytes_per_second:
        return None
    return KvTransferPrediction(report.network_bytes_per_second, report.transfer_seconds,
                                report.transfer_bytes_per_max_prompt)


def _alert(name: str, expr: str, *, for_: str, severity: str, summary: str, runbook: str,
           description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook": runbook,
            "runbook_url": f"{RUNBOOK_DOC}-{name.lower()}",
        },
    }


def _idle(gauge: str, phase: str, condition: str) -> str:
    """`gauge` of `phase` met `condition` for the whole window, or was not reported at all: vLLM's
    gauges of an idle engine are not exported (Ray 2.58; seen in the 2026-12-01 capture)."""
    selector = f'{gauge}{{phase="{phase}"}}[{SATURATION_WINDOW}]'
    return f"(max_over_time({selector}) {condition} or absent_over_time({selector}))"


def ray_scrape_job(serving: ServingSettings) -> str:
    """The `job` label Prometheus gives the Ray PodMonitor's targets (<namespace>/<name>)."""
    return f"{MONITORING_NAMESPACE}/{ray_pod_monitor_name(serving)}"


def ray_pod_monitor_name(serving: ServingSettings) -> str:
    return f"{serving.name}-ray-nodes"


def ucx_like_bytes_per_second(prediction: KvTransferPrediction) -> float:
    return min(UCX_LIKE_FACTOR * UCX_ON_EFA_BYTES_PER_SECOND, prediction.network_bytes_per_second / 2)


def gpu_memory_near_full(serving: ServingSettings) -> float:
    """Share of GPU memory used past which the alert fires: vLLM takes gpu_memory_utilization of the
    card up front by design, so 'full' is half-way into the headroom it leaves to everything else."""
    budget = max(serving.app.config.engine_for(phase).gpu_memory_utilization for phase in PHASES)
    return round(budget + (1 - budget) / 2, 4)


def _metrics_alerts(serving: ServingSettings) -> list[dict[str, Any]]:
    """The metrics the other alerts read are missing: a Ray node unscraped, or a phase's engines silent."""
    return [
        _alert(
            "PDRayMetricsTargetDown", f'{UP}{{job="{ray_scrape_job(serving)}"}} == 0', for_="5m", severity="warning",
            summary="Prometheus cannot scrape a Ray node's metrics ({{ $labels.pod }})",
            description="Every other PD alert is blind for this node while its metrics cannot be read.",
            runbook=(f"kubectl -n {serving.namespace} get pod {{{{ $labels.pod }}}}; check the pod's "
                     f"`metrics` port (8080) and the "
                     f"{serving.name}-metrics-scraper NetworkPolicy; Prometheus's Targets page shows the scrape error.")
            ),
        _alert(
            "PDEngineMetricsMissing",
            # A replica that served requests has engine counters; vLLM's gauges are no evidence either
            # way: Ray 2.58 drops an idle engine's (the 2026-12-01 capture holds them for 1 of 6).
            f'count by (phase) (label_replace({SERVE_REQUESTS}, "ReplicaId", "$1", "replica", "(.*)")'
            f" * on (ReplicaId) group_left (phase) {REPLICA_PHASE})"
            f" unless on (phase) count by (phase) ({VLLM_PROMPT_TOKENS} * on (ReplicaId) group_left (phase)"
            f" {REPLICA_PHASE})",
            for_="15m", severity="warning",
            summary="{{ $labels.phase }} replicas served requests but export no vLLM engine metrics",
            description=("Serve replicas of this phase handled requests, yet no ray_vllm_* series carries their "
                         "ReplicaId: every engine, KV-transfer and SLO alert is blind for the phase."),
            runbook=("Check `log_engine_metrics` is not off in the serve config and that the image's vLLM still names "
                     "its metrics as dashboards/pd.json expects (curl a worker's :8080/metrics | grep ray_vllm_).")),
    ]


def _serving_alerts(serving: ServingSettings) -> list[dict[str, Any]]:
    """What went wrong while serving: KV transfers failed, the phases unbalanced, replicas or pods restarted."""
    return [
        _alert(
            "PDKvTransferFailures", f"{NIXL_FAILURES} > 0", for_="0m", severity="critical",
            summary="NIXL KV transfers failed ({{ $value }} in 5 minutes)",
            description="Decode could not pull a prompt's KV cache from prefill: those requests failed "
                        "or were recomputed.",
            runbook=(f"pdctl verify-transport; kubectl -n {serving.namespace} logs the decode worker for "
                     f"NIXL errors; a restarted "
                     "prefill can leave decode with a stale NIXL agent (llm-d#2187): restart the decode replica.")
            ),
        _alert(
            "PDPhaseSaturatedOtherIdle",
            " or ".join(
                f'(min_over_time({REQUESTS_WAITING}{{phase="{busy}"}}[{SATURATION_WINDOW}]) > 0'
                f" and on () {_idle(REQUESTS_WAITING, idle, '== 0')}"
                f" and on () {_idle(KV_CACHE_USAGE, idle, f'< {IDLE_KV_CACHE_USAGE}')})"
                for busy, idle in (("prefill", "decode"), ("decode", "prefill"))),
            for_="5m", severity="warning",
            summary="{{ $labels.phase }} is saturated (its queue never emptied in 10 minutes) while the "
                    "other phase idles",
            description="The replica split between prefill and decode does not match the traffic.",
            runbook=("Move GPUs to the saturated phase: raise prefillReplicas or decodeReplicas (or its *MaxReplicas) "
                     "and lower the other's, then `pulumi up`; compare prompt and output lengths with "
                     "what was planned.")),
        _alert(
            "PDServeReplicaRestarted",
            f"count by (deployment) ({REPLICA_STARTS} unless {REPLICA_STARTS} offset 15m)"
            f" and on (deployment) count by (deployment) ({REPLICA_STARTS} offset 15m)",
            for_="0m", severity="warning",
            summary="A replica of {{ $labels.deployment }} started in the last 15 minutes",
            description=("A new Serve replica joined a deployment that was already running: a replica died and Serve "
                         "replaced it (with autoscaling on, a scale-up looks the same)."),
            runbook=(f"kubectl -n {serving.namespace} logs the worker pod (--previous if it restarted); "
                     f"ray logs on the head: "
                     "`serve status`; an OOM or a NIXL error just before the restart is the usual cause.")
            ),
        _alert(
            "PDRayPodRestarted",
            f'increase({KUBE_RESTARTS}{{namespace="{serving.namespace}", container=~"ray-head|ray-worker"}}[15m]) > 0',
            for_="0m", severity="warning",
            summary="Ray container {{ $labels.container }} in {{ $labels.pod }} restarted",
            description="A Ray head or worker container restarted: every replica on it restarted too.",
            runbook=(f"kubectl -n {serving.namespace} describe pod {{{{ $labels.pod }}}} (OOMKilled? Evicted?); "
                     f"kubectl -n {serving.namespace} logs {{{{ $labels.pod }}}} --previous.")),
    ]


def _memory_alerts(serving: ServingSettings) -> list[dict[str, Any]]:
    """GPU memory and the KV cache near full."""
    return [
        _alert(
            "PDGpuMemoryNearFull",
            f"{DCGM_FB_USED} / ({DCGM_FB_USED} + {DCGM_FB_FREE}) > {gpu_memory_near_full(serving)}",
            for_="5m", severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is {{ $value | humanizePercentage }} full",
            description=("vLLM takes gpuMemoryUtilization of the GPU up front; use beyond half of the rest means "
                         "something else is allocating on the card and the next allocation may fail (CUDA OOM)."),
            runbook=(f"kubectl -n {serving.namespace} exec the worker on that node -- nvidia-smi: look "
                     f"for a second process; lower "
                     "gpuMemoryUtilization if vLLM itself grew (CUDA graphs, NIXL buffers).")),
        _alert(
            "PDKvCacheNearFull", f"{KV_CACHE_USAGE} > {KV_CACHE_NEAR_FULL}", for_="10m", severity="warning",
            summary="{{ $labels.phase }} KV cache {{ $value | humanizePercentage }} full for 10 minutes",
            description="vLLM preempts running requests when its KV cache is full: TPOT and TTFT climb.",
            runbook="Add replicas to the phase, or lower max_num_seqs / maxModelLen; `pdctl plan` shows "
                    "the KV capacity."),
    ]


def _slo_burn_alerts(observability: ObservabilitySettings) -> list[dict[str, Any]]:
    """Multi-window burn-rate alerts on the TTFT and TPOT SLOs' error budget."""
    budget = observability.error_budget
    alerts: list[dict[str, Any]] = []
    for slo, threshold, phases in (("ttft", observability.ttft_slo_seconds, PHASES),
                                   ("tpot", observability.tpot_slo_seconds, ("decode",))):
        selector = "" if phases == PHASES else '{phase="decode"}'
        label = slo.upper()
        for name, burn, long, short, for_, severity in (
                ("FastBurn", FAST_BURN, "1h", "5m", "2m", "critical"),
                ("SlowBurn", SLOW_BURN, "6h", "30m", "15m", "warning")):
            limit = round(burn * budget, 6)
            alerts.append(_alert(
                f"PD{label.capitalize()}Slo{name}",
                f"{slo_bad_ratio(slo, long)}{selector} > {limit} and {slo_bad_ratio(slo, short)}{selector} > {limit}",
                for_=for_, severity=severity,
                summary=(f"{{{{ $labels.phase }}}} {label} over {threshold:g} s for "
                         f"{{{{ $value | humanizePercentage }}}} "
                         f"of requests ({burn:g}x the error budget)"),
                description=(f"SLO: {observability.slo_objective:g} of requests within {threshold:g} s, "
                             f"as vLLM measures "
                             f"{label} on each phase's engines. A user's TTFT is prefill's plus decode's (plus the "
                             "proxy), so each phase's share is a floor of the users'."),
                runbook=("pdctl top: which phase queues? Queueing → add replicas to it; prefill slow with no queue → "
                         "long prompts; decode TTFT high → KV transfer (see the NIXL panels)."),
            ))
    return alerts


def _kv_transfer_speed_alerts(serving: ServingSettings) -> list[dict[str, Any]]:
    """KV transfers slower than the capacity report predicts, or at UCX-like speed (none without a prediction)."""
    alerts: list[dict[str, Any]] = []
    prediction = kv_transfer_prediction(serving)
    if prediction is not None:
        mean_bytes = f"({NIXL_BYTES_RATE} / {NIXL_TRANSFERS})"
        alerts += [
            _alert(
                "PDKvTransferSlowerThanPredicted",
                f"({NIXL_TRANSFER_SECONDS} / {NIXL_TRANSFERS}) > "
                f"{KV_TRANSFER_SLOWDOWN_TOLERANCE:g} * {mean_bytes} / {prediction.network_bytes_per_second:g}",
                for_="10m", severity="warning",
                summary="KV transfers take {{ $value | humanizeDuration }} each, over "
                        f"{KV_TRANSFER_SLOWDOWN_TOLERANCE:g}x the capacity report's prediction",
                description=(f"The capacity report predicts the KV of one prompt at "
                             f"{prediction.network_bytes_per_second * 8 / 1e9:g} Gbps "
                             f"({prediction.max_prompt_seconds * 1000:.0f} ms "
                             f"for a max_model_len prompt's {prediction.max_prompt_bytes / 2**20:.1f} "
                             f"MiB); transfers are "
                             f"averaging over {KV_TRANSFER_SLOWDOWN_TOLERANCE:g}x that for the bytes they move."),
                runbook=("pdctl verify-transport (LIBFABRIC on every worker?); transfers queueing behind each other "
                         "under load also slow each one: compare with the NIXL rate panel.")),
            _alert(
                "PDKvTransferNotOnLibfabric",
                f"{NIXL_LINK_BYTES_PER_SECOND} < {ucx_like_bytes_per_second(prediction):g}"
                f" and {mean_bytes} >= {MIN_BYTES_PER_TRANSFER_FOR_LINK_CHECK}",
                for_="10m", severity="critical",
                summary="KV moves at {{ $value | humanize1024 }}B/s: UCX-like speed, not LIBFABRIC on EFA",
                description=("NIXL exports no backend label; a link this slow for transfers this large "
                             "is what UCX over "
                             "EFA (~0.3 GB/s) looks like, against the node's "
                             f"{prediction.network_bytes_per_second * 8 / 1e9:g} Gbps."),
                runbook=("pdctl verify-transport names the backend each worker instantiated; kvBackends must be "
                         "[LIBFABRIC] and FI_PROVIDER=efa; check the EFA device plugin allocated "
                         "vpc.amazonaws.com/efa.")),
        ]
    return alerts


def alert_rules(serving: ServingSettings, observability: ObservabilitySettings) -> list[dict[str, Any]]:
    """The alerts, each with a runbook line. Thresholds come from the settings and the capacity report."""
    return [*_metrics_alerts(serving), *_serving_alerts(serving), *_memory_alerts(serving),
            *_slo_burn_alerts(observability), *_kv_transfer_speed_alerts(serving)]


def omitted_alerts(serving: ServingSettings) -> list[str]:
    """Alerts left out of this stack's rules, with why (shown at deploy time, never silent)."""
    if kv_transfer_prediction(serving) is None:
        return ["PDKvTransferSlowerThanPredicted and PDKvTransferNotOnLibfabric: no capacity report for this model "
                "(" + ("; ".join(serving.app.notes) or "no model facts") + ")"]
    return []


def rule_groups(serving: ServingSettings, observability: ObservabilitySettings) -> list[dict[str, Any]]:
    """The rule file's `groups`: recordings first (the alerts read them)."""
    return [
        {"name": "eks-pd-llm.records", "interval": "30s", "rules": recording_rules(serving, observability)},
        {"name": "eks-pd-llm.alerts", "interval": "30s", "rules": alert_rules(serving, observability)},
    ]


def prometheus_rule_manifest(serving: ServingSettings, observability: ObservabilitySettings) -> dict[str, Any]:
    """The PrometheusRule object the Prometheus Operator loads into the stack's Prometheus."""
    return {
        "apiVersion": PROMETHEUS_RULE_API_VERSION,
        "kind": "PrometheusRule",
        "metadata": {"name": f"{serving.name}-pd", "namespace": MONITORING_NAMESPACE},
        "spec": {"groups": rule_groups(serving, observability)},
    }
