"""The PD rules, dashboard and `pdctl top` queries against the real thing: Prometheus's own rule
checker and unit-test runner (promtool), a maintained PromQL parser, and the metric names of the
real PD app's exposition captured on a GPU (tests/conftest.py REAL_METRICS_EXPOSITION).

Every alert gets series that make it fire (with the message a person reads) and series that must
not: the thresholds come from the dev stack's settings and capacity report, as the cluster gets them.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from components.manifests import prometheus_rules as rules
from components.manifests.monitoring import pd_dashboard
from facts.metrics import VLLM_TPOT_BUCKETS_SECONDS, VLLM_TTFT_BUCKETS_SECONDS
from serve_app.errors import ConfigError
from serve_app.render import PHASE_DEPLOYMENT_PREFIX

# Names the rules, dashboard or pdctl top use that the captured exposition does not hold, and why.
# A name used and neither in the capture nor here fails; an entry here that the capture now holds,
# or that nothing uses, fails too.
NOT_IN_FIXTURE = {
    "ray_vllm_nixl_num_failed_transfers_total": (
        "Ray exports a counter once it is first incremented and no transfer failed in the run "
        "(vllm nixl/stats.py increments it per failure)"),
    "DCGM_FI_DEV_GPU_UTIL": "DCGM exporter does not run in the lab (name: dcgm-exporter default-counters.csv)",
    "DCGM_FI_DEV_FB_USED": "DCGM exporter does not run in the lab (name: dcgm-exporter default-counters.csv)",
    "DCGM_FI_DEV_FB_FREE": "DCGM exporter does not run in the lab (name: dcgm-exporter default-counters.csv)",
    "kube_pod_container_status_restarts_total": "kube-state-metrics does not run in the lab",
    "up": "Prometheus's own series, one per scrape target",
    "ray_pd_door_requests_total": (
        "the front door's own counter (front_door/ingress.py), not in the lab's app; its exposition is read in "
        "tests/front_door/test_front_door_on_ray.py"),
    "ray_pd_door_tokens_total": (
        "the front door's own counter (front_door/ingress.py), not in the lab's app; its exposition is read in "
        "tests/front_door/test_front_door_on_ray.py"),
    "node_infiniband_port_data_transmitted_bytes_total": (
        "node-exporter's InfiniBand collector, not in the lab; whether EFA exposes these counters is unverified"),
    "node_infiniband_port_data_received_bytes_total": (
        "node-exporter's InfiniBand collector, not in the lab; whether EFA exposes these counters is unverified"),
}


@pytest.fixture(scope="module")
def dev(settings_for: Any) -> Any:
    return settings_for(hfToken="offline-token")


@pytest.fixture(scope="module")
def groups(dev: Any) -> list[dict[str, Any]]:
    return rules.rule_groups(dev.serving, dev.observability)


def write_rule_file(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False, width=10_000))
    return path


def run_promtool(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120)


# ── What the expressions are made of ──────────────────────────────────────────────────────────

def selectors(node: Any) -> Iterator[Any]:
    """Every vector selector in a parsed PromQL expression."""
    if isinstance(node, promql_parser.VectorSelector):
        yield node
        return
    for attribute in ("expr", "lhs", "rhs", "vector_selector", "param"):
        child = getattr(node, attribute, None)
        if child is not None and not isinstance(child, (str, int, float)):
            yield from selectors(child)
    for arg in getattr(node, "args", None) or ():
        yield from selectors(arg)


def metric_names(expr: str) -> set[str]:
    return {s.name for s in selectors(promql_parser.parse(expr)) if s.name}


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in pd_dashboard()["panels"] for target in panel.get("targets", [])]


def top_exprs() -> list[str]:
    from pdctl.top import prometheus_queries

    return [query.expr for query in prometheus_queries()]


def source_names(expr: str, recorded: dict[str, str]) -> set[str]:
    """Metric names an expression reads, recorded series resolved to what they are recorded from."""
    found: set[str] = set()
    for name in metric_names(expr):
        found |= source_names(recorded[name], recorded) if name in recorded else {name}
    return found


def test_the_join_source_and_every_histogram_series_the_rules_read_are_parsed_out(groups) -> None:
    # The walker must see through rate(), by-clauses, binary operators and label_replace.
    recorded = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    names = source_names(rules.slo_bad_ratio("ttft", "5m"), recorded)
    assert names == {"ray_vllm_time_to_first_token_seconds_bucket", "ray_vllm_time_to_first_token_seconds_count",
                     "ray_serve_deployment_replica_starts_total"}


def test_every_metric_name_used_is_in_the_real_exposition_or_listed_with_a_reason(groups, real_metric_names) -> None:
    recorded = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    used: set[str] = set()
    for expr in [r["expr"] for g in groups for r in g["rules"]] + dashboard_exprs() + top_exprs():
        used |= source_names(expr, recorded)
    unexplained = sorted(used - real_metric_names - set(NOT_IN_FIXTURE))
    assert unexplained == [], f"not in {REAL_NAME}: {unexplained}"
    assert sorted(set(NOT_IN_FIXTURE) & real_metric_names) == [], "now in the capture: drop from NOT_IN_FIXTURE"
    assert sorted(set(NOT_IN_FIXTURE) - used) == [], "listed but used nowhere"
    # The bulk of what the PD figures rest on really was in the capture.
    assert {"ray_vllm_time_to_first_token_seconds_bucket", "ray_vllm_request_time_per_output_token_seconds_bucket",
            "ray_vllm_kv_cache_usage_perc", "ray_vllm_num_requests_waiting", "ray_vllm_nixl_xfer_time_seconds_sum",
            "ray_vllm_nixl_bytes_transferred_sum"} <= used & real_metric_names


REAL_NAME = "the 2026-12-01 H200 exposition"


def real_pd_replicas(real_exposition) -> dict[str, str]:
    """Replica id → phase of the Prefill/Decode replicas in the real exposition (Serve's own series)."""
    return {labels["replica"]: phase for name, labels, _ in real_exposition if name == rules.REPLICA_STARTS
            for phase, prefix in PHASE_DEPLOYMENT_PREFIX.items() if labels["deployment"].startswith(prefix)}


def test_every_pd_engine_in_the_real_exposition_has_a_phase_through_its_replica_id(real_exposition) -> None:
    """The join the per-phase figures rest on, on Ray 2.58's real labels: vLLM's ReplicaId is the
    `replica` of a Serve replica whose deployment names the phase."""
    phases = real_pd_replicas(real_exposition)
    assert sorted(phases.values()).count("prefill") >= 1 and sorted(phases.values()).count("decode") >= 1
    engine_replicas = {labels["ReplicaId"] for name, labels, _ in real_exposition
                       if name == rules.VLLM_PROMPT_TOKENS}
    # Every PD replica has engine metrics; the others are colocated apps' LLMServer replicas.
    assert set(phases) <= engine_replicas
    serve_replicas = {labels["replica"] for name, labels, _ in real_exposition if name == rules.REPLICA_STARTS}
    assert engine_replicas <= serve_replicas


def test_slo_bounds_are_the_buckets_of_the_real_histograms(real_exposition) -> None:
    for histogram, bounds in ((rules.VLLM_TTFT, VLLM_TTFT_BUCKETS_SECONDS),
                              (rules.VLLM_TPOT, VLLM_TPOT_BUCKETS_SECONDS)):
        les = {labels["le"] for name, labels, _ in real_exposition if name == f"{histogram}_bucket"}
        assert les == {rules.le_label(b) for b in bounds} | {"+Inf"}, histogram


def _series_text(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f"{key}={json.dumps(value)}" for key, value in sorted(labels.items())) + "}"


def test_recording_rules_give_the_real_engines_their_phase(real_exposition, groups, promtool: str,
                                                          tmp_path: Path) -> None:
    """The phase map and the join, evaluated by promtool on the real exposition's series (labels as
    Ray 2.58 exported them): every PD replica's engine counters land in its phase, and the engine
    gauges present (Ray drops an idle engine's) are summed into theirs."""
    phases = real_pd_replicas(real_exposition)
    used = (rules.REPLICA_STARTS, rules.VLLM_PROMPT_TOKENS, rules.VLLM_RUNNING, rules.VLLM_WAITING)
    series = [{"series": _series_text(name, labels), "values": f"{value!r}+0x5"}
              for name, labels, value in real_exposition if name in used]
    joined = f"{rules.VLLM_PROMPT_TOKENS} * on (ReplicaId) group_left (phase) {rules.REPLICA_PHASE}"
    engines = [labels["ReplicaId"] for name, labels, _ in real_exposition
               if name == rules.VLLM_PROMPT_TOKENS and labels["ReplicaId"] in phases]
    assert sorted(engines) == sorted(phases)  # the capture: two PD apps, each one prefill and one decode engine
    checks = [
        {"expr": f"count by (phase) ({rules.REPLICA_PHASE})", "eval_time": "2m",
         "exp_samples": [{"labels": f'{{phase="{p}"}}', "value": list(phases.values()).count(p)}
                         for p in rules.PHASES]},
        {"expr": f"count by (phase) ({joined})", "eval_time": "2m",
         "exp_samples": [{"labels": f'{{phase="{p}"}}', "value": [phases[r] for r in engines].count(p)}
                         for p in rules.PHASES]},
    ]
    for record, gauge in ((rules.REQUESTS_RUNNING, rules.VLLM_RUNNING), (rules.REQUESTS_WAITING, rules.VLLM_WAITING)):
        totals: dict[str, float] = {}
        for name, labels, value in real_exposition:
            if name == gauge and labels.get("ReplicaId") in phases:
                phase = phases[labels["ReplicaId"]]
                totals[phase] = totals.get(phase, 0.0) + value
        checks.append({"expr": record, "eval_time": "2m", "exp_samples": [
            {"labels": f'{record}{{phase="{p}"}}', "value": v} for p, v in sorted(totals.items())]})
    rule_file = write_rule_file(tmp_path / "rules.yaml", groups)
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": [rule_file.name], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}]}, width=10_000))
    result = run_promtool(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_le_values_are_written_as_ray_exports_and_prometheus_stores_them() -> None:
    assert [rules.le_label(b) for b in (2.5, 1, 10, 0.1)] == ["2.5", "1.0", "10.0", "0.1"]


# ── promtool check rules ──────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_promtool_accepts_each_stacks_rules(stack: str, settings_for: Any, promtool: str, tmp_path: Path) -> None:
    settings = settings_for(stack)
    path = write_rule_file(tmp_path / "rules.yaml", rules.rule_groups(settings.serving, settings.observability))
    result = run_promtool(promtool, "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_refuses_a_broken_expression(groups, promtool: str, tmp_path: Path) -> None:
    """The check has teeth: one unbalanced parenthesis fails it."""
    broken = json.loads(json.dumps(groups))
    broken[1]["rules"][0]["expr"] += ")"
    result = run_promtool(promtool, "check", "rules", str(write_rule_file(tmp_path / "r.yaml", broken)))
    assert result.returncode != 0


def test_every_dashboard_and_top_query_parses_for_prometheus(promtool: str, tmp_path: Path) -> None:
    exprs = dashboard_exprs() + top_exprs()
    for expr in exprs:
        promql_parser.parse(expr)
    as_rules = [{"name": "queries", "rules": [{"record": f"query:{i}", "expr": e} for i, e in enumerate(exprs)]}]
    result = run_promtool(promtool, "check", "rules", str(write_rule_file(tmp_path / "q.yaml", as_rules)))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_runbook_summary_and_severity(groups) -> None:
    alerts = [r for r in groups[1]["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "PDKvTransferNotOnLibfabric", "PDKvTransferFailures", "PDKvTransferSlowerThanPredicted",
        "PDTtftSloFastBurn", "PDTtftSloSlowBurn", "PDTpotSloFastBurn", "PDTpotSloSlowBurn",
        "PDPhaseSaturatedOtherIdle", "PDServeReplicaRestarted", "PDRayPodRestarted", "PDGpuMemoryNearFull"}
    for alert in alerts:
        assert alert["labels"]["severity"] in ("critical", "warning")
        assert len(alert["annotations"]["runbook"]) > 40 and alert["annotations"]["summary"]


# ── Thresholds come from the settings and the capacity report ─────────────────────────────────

def alert(groups: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [r for g in groups for r in g["rules"] if r.get("alert") == name]
    return found


def test_slo_thresholds_and_objective_come_from_the_settings(settings_for: Any) -> None:
    settings = settings_for(ttftSloSeconds="1", tpotSloSeconds="0.1", sloObjective="0.999")
    groups = rules.rule_groups(settings.serving, settings.observability)
    recorded = {r["record"]: r["expr"] for g in groups for r in g["rules"] if "record" in r}
    assert 'le="1.0"' in recorded[rules.slo_bad_ratio("ttft", "1h")]
    assert 'le="0.1"' in recorded[rules.slo_bad_ratio("tpot", "1h")]
    # 14.4 × (1 − 0.999) = 0.0144
    assert "> 0.0144 and" in alert(groups, "PDTtftSloFastBurn")["expr"]


def test_kv_transfer_threshold_is_the_capacity_reports_rate(dev: Any, groups) -> None:
    report = dev.serving.app.capacity["prefill"]
    assert report.network_bytes_per_second == 25e9 / 8  # g6.8xlarge, 25 Gbps
    expr = alert(groups, "PDKvTransferSlowerThanPredicted")["expr"]
    assert expr.endswith(f"> 3 * (pd:nixl_bytes:rate5m / pd:nixl_transfers:rate5m) / {25e9 / 8:g}")
    # The description quotes the report's prediction for a max_model_len prompt.
    assert f"{report.transfer_seconds * 1000:.0f} ms" in alert(groups, "PDKvTransferSlowerThanPredicted")[
        "annotations"]["description"]


def test_without_a_capacity_report_the_kv_alerts_are_left_out_and_said_so(settings_for: Any) -> None:
    settings = settings_for(modelSource="acme/custom-model-7b")
    names = {r.get("alert") for g in rules.rule_groups(settings.serving, settings.observability) for r in g["rules"]}
    assert "PDKvTransferSlowerThanPredicted" not in names
    (omitted,) = rules.omitted_alerts(settings.serving)
    assert "PDKvTransferSlowerThanPredicted" in omitted


def test_gpu_memory_alert_sits_above_what_vllm_takes_by_design(settings_for: Any) -> None:
    # gpuMemoryUtilization 0.90 → half of the 10 % headroom: 0.95.
    assert rules.gpu_memory_near_full(settings_for().serving) == 0.95
    without_fixed_kv = settings_for(gpuMemoryUtilization="0.94", kvCacheFromPlan="false")
    assert rules.gpu_memory_near_full(without_fixed_kv.serving) == 0.97


@pytest.mark.parametrize(("key", "value"), [
    ("ttftSloSeconds", "2"), ("ttftSloSeconds", "abc"), ("tpotSloSeconds", "0.12"), ("sloObjective", "0.8"),
    ("sloObjective", "1"), ("metricsRetention", "12h"), ("metricsRetention", "400d"), ("metricsRetention", "15"),
    ("metricsStorageGiB", "5"),
])
def test_bad_observability_settings_are_refused_naming_the_key(key: str, value: str, settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(**{key: value})
    assert caught.value.setting == key


def test_an_slo_threshold_between_buckets_says_which_bounds_exist(settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(ttftSloSeconds="2")
    assert "2.5" in caught.value.allowed and "histogram" in str(caught.value)


# ── promtool test rules: each alert fires on its failure and stays quiet otherwise ────────────

PREFILL, DECODE = "Prefill:qwen3_5-9b", "Decode:qwen3_5-9b"
ENGINE = 'engine="0",model_name="qwen3.5-9b"'


def starts(deployment: str, replica: str, values: str = "1+0x60") -> dict[str, str]:
    return {"series": f'{rules.REPLICA_STARTS}{{deployment="{deployment}",replica="{replica}",application="llm",'
                      f'WorkerId="w-{replica}"}}', "values": values}


def vllm(name: str, replica: str, values: str, **labels: str) -> dict[str, str]:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return {"series": f'{name}{{ReplicaId="{replica}",{ENGINE},WorkerId="w-{replica}"{extra}}}', "values": values}


BOTH_PHASES = [starts(PREFILL, "p1"), starts(DECODE, "d1")]


def served(deployment: str, replica: str) -> dict[str, str]:
    return {"series": f'{rules.SERVE_REQUESTS}{{deployment="{deployment}",replica="{replica}",application="llm",'
                      f'route="/v1/chat/completions"}}', "values": "0+5x60"}


def nixl(bytes_per_minute: int, seconds_per_minute: float) -> list[dict[str, str]]:
    return [vllm(f"{rules.NIXL_XFER_TIME}_count", "d1", "0+1x40"),
            vllm(f"{rules.NIXL_XFER_TIME}_sum", "d1", f"0+{seconds_per_minute}x40"),
            vllm(f"{rules.NIXL_BYTES}_sum", "d1", f"0+{bytes_per_minute}x40")]


def latency(histogram: str, replica: str, threshold: str, good_per_minute: int) -> list[dict[str, str]]:
    return [vllm(f"{histogram}_bucket", replica, f"0+{good_per_minute}x60", le=threshold),
            vllm(f"{histogram}_count", replica, "0+10x60")]


def firing(name: str, eval_time: str, labels: dict[str, str], summary: str) -> dict[str, Any]:
    return {"alertname": name, "eval_time": eval_time, "exp_alerts": [{"exp_labels": labels, "summary": summary}]}


def quiet(name: str, eval_time: str) -> dict[str, Any]:
    return {"alertname": name, "eval_time": eval_time, "exp_alerts": []}


MIB64 = 64 * 2**20
CASES: dict[str, tuple[list[dict[str, str]], list[dict[str, Any]]]] = {
    "gpu-memory-full": (
        [{"series": 'DCGM_FI_DEV_FB_USED{gpu="0",Hostname="n1"}', "values": "22000+0x20"},
         {"series": 'DCGM_FI_DEV_FB_FREE{gpu="0",Hostname="n1"}', "values": "500+0x20"}],
        [firing("PDGpuMemoryNearFull", "10m", {"gpu": "0", "Hostname": "n1"}, "GPU 0 on n1 is 97.78% full")]),
    "gpu-memory-as-vllm-takes-it": (
        [{"series": 'DCGM_FI_DEV_FB_USED{gpu="0",Hostname="n1"}', "values": "20600+0x20"},
         {"series": 'DCGM_FI_DEV_FB_FREE{gpu="0",Hostname="n1"}', "values": "2288+0x20"}],
        [quiet("PDGpuMemoryNearFull", "10m")]),
    "kv-cache-full": (
        [*BOTH_PHASES, vllm(rules.VLLM_KV_CACHE_USAGE, "p1", "0.97+0x30"),
         vllm(rules.VLLM_KV_CACHE_USAGE, "d1", "0.2+0x30")],
        [firing("PDKvCacheNearFull", "15m", {"phase": "prefill"}, "prefill KV cache 97% full for 10 minutes")]),
    "kv-transfer-fails": (
        [*BOTH_PHASES, vllm(rules.NIXL_FAILED, "d1", "_x10 2+0x20")],
        [firing("PDKvTransferFailures", "11m", {}, "NIXL KV transfers failed (2 in 5 minutes)")]),
    "old-kv-transfer-failure": (
        [*BOTH_PHASES, vllm(rules.NIXL_FAILED, "d1", "1+0x40")],
        [quiet("PDKvTransferFailures", "30m")]),
    "kv-transfer-at-ucx-speed": (
        [*BOTH_PHASES, *nixl(MIB64, 0.2)],
        [firing("PDKvTransferNotOnLibfabric", "20m", {}, "KV moves at 320MiB/s: UCX-like speed, not LIBFABRIC on EFA"),
         firing("PDKvTransferSlowerThanPredicted", "20m", {},
                "KV transfers take 200ms each, over 3x the capacity report's prediction")]),
    "kv-transfer-at-efa-speed": (
        [*BOTH_PHASES, *nixl(MIB64, 0.02)],
        [quiet("PDKvTransferNotOnLibfabric", "20m"), quiet("PDKvTransferSlowerThanPredicted", "20m")]),
    "small-kv-transfers-say-nothing-about-the-backend": (
        [*BOTH_PHASES, *nixl(2**20, 0.05)],
        [quiet("PDKvTransferNotOnLibfabric", "20m")]),
    "prefill-ttft-burns-the-budget": (
        [*BOTH_PHASES, *latency(rules.VLLM_TTFT, "p1", "2.5", 5), *latency(rules.VLLM_TTFT, "d1", "2.5", 10)],
        [firing("PDTtftSloFastBurn", "10m", {"phase": "prefill"},
                "prefill TTFT over 2.5 s for 50% of requests (14.4x the error budget)")]),
    "ttft-within-slo": (
        [*BOTH_PHASES, *latency(rules.VLLM_TTFT, "p1", "2.5", 10), *latency(rules.VLLM_TTFT, "d1", "2.5", 10)],
        [quiet("PDTtftSloFastBurn", "10m"), quiet("PDTtftSloSlowBurn", "40m")]),
    "ttft-slow-burn": (
        [*BOTH_PHASES, *latency(rules.VLLM_TTFT, "p1", "2.5", 9), *latency(rules.VLLM_TTFT, "d1", "2.5", 10)],
        [quiet("PDTtftSloFastBurn", "40m"),
         firing("PDTtftSloSlowBurn", "40m", {"phase": "prefill"},
                "prefill TTFT over 2.5 s for 10% of requests (6x the error budget)")]),
    "decode-tpot-burns-the-budget": (
        [*BOTH_PHASES, *latency(rules.VLLM_TPOT, "d1", "0.2", 5)],
        [firing("PDTpotSloFastBurn", "10m", {"phase": "decode"},
                "decode TPOT over 0.2 s for 50% of requests (14.4x the error budget)")]),
    "decode-tpot-slow-burn": (
        [*BOTH_PHASES, *latency(rules.VLLM_TPOT, "d1", "0.2", 9)],
        [quiet("PDTpotSloFastBurn", "40m"),
         firing("PDTpotSloSlowBurn", "40m", {"phase": "decode"},
                "decode TPOT over 0.2 s for 10% of requests (6x the error budget)")]),
    "prefill-tpot-is-no-slo": (
        [*BOTH_PHASES, *latency(rules.VLLM_TPOT, "p1", "0.2", 0)],
        [quiet("PDTpotSloFastBurn", "10m"), quiet("PDTpotSloSlowBurn", "40m")]),
    "prefill-saturated-decode-idle": (
        [*BOTH_PHASES, vllm(rules.VLLM_WAITING, "p1", "5+0x30"), vllm(rules.VLLM_WAITING, "d1", "0+0x30"),
         vllm(rules.VLLM_KV_CACHE_USAGE, "p1", "0.6+0x30"), vllm(rules.VLLM_KV_CACHE_USAGE, "d1", "0.1+0x30")],
        [firing("PDPhaseSaturatedOtherIdle", "20m", {"phase": "prefill"},
                "prefill is saturated (its queue never emptied in 10 minutes) while the other phase idles")]),
    "prefill-saturated-decode-gauges-gone": (
        [*BOTH_PHASES, vllm(rules.VLLM_WAITING, "p1", "5+0x30"), vllm(rules.VLLM_KV_CACHE_USAGE, "p1", "0.6+0x30")],
        [firing("PDPhaseSaturatedOtherIdle", "20m", {"phase": "prefill"},
                "prefill is saturated (its queue never emptied in 10 minutes) while the other phase idles")]),
    "both-phases-busy": (
        [*BOTH_PHASES, vllm(rules.VLLM_WAITING, "p1", "5+0x30"), vllm(rules.VLLM_WAITING, "d1", "0+0x30"),
         vllm(rules.VLLM_KV_CACHE_USAGE, "p1", "0.6+0x30"), vllm(rules.VLLM_KV_CACHE_USAGE, "d1", "0.8+0x30")],
        [quiet("PDPhaseSaturatedOtherIdle", "20m")]),
    "decode-replica-replaced": (
        [starts(PREFILL, "p1"), starts(DECODE, "d1", "1+0x19"), starts(DECODE, "d2", "_x20 1+0x20")],
        [firing("PDServeReplicaRestarted", "25m", {"deployment": DECODE},
                f"A replica of {DECODE} started in the last 15 minutes")]),
    "first-deploy-is-no-restart": (
        BOTH_PHASES,
        [quiet("PDServeReplicaRestarted", "10m")]),
    "ray-worker-container-restarted": (
        [{"series": f'{rules.KUBE_RESTARTS}'
                    '{namespace="inference",pod="ray-llm-gpu-workers-x",container="ray-worker"}',
          "values": "0 0 0 0 0 1+0x20"},
         {"series": f'{rules.KUBE_RESTARTS}{{namespace="other",pod="x",container="ray-worker"}}',
          "values": "0 0 0 0 0 1+0x20"}],
        [firing("PDRayPodRestarted", "10m",
                {"namespace": "inference", "pod": "ray-llm-gpu-workers-x", "container": "ray-worker"},
                "Ray container ray-worker in ray-llm-gpu-workers-x restarted")]),
    "ray-node-not-scraped": (
        [{"series": 'up{job="monitoring/ray-llm-ray-nodes",pod="ray-llm-head-x"}', "values": "0+0x20"},
         {"series": 'up{job="monitoring/ray-llm-ray-nodes",pod="ray-llm-gpu-workers-x"}', "values": "1+0x20"}],
        [firing("PDRayMetricsTargetDown", "10m", {"job": "monitoring/ray-llm-ray-nodes", "pod": "ray-llm-head-x"},
                "Prometheus cannot scrape a Ray node's metrics (ray-llm-head-x)")]),
    "replicas-without-engine-metrics": (
        [*BOTH_PHASES, served(PREFILL, "p1"), served(DECODE, "d1"), vllm(rules.VLLM_PROMPT_TOKENS, "p1", "0+10x30")],
        [firing("PDEngineMetricsMissing", "20m", {"phase": "decode"},
                "decode replicas served requests but export no vLLM engine metrics")]),
    "engine-metrics-present": (
        [*BOTH_PHASES, served(PREFILL, "p1"), served(DECODE, "d1"), vllm(rules.VLLM_PROMPT_TOKENS, "p1", "0+10x30"),
         vllm(rules.VLLM_PROMPT_TOKENS, "d1", "0+10x30")],
        [quiet("PDEngineMetricsMissing", "20m")]),
    "no-traffic-yet": (
        BOTH_PHASES,
        [quiet("PDEngineMetricsMissing", "30m")]),
}


def _render_labels(text: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)


def promtool_case(groups: list[dict[str, Any]], series: list[dict[str, str]],
                  checks: list[dict[str, Any]]) -> dict[str, Any]:
    tests = []
    for check in checks:
        rule = alert(groups, check["alertname"])
        expected = []
        for exp in check["exp_alerts"]:
            labels = {**exp["exp_labels"], "severity": rule["labels"]["severity"]}
            annotations = {key: _render_labels(value, labels) for key, value in rule["annotations"].items()}
            annotations["summary"] = exp["summary"]
            expected.append({"exp_labels": labels, "exp_annotations": annotations})
        tests.append({"eval_time": check["eval_time"], "alertname": check["alertname"], "exp_alerts": expected})
    return {"interval": "1m", "input_series": series, "alert_rule_test": tests}


def test_every_alert_has_a_firing_and_a_quiet_case(groups) -> None:
    names = {r["alert"] for r in groups[1]["rules"] if "alert" in r}
    checks = [c for _, cs in CASES.values() for c in cs]
    assert {c["alertname"] for c in checks if c["exp_alerts"]} == names
    assert {c["alertname"] for c in checks if not c["exp_alerts"]} == names - {
        # Their quiet series sit beside the firing ones: the other phase, another namespace, a healthy target.
        "PDKvCacheNearFull", "PDRayPodRestarted", "PDRayMetricsTargetDown"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_alert_fires_only_on_its_failure(case: str, groups, promtool: str, tmp_path: Path) -> None:
    series, checks = CASES[case]
    rule_file = write_rule_file(tmp_path / "rules.yaml", groups)
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": [rule_file.name], "evaluation_interval": "1m",
        "tests": [promtool_case(groups, series, checks)]}, sort_keys=False, width=10_000))
    result = run_promtool(promtool, "test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_tests_have_teeth(groups, promtool: str, tmp_path: Path) -> None:
    """The same runner fails when an alert that should fire is expected quiet."""
    series, _ = CASES["gpu-memory-full"]
    rule_file = write_rule_file(tmp_path / "rules.yaml", groups)
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": [rule_file.name], "evaluation_interval": "1m",
        "tests": [promtool_case(groups, series, [quiet("PDGpuMemoryNearFull", "10m")])]}))
    assert run_promtool(promtool, "test", "rules", str(test_file)).returncode != 0


# ── The dashboard ─────────────────────────────────────────────────────────────────────────────

def test_dashboard_has_the_panels_the_issue_lists() -> None:
    titles = " | ".join(panel["title"] for panel in pd_dashboard()["panels"])
    for wanted in ("Requests / s", "TTFT percentiles", "TPOT percentiles", "Inter-token latency", "running / waiting",
                   "ongoing requests per replica", "queued requests per deployment", "KV-cache usage per engine",
                   "Transfers / s", "Bytes / s", "Time per transfer", "Failed transfers", "Backend in use",
                   "GPU utilisation", "GPU memory", "EFA traffic"):
        assert wanted in titles, wanted


def test_dashboard_panels_read_through_the_datasource_variable() -> None:
    dashboard = pd_dashboard()
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_backend_panel_turns_red_where_the_alert_fires(dev: Any) -> None:
    (panel,) = [p for p in pd_dashboard()["panels"] if p["title"] == "Backend in use"]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    prediction = rules.kv_transfer_prediction(dev.serving)
    assert steps[1]["value"] == rules.ucx_like_bytes_per_second(prediction)


def test_every_runbook_url_lands_on_a_heading(groups) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "OBSERVABILITY.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
               for line in doc.splitlines() if line.startswith("#")}
    for rule in groups[1]["rules"]:
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/OBSERVABILITY.md" and anchor in anchors, rule["alert"]
