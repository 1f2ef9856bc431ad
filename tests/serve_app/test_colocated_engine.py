"""A colocated engine run step by step: what a client of one sees, against cases worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from serve_app.colocated_engine import colocated_percentiles, run_engine
from serve_app.slo_sizing import Targets, Workload, colocated_ttft, decode_load
from tests.serve_app.test_slo_sizing import HALF, toy_replica

# The toy engine: a decode step reads 1 GB at 50 GB/s (20 ms); a 100-token prompt's prefill takes 40 ms;
# a step that takes a prompt in costs 30 ms more; the stream flushes every 50 ms, 10 ms outside the engine.
CALIBRATED = replace(HALF, prompt_intake_fixed_seconds=0.03, stream_overhead_seconds=0.01)


def engine(**changes):
    settings = {"calibration": CALIBRATED, "max_num_batched_tokens": 400, "max_num_seqs": 8,
                "stream_tick_seconds": 0.05, **changes}
    return toy_replica(**settings)


def test_a_lone_request_sees_its_intake_rounded_up_to_the_next_flush_then_one_decode_step_a_token():
    toy = engine()
    step, intake = toy.decode_step_seconds(1, 110), toy.intake_seconds(100)
    assert intake == pytest.approx(0.07, abs=1e-3)
    alone = run_engine(toy, [0.0], 100, 20)[0]
    assert alone.ttft_seconds == pytest.approx(0.10 + 0.01)  # 70 ms of intake, flushed at 100 ms
    assert alone.e2e_seconds == pytest.approx(intake + 19 * step + 0.01)
    # Without the flush ticks the first token reaches the client as it is made.
    assert run_engine(replace(toy, stream_tick_seconds=0.0), [0.0], 100, 20)[0].ttft_seconds == \
        pytest.approx(intake + 0.01)


def test_a_running_request_waits_out_every_step_that_takes_a_prompt_in():
    toy = engine()
    alone = run_engine(toy, [0.0], 100, 20)[0]
    # A second prompt arrives while the first decodes: one of the first's gaps becomes an intake step.
    both = run_engine(toy, [0.0, 0.2], 100, 20)
    stalled = toy.intake_seconds(100) + toy.decode_step_seconds(2, 110) - toy.decode_step_seconds(1, 110)
    assert both[0].e2e_seconds - alone.e2e_seconds == pytest.approx(stalled, rel=0.05)
    assert both[0].tpot_seconds > alone.tpot_seconds


def test_a_prompt_longer_than_the_token_budget_pays_the_intake_step_once_per_chunk():
    toy = engine(max_num_batched_tokens=60)
    long = run_engine(replace(toy, stream_tick_seconds=0.0), [0.0], 100, 2)[0]
    # Two steps (60 + 40 tokens), each with the fixed intake time.
    assert long.ttft_seconds == pytest.approx(2 * 0.03 + toy.prefill_seconds(60) + toy.prefill_seconds(40) + 0.01,
                                              rel=1e-3)


def test_max_num_seqs_holds_a_prompt_back_until_a_sequence_finishes():
    toy = engine(max_num_seqs=1, stream_tick_seconds=0.0)
    first, second = run_engine(toy, [0.0, 0.0], 100, 10)
    assert second.ttft_seconds >= first.e2e_seconds - 0.01 + toy.intake_seconds(100)
    assert run_engine(engine(max_num_seqs=2, stream_tick_seconds=0.0), [0.0, 0.0], 100, 10)[1].ttft_seconds < \
        first.e2e_seconds


def test_tpot_at_the_percentile_grows_with_the_rate_and_halves_its_growth_with_two_replicas():
    toy = engine()
    tpots = [colocated_percentiles(toy, rate, 100, 20, 0.9)[1] for rate in (0.5, 2.0, 4.0)]
    assert tpots == sorted(tpots) and tpots[-1] > 1.5 * tpots[0]
    workload, targets = Workload(4.0, 100, 20, 100, 20), Targets(10.0, 10.0, 0.9)
    one, two = (decode_load(toy, workload, targets, n, colocated=True).tpot_seconds for n in (1, 2))
    assert one == pytest.approx(tpots[-1]) and two == pytest.approx(tpots[1])


def test_an_engine_that_never_drains_what_arrives_has_no_ttft():
    toy = engine()
    workload, targets = Workload(40.0, 100, 20, 100, 20), Targets(10.0, 10.0, 0.9)
    assert colocated_ttft(toy, workload, targets, 1) == float("inf")
    assert colocated_ttft(toy, workload, targets, 16) < 1.0


def test_an_engine_whose_kv_cache_holds_no_sequence_has_no_ttft_rather_than_a_crash():
    toy = engine(kv_budget_bytes=0)
    workload, targets = Workload(1.0, 100, 20, 100, 20), Targets(10.0, 10.0, 0.9)
    assert toy.batch_cap(120) == 0
    assert colocated_ttft(toy, workload, targets, 1) == float("inf")
