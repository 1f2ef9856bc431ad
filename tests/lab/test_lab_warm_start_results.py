"""The warm-start figures docs/PROVEN.md (#restored-in-place, #serve-replica-start) quotes and facts/durations.py
counts are read back from the committed raw files of the 2026-12-03 08:24 UTC chain: the probes' JSON, the
scale-out's result and the Ray logs packed beside them."""

from __future__ import annotations

import datetime
import json
import re
import tarfile
from pathlib import Path

import pytest

from facts import durations

REPO = Path(__file__).parents[2]
PREFIX = REPO / "lab" / "results" / "2026-12-03-h200-qwen35-0824utc"
# Colocated's second validation run: its engine started under Serve on compile caches at their key.
SECOND_COLOCATED = REPO / "lab" / "results" / "2026-12-03-h200-qwen35-1112utc"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
INIT = re.compile(r"(\d\d:\d\d:\d\d) \[core\.py:\d+\] init engine \(profile, create kv cache, warmup model\) took "
                  r"([\d.]+) s")


def _flat(anchor: str) -> str:
    text = (REPO / "docs" / "PROVEN.md").read_text().split(f'<a id="{anchor}"></a>')[1].split("<a id=")[0]
    return re.sub(r"\s+", " ", text)


def _probe(name: str) -> dict:
    return json.loads(Path(f"{PREFIX}-{name}-memory-probe.json").read_text())


def _logs(kind: str, prefix: Path = PREFIX) -> dict[str, str]:
    with tarfile.open(f"{prefix}-{kind}-ray-logs.tar.xz") as archive:
        return {m.name: ANSI.sub("", archive.extractfile(m).read().decode()) for m in archive.getmembers()
                if m.isfile()}


