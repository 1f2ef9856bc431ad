"""The arithmetic of the fault and soak runs (lab/recovery.py, lab/faults.py verdicts, lab/soak.py
verdicts), on recorded-shape data with known answers."""

from __future__ import annotations

import time

import pytest

from lab import faults, recovery, soak
from lab.bad_requests import bad_requests, burst_ok
from measure.latency import RequestSample

INJECTED = 100.0


def ok(start: float, end: float) -> RequestSample:
    return RequestSample(start=start, end=end, token_times=(start + 0.1,), output_tokens=8)


DEAD = "HTTP 500: engine dead (Request ID: 3f2a9c1e-7b4d-4e8a-9c0d-1a2b3c4d5e6f)"


def failed(start: float, end: float, error: str = DEAD) -> RequestSample:
    return RequestSample(start=start, end=end, error=error)


# ── outage ───────────────────────────────────────────────────────────────────────────────────

def test_requests_that_ended_before_the_fault_do_not_count():
    result = recovery.outage([ok(90, 95), failed(91, 96), ok(99, 101), ok(101, 102)], INJECTED)
    assert result["requests_after_injection"] == 2 and result["failed"] == 0
    assert result["time_to_success_s"] == 2.0  # the first request started after the fault, done at 102


def test_time_to_success_counts_from_the_fault_to_the_first_success_after_the_last_failure():
    samples = [ok(99, 100.5), failed(99.5, 100.2), failed(101, 101.1), failed(110, 110.1),
               ok(105, 111.0),  # started before the last failure started: not proof of recovery
               ok(110.5, 112.0), ok(111, 113)]
    result = recovery.outage(samples, INJECTED)
    assert result["failed"] == 3
    assert result["first_failure_after_s"] == pytest.approx(0.2)
    assert result["last_failure_after_s"] == pytest.approx(10.1)
    assert result["time_to_success_s"] == 12.0


def test_no_success_after_the_last_failure_is_not_recovered():
    result = recovery.outage([failed(100, 101), ok(99, 102), failed(103, 104)], INJECTED)
    assert result["failed"] == 2 and result["time_to_success_s"] is None


def test_errors_are_counted_without_their_request_ids():
    samples = [failed(100, 101), failed(101, 102, DEAD.replace("3f2a9c1e", "0aa1b2c3"))]
    assert recovery.outage(samples, INJECTED)["errors"] == {"HTTP 500: engine dead (Request ID: <id>)": 2}


# ── back_after ───────────────────────────────────────────────────────────────────────────────

def observation(at: float, decode: set[str], controller: int | None = 7) -> recovery.Observation:
    return recovery.Observation(at=at, running={"Decode:m": frozenset(decode), "Prefill:m": frozenset({"p1"})},
                                controller_pid=controller)


def test_a_replica_is_back_when_a_new_one_runs_where_the_old_one_did():
    observations = [observation(99, {"d1"}), observation(101, {"d1"}),  # the dead one still listed RUNNING
                    observation(103, set()), observation(110, set()), observation(131.5, {"d2"})]
    assert recovery.back_after(observations, INJECTED, recovery.replica_replaced("Decode:m")) == 31.5
    assert recovery.back_after(observations[:4], INJECTED, recovery.replica_replaced("Decode:m")) is None


def test_the_controller_is_back_in_a_new_process_that_answers():
    observations = [observation(99, {"d1"}, 7), observation(101, {"d1"}, None), observation(102, {"d1"}, 7),
                    observation(104, {"d1"}, 9)]
    assert recovery.back_after(observations, INJECTED, recovery.controller_replaced) == 4.0


def test_back_after_needs_an_observation_before_the_fault():
    with pytest.raises(ValueError, match="before the injection"):
        recovery.back_after([observation(101, {"d1"})], INJECTED, recovery.controller_replaced)


# ── counter_increase (NIXL transfers) ────────────────────────────────────────────────────────

NAME = "ray_vllm_nixl_xfer_time_seconds_count"


def scrape(**replicas: float) -> str:
    lines = ["# HELP ray_vllm_nixl_xfer_time_seconds x", "# TYPE ray_vllm_nixl_xfer_time_seconds histogram"]
    for replica, count in replicas.items():
        lines.append(f'ray_vllm_nixl_xfer_time_seconds_count{{ReplicaId="{replica}"}} {count}')
        lines.append(f'ray_vllm_nixl_xfer_time_seconds_sum{{ReplicaId="{replica}"}} {count / 100}')
    return "\n".join(lines) + "\n"


def test_transfers_grow_within_a_series_and_a_new_replicas_series_counts_whole():
    assert recovery.counter_increase(scrape(a=10), scrape(a=25), NAME) == 15
    # decode restarted: its old series is gone, the new one counts from zero
    assert recovery.counter_increase(scrape(a=10), scrape(b=4), NAME) == 4


def test_a_series_that_went_down_was_reset():
    assert recovery.counter_increase(scrape(a=10), scrape(a=3), NAME) == 3


def test_no_series_means_no_answer_not_zero():
    assert recovery.counter_increase(scrape(a=10), "# scrape failed\n", NAME) is None
    assert recovery.counter_increase(scrape(a=10), scrape(a=10), NAME) == 0


# ── memory_trend (the soak) ──────────────────────────────────────────────────────────────────

def points(values: list[float], every: float = 5.0) -> list[tuple[float, float]]:
    return [(i * every, v) for i, v in enumerate(values)]