def _clock(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%H:%M:%S,%f" if "," in text else "%H:%M:%S")


def _to_init(logs: dict[str, str], decision: str) -> tuple[float, float]:
    """Seconds from the controller's line holding `decision` to the engine's init, and the init's own seconds."""
    controller = next(t for n, t in logs.items() if "controller_" in n)
    start = re.search(r"(\d\d:\d\d:\d\d,\d+) controller \d+ -- " + re.escape(decision), controller).group(1)
    inits = [m for n, t in logs.items() if n.endswith(".out") for m in INIT.finditer(t)]
    done, seconds = max((m.group(1), float(m.group(2))) for m in inits)  # the last engine to init: this replica
    begins = _clock(done) - datetime.timedelta(seconds=seconds)
    return round((begins - _clock(start)).total_seconds(), 1), seconds


def test_a_first_start_with_the_planned_kv_bytes_holds_the_predicted_blocks_and_fits():
    first, restored = _probe("first-start-kv-bytes"), _probe("restored-in-place")
    for data in (first, restored):
        (probe,) = data["probes"]
        assert data["kv_cache_bytes"] == 2_831_994_061 and probe["engine"]["num_blocks"] == 163
        assert probe["memory"]["peak_gpu_memory_mib"] < 22_888 and probe["load"]["preempted_sequences"] == 0
    assert first["compile_caches"]["empty_at_start"] and 163 / 167 >= 0.95
    flat = _flat("restored-in-place")
    assert "**A new node's first start holds 163 KV blocks, what the plan predicted: 97.6% of a restart's 167**" \
        in flat


def test_caches_restored_in_place_carry_the_compile_and_the_table_is_the_probes():
    rows = []
    for name in ("first-start-kv-bytes", "restored-in-place"):
        data = _probe(name)
        (probe,) = data["probes"]
        log = probe["log"]
        rows.append(f"| {probe['engine']['num_blocks']} | {probe['memory']['peak_gpu_memory_mib']:,} | "
                    f"{log['init_engine_s']:.2f} | {log['torch_compile_s']:.2f}")
        assert f"| {log['profile_run_s']:.2f} | {float(data['flashinfer']['first_call_s']):.1f} | {probe['start_s']} |" \
            in _flat("restored-in-place")
    flat = _flat("restored-in-place")
    assert all(row in flat for row in rows), rows
    caches = _probe("restored-in-place")["compile_caches"]["restored"]
    assert caches["same_path"] and caches["page_cache"] == "drop_caches"
    assert f"({caches['files']:,} files, {caches['bytes'] / 1e6:.1f} MB)" in flat
    (probe,) = _probe("restored-in-place")["probes"]
    assert round(probe["log"]["init_engine_s"], 1) == 7.0
    # The plan counts vLLM's init under Ray Serve LLM on caches at their key, from that run's own log.
    _, init = _to_init(_logs("colocated", SECOND_COLOCATED), "Adding 1 replica to Deployment(name='LLMServer")
    assert durations.ENGINE_INIT_CACHED.seconds == round(init, 1)
    assert "torch.compile took 4.74 s" in "".join(_logs("colocated", SECOND_COLOCATED).values())
    (cold,) = _probe("first-start-kv-bytes")["probes"]
    flashinfer = float(_probe("first-start-kv-bytes")["flashinfer"]["first_call_s"])
    assert durations.ENGINE_INIT_COLD.seconds == pytest.approx(round(cold["log"]["init_engine_s"], 1) + flashinfer)


@pytest.mark.parametrize(("prefix", "kind", "decision", "row"), [
    (PREFIX, "colocated", "Adding 1 replica to Deployment(name='LLMServer", "the colocated app's one engine"),
    (PREFIX, "scaling", "Upscaling Deployment(name='Decode", "a second decode replica, under load"),
    (SECOND_COLOCATED, "colocated", "Adding 1 replica to Deployment(name='LLMServer",
     "the colocated app's one engine, compile caches at their key"),
])
def test_ray_serve_llms_replica_start_is_the_logs_and_the_plan_counts_its_mean(prefix, kind, decision, row):
    to_init, init = _to_init(_logs(kind, prefix), decision)
    flat = _flat("serve-replica-start")
    assert f"| {to_init} | {init:.2f} |" in flat and row in flat
    assert to_init in durations.SERVE_REPLICA_START_SAMPLES
    samples = durations.SERVE_REPLICA_START_SAMPLES
    assert durations.SERVE_REPLICA_START.seconds == pytest.approx(sum(samples) / len(samples), abs=0.05)
    assert f"The plan counts the mean, {durations.SERVE_REPLICA_START.seconds} s" in flat


def test_the_scale_out_with_the_stacks_engine_served_with_no_failed_request():
    data = json.loads(Path(f"{PREFIX}-scaling-result.json").read_text())
    run = data["scaling"]
    assert data["apps"] == {"qwen35-9b-pd": {"mode": "pd", "route_prefix": "/qwen35-9b/pd"}}
    assert data["verdict"]["passed"] and run["failed_requests"] == 0
    first = run["new_replica_start"]["decision_to_first_token_s"]
    counts = [run["requests"][phase]["succeeded"] for phase in ("low", "high", "scale_down")]
    flat = _flat("serve-replica-start")
    assert f"between **{first['after']} and {first['by']} s** after that decision" in flat
    assert f"**0 of {sum(counts)} requests failed** ({counts[0]} before the step, {counts[1]} at high load, " \
           f"{counts[2]} after the drop)" in flat
    decision = run["serve_decisions"][0]
    assert f"at {decision['ongoing_requests']} ongoing requests" in flat
    assert f"{run['scale_up']['serve_decision_after_s']} s after the load stepped" in flat


def test_a_prestarted_ray_worker_still_imports_the_replicas_modules_when_assigned():
    logs = _logs("colocated", SECOND_COLOCATED)
    # Ray's idle workers, started before any job took them: no job in their log names.
    prestarted = {int(m[1]) for name in logs for m in [re.search(r"-ffffffff-(\d+)\.out$", name)] if m}
    controller = next(t for n, t in logs.items() if "controller_" in n)
    started = {deployment: (float(seconds), int(pid)) for deployment, seconds, pid in re.findall(
        r"deployment='([^':]+)[^']*', app='[^']+'\) started successfully on node '\w+' after ([\d.]+)s \(PID: (\d+)\)",
        controller)}
    seconds, pid = started["OpenAiIngress"]
    assert pid in prestarted and started["LLMServer"][1] not in prestarted
    # Of those seconds, its own constructor took a tenth: the rest is the worker importing the replica's modules.
    assert re.search(rf"after {seconds}s \(PID: {pid}\)\. Replica constructor, reconfigure method, and initial "
                     r"health check took 0\.1s", controller)
    flat = _flat("serve-replica-start")
    assert f"({len(prestarted)} here: pids {min(prestarted)}–{max(prestarted)} in the 11:13 start's logs" in flat
    assert f"(pid {pid}) and still started **{seconds} s** after Serve's decision" in flat