def test_flat_memory_with_noise_and_a_spike_did_not_grow():
    values = [1000.0 + (7 if i % 3 else -5) for i in range(40)]
    values[25] = 1900.0  # one transient allocation
    trend = recovery.memory_trend(points(values), warmup_s=20)
    assert trend["grew"] is False and trend["samples"] == 36


def test_a_steady_leak_grew():
    trend = recovery.memory_trend(points([1000.0 + 10 * i for i in range(40)]), warmup_s=0)
    assert trend["grew"] is True
    assert trend["rise_mib"] == pytest.approx(300.0)
    assert trend["slope_mib_per_min"] == pytest.approx(120.0)


def test_warm_up_growth_is_left_out():
    values = [500.0 + 100 * i for i in range(6)] + [1100.0] * 30  # the engine loads, then holds still
    assert recovery.memory_trend(points(values), warmup_s=30)["grew"] is False
    assert recovery.memory_trend(points(values), warmup_s=0)["grew"] is True


def test_a_small_rise_is_no_growth():
    values = [20000.0 + 2 * i for i in range(40)]  # +78 MiB on a 20 GiB process: under 5 %
    assert recovery.memory_trend(points(values), warmup_s=0)["grew"] is False


def test_too_few_samples_decide_nothing():
    assert recovery.memory_trend(points([1.0] * 5), warmup_s=0)["grew"] is None


# ── verdicts ─────────────────────────────────────────────────────────────────────────────────

def fault_result(fault: str, *, recovered=True, after_failed=0, greedy=True, transfers=5.0, trouble=()) -> dict:
    return {"fault": fault, "recovered": recovered,
            "after_recovery": {"requests": {"failed": after_failed, "succeeded": 10, "total": 10 + after_failed}},
            "greedy_after_recovery": {"passed": greedy},
            "kv_transfers": {"transfers_after_recovery": transfers, "new_nixl_error_lines": list(trouble)}}


def test_the_fault_verdict_needs_recovery_clean_requests_greedy_equality_and_transfers():
    assert faults.verdict([fault_result(f) for f in faults.FAULTS])["passed"] is True
    for broken in ({"recovered": False}, {"after_failed": 1}, {"greedy": False}, {"transfers": 0.0},
                   {"trouble": ["ERROR nixl transfer failed"]}):
        assert faults.verdict([fault_result("decode-engine", **broken)])["passed"] is False, broken


def test_without_nixl_metrics_transfers_are_not_judged_by_them():
    result = fault_result("prefill-replica", transfers=None)
    assert faults.kv_resumed(result) is None
    assert "kv_transfers_resumed:prefill-replica" not in faults.verdict([result])["checks"]


def test_the_soak_passes_only_with_no_failure_and_no_growth():
    flat = {"rss:Decode:m": {"grew": False}, "gpu:0": {"grew": False}}
    assert soak.soak_verdict(0, 500, flat)["passed"] is True
    assert soak.soak_verdict(1, 500, flat)["passed"] is False
    assert soak.soak_verdict(0, 500, {**flat, "gpu:0": {"grew": True}})["passed"] is False
    assert soak.soak_verdict(0, 500, {"gpu:0": {"grew": None}})["passed"] is False  # nothing was judged


def test_a_burst_is_fine_queued_or_refused_as_overload_but_not_lost():
    assert burst_ok({"requests": 4, "statuses": {"200": 3, "429": 1}})
    assert not burst_ok({"requests": 4, "statuses": {"200": 3, "500": 1}})
    assert not burst_ok({"requests": 4, "statuses": {"200": 3, "ClientConnectorError": 1}})


def test_the_bad_requests_exceed_the_context_they_are_built_for():
    requests = {r.name: r for r in bad_requests("m", 1024)}
    assert len(requests["prompt longer than maxModelLen"].body["prompt"]) > 1024
    assert requests["max_tokens beyond maxModelLen"].body["max_tokens"] > 1024
    both = requests["prompt + max_tokens beyond maxModelLen"].body
    assert len(both["prompt"]) < 1024 and both["max_tokens"] < 1024 < len(both["prompt"]) + both["max_tokens"]
    assert requests["unknown model"].body["model"] != "m"
    assert all(r.expect and all(400 <= s < 500 for s in r.expect) for r in requests.values())


def test_the_engine_core_under_a_replica_is_found_by_its_title():
    """What the engine faults kill: a child process titled like vLLM's engine core."""
    import os
    import subprocess
    import sys

    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "VLLM::EngineCore_DP0"])
    try:
        for _ in range(50):
            if faults.engine_core_pid(os.getpid()) == core.pid:
                break
            time.sleep(0.05)
        assert faults.engine_core_pid(os.getpid()) == core.pid
        assert core.pid in faults.descendants(os.getpid())
    finally:
        core.kill()
        core.wait()


# ── longest silence ──────────────────────────────────────────────────────────────────────────

def test_the_longest_silence_is_the_widest_stretch_without_a_token_within_the_window():
    samples = [RequestSample(start=9, end=10.4, token_times=(9.5, 10.4), output_tokens=2),
               RequestSample(start=10, end=40, token_times=(31.0, 40.0), output_tokens=2),  # waited, then served
               RequestSample(start=12, end=12.1, error=DEAD)]  # failed: no token
    assert recovery.longest_silence(samples, 10.0, 35.0) == pytest.approx(31.0 - 10.4)
    assert recovery.longest_silence(samples, 32.0, 35.0) == pytest.approx(3.0)  # no token at all: the whole window
    assert recovery.longest_silence(samples, 35.0, 35.0) is None
