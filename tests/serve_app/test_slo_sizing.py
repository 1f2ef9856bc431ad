"""The SLO sizing's arithmetic against cases worked by hand: queueing, FLOPs, bytes, Little's law."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from facts.gpus import GPU_SPECS, GpuSpec, gpu_spec
from facts.instances import RECORDED_EC2_ANSWERS, instance_type
from facts.models import ModelArchitecture, known_model
from facts.slo_calibration import (
    CALIBRATION,
    EAGER_STEP_OVERHEAD_SECONDS,
    STAND_IN_H200_LLAMA3_8B,
    Calibration,
    label_for,
)
from serve_app.capacity import capacity_report
from serve_app.config import EngineSettings
from serve_app.performance import ReplicaModel
from serve_app.queueing import erlang_c, mdc_wait_percentile, poisson_quantile
from serve_app.slo_sizing import (
    Targets,
    Workload,
    decode_load,
    decode_meets,
    decode_replicas_needed,
    fewest_replicas,
    floors,
    prefill_replicas_needed,
    ttft_at_percentile,
)
from serve_app.slo_validation import MeasuredPoint, compare, fit_calibration, lab_replica

# A made-up dense model and GPU with round numbers, and a calibration of round factors.
TOY_MODEL = ModelArchitecture(
    hf_id="toy/dense", num_layers=2, full_attention_layers=2, num_attention_heads=4, num_kv_heads=1, head_dim=8,
    hidden_size=32, vocab_size=100, parameter_count=1_000_000_000, checkpoint_dtype="bfloat16",
    max_position_embeddings=4096, source="test")
TOY_GPU = GpuSpec("TOY", bf16_dense_flops=1e13, memory_bytes_per_second=1e11, memory_gb=24, source="test")
HALF = Calibration(prefill_compute_efficiency=0.5, decode_bandwidth_efficiency=0.5, request_overhead_seconds=0.1,
                   decode_ingest_share=0.0, prompt_intake_fixed_seconds=0.0, stream_overhead_seconds=0.0,
                   measured_on_gpu="TOY", model_shape="toy", stand_in=False, measured="test", source="test")


def toy_replica(**changes: Any) -> ReplicaModel:
    base = ReplicaModel(model=TOY_MODEL, gpu=TOY_GPU, gpus_per_replica=1, weight_bytes=1_000_000_000,
                        kv_bytes_per_token=1_000, state_bytes_per_sequence=0, kv_budget_bytes=10_000_000,
                        network_bytes_per_second=1e9, calibration=HALF)
    return replace(base, **changes)


def qwen_on(instance: str) -> ReplicaModel:
    model = known_model("Qwen/Qwen3.5-9B")
    assert model is not None
    node = instance_type(RECORDED_EC2_ANSWERS[instance])
    report = capacity_report(model, node, dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.9,
                             enforce_eager=False)
    spec = gpu_spec(node.gpu_model)
    assert spec is not None
    return ReplicaModel.from_capacity(report, model, spec)


# ── Queueing ──────────────────────────────────────────────────────────────────────────────────

def test_erlang_c_one_server_is_the_utilisation_and_two_servers_at_load_one_is_a_third():
    assert erlang_c(1, 0.3) == pytest.approx(0.3)
    # c = 2, a = 1: (a²/2! · 2/(2-1)) / (1 + a + a²/2! · 2/(2-1)) = 1 / 3
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(2, 2.0) == 1.0


def test_mdc_wait_percentile_is_half_the_mm1_tail():
    # λ = 1/s, S = 0.5 s, one server: C = 0.5, μ - λ = 1/s; M/M/1's p99 wait ln(0.5/0.01) s, halved.
    assert mdc_wait_percentile(1.0, 0.5, 1, 0.99) == pytest.approx(0.5 * math.log(50))
    # Fewer than 1 % of arrivals wait at all: the p99 wait is 0.
    assert mdc_wait_percentile(0.001, 0.5, 1, 0.99) == 0.0
    assert mdc_wait_percentile(2.0, 0.5, 1, 0.99) == math.inf


def test_poisson_quantile():
    # Poisson(2): P(X ≤ 5) = 0.983, P(X ≤ 6) = 0.9955.
    assert poisson_quantile(2.0, 0.99) == 6
    assert poisson_quantile(2.0, 0.98) == 5
    assert poisson_quantile(0.0, 0.99) == 0
    assert poisson_quantile(10_000.0, 0.5) == 10_000


# ── The performance model ─────────────────────────────────────────────────────────────────────

def test_prefill_time_is_flops_over_peak_times_efficiency():
    replica = toy_replica()
    # 2 · 1e9 · 100 + 2 · L 2 · H 4 · d 8 · 100² = 2e11 + 1.28e6 FLOPs, at 1e13 × 0.5 FLOP/s.
    assert replica.prefill_flops(100) == pytest.approx(2e11 + 1.28e6)
    assert replica.prefill_seconds(100) == pytest.approx((2e11 + 1.28e6) / 5e12)
    assert replica.prefill_seconds(100, datasheet=True) == pytest.approx((2e11 + 1.28e6) / 1e13)


def test_decode_step_reads_the_weights_and_the_batchs_kv_and_state_twice():
    replica = toy_replica(state_bytes_per_sequence=500_000)
    # 1e9 weights + 10 × (1,000 tokens × 1,000 B + 2 × 500,000 B) = 1.02e9 B at 1e11 × 0.5 B/s.
    assert replica.decode_step_seconds(10, 1_000) == pytest.approx(1.02e9 / 5e10)
    assert replica.decode_step_seconds(10, 1_000, datasheet=True) == pytest.approx(1.02e9 / 1e11)


def test_a_large_batch_turns_decode_compute_bound():
    replica = toy_replica(weight_bytes=1)
    # Per sequence 2e9 FLOPs (+ attention); at 5e12 FLOP/s a batch of 1,000 takes 0.4 s, its 1e7 B 0.2 ms.
    assert replica.decode_step_seconds(1_000, 10) == pytest.approx(1_000 * replica.decode_step_flops(1, 10) / 5e12)


def test_kv_hand_over_and_what_fits():
    replica = toy_replica(state_bytes_per_sequence=1_000_000)
    assert replica.transfer_seconds(1_000) == pytest.approx((1_000 * 1_000 + 1_000_000) / 1e9)
    assert replica.sequences_that_fit(1_000) == 5  # 10 MB / 2 MB


def test_qwen35_9b_on_an_l4_cannot_decode_faster_than_its_weight_read():
    floor = floors(qwen_on("g6.8xlarge"), qwen_on("g6.8xlarge"), Workload(0.1, 1024, 256, 3072, 1024))
    weight_read = 17_907_606_528 / 300e9  # the text-only weights at the L4's 300 GB/s: 59.7 ms
    assert weight_read < floor.tpot_datasheet_seconds < weight_read * 1.02
    assert floor.tpot_predicted_seconds == pytest.approx(
        floor.tpot_datasheet_seconds / CALIBRATION.decode_bandwidth_efficiency)
    # An H200 has 16× the L4's bandwidth: its floor is 16× lower.
    h200 = floors(qwen_on("p5en.48xlarge"), qwen_on("p5en.48xlarge"), Workload(0.1, 1024, 256, 3072, 1024))
    assert h200.tpot_datasheet_seconds == pytest.approx(floor.tpot_datasheet_seconds / 16, rel=0.01)


# ── Sizing ────────────────────────────────────────────────────────────────────────────────────

def test_decode_batch_follows_littles_law_and_its_percentile_is_poisson():
    replica = toy_replica()
    workload = Workload(1.0, 1_000, 100, 1_000, 100)  # context 1,050 tokens
    load = decode_load(replica, workload, Targets(1.0, 1.0, 0.99), replicas=1)
    # step(B) = 0.02 s + B × 0.021 ms; B = 1/s × 100 × step(B) → B = 2 / (1 - 0.0021).
    assert load.mean_batch == pytest.approx(2 / (1 - 100 * 1_050_000 / 5e10))
    assert load.batch_at_percentile == poisson_quantile(load.mean_batch, 0.99)
    assert load.tpot_seconds == pytest.approx(replica.decode_step_seconds(load.batch_at_percentile, 1_050))
    # Twice the replicas, half the batch each.
    assert decode_load(replica, workload, Targets(1.0, 1.0, 0.99), replicas=2).mean_batch == pytest.approx(
        load.mean_batch / 2, rel=0.01)


def test_decode_that_never_drains_runs_at_its_cap_and_says_the_queue_grows():
    replica = toy_replica()
    load = decode_load(replica, Workload(100.0, 1_000, 100, 1_000, 100), Targets(1, 1, 0.99), replicas=1)
    # 10 MB of KV holds 9 sequences of 1,100 tokens: the engine runs 9 and the rest queue.
    assert load.mean_batch is None and load.cap == 9
    assert load.tpot_seconds == pytest.approx(replica.decode_step_seconds(9, 1_050))
    assert not decode_meets(load, Targets(1, 1, 0.99))
    assert "grows without bound" in (load.shortfall() or "")
    assert "inf" not in (load.shortfall() or "") and "2147483648" not in (load.shortfall() or "")


def test_max_num_seqs_caps_the_batch_and_decode_replicas_grow_as_it_shrinks():
    replica = toy_replica(kv_budget_bytes=10**12)  # the KV cache is no bound here
    workload, targets = Workload(5.0, 1_000, 100, 1_000, 100), Targets(1.0, 0.05, 0.99)
    needed = [decode_replicas_needed(replace(replica, max_num_seqs=cap), workload, targets) for cap in (256, 8, 2)]
    assert needed[0] is not None and needed[1] is not None and needed[2] is not None
    assert needed[0] < needed[1] < needed[2]
    # What the cap lets in flight: replicas × cap at least the mean the arrivals keep decoding.
    load = decode_load(replace(replica, max_num_seqs=2), workload, targets, needed[2])
    assert load.replicas * load.cap >= load.sequences_in_flight and load.cap_reason == "maxNumSeqs 2"
    short = decode_load(replace(replica, max_num_seqs=2), workload, targets, needed[2] - 1)
    assert not short.fits and "wait for a free sequence slot" in (short.shortfall() or "")


def test_a_paged_kv_cache_bounds_the_batch_in_blocks_on_its_smaller_start():
    model = known_model("Qwen/Qwen3.5-9B")
    assert model is not None
    node = instance_type(RECORDED_EC2_ANSWERS["g6.8xlarge"])
    report = capacity_report(model, node, dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.9,
                             enforce_eager=False, max_num_seqs=32, max_num_batched_tokens=2048)
    assert report.num_blocks is not None and report.num_blocks_restart is not None and report.paging is not None
    engine = EngineSettings()
    replica = ReplicaModel.from_capacity(report, model, GPU_SPECS["L4"], engine=engine)
    smaller = min(report.num_blocks, report.num_blocks_restart)
    # 1,280 tokens take 3 attention blocks of 528 tokens and one state block per group.
    assert replica.sequences_that_fit(1_280) == smaller // report.paging.blocks_per_sequence(1_280)
    assert replica.batch_cap(1_280) == min(engine.max_num_seqs, replica.sequences_that_fit(1_280))


def test_a_decode_step_runs_as_the_captured_cuda_graph_or_eager_above_them():
    graphs = toy_replica(cuda_graph_sizes=(1, 2, 4, 8))
    bare = toy_replica()
    # A batch of 3 runs padded to the graph of 4; a batch of 9 runs eager, a measured fixed time more.
    assert graphs.decode_step_seconds(3, 1_000) == pytest.approx(bare.decode_step_seconds(4, 1_000))
    assert graphs.decode_step_seconds(9, 1_000) == pytest.approx(
        bare.decode_step_seconds(9, 1_000) + EAGER_STEP_OVERHEAD_SECONDS)
    assert toy_replica(cuda_graph_sizes=()).decode_step_seconds(1, 1_000) == pytest.approx(
        bare.decode_step_seconds(1, 1_000) + EAGER_STEP_OVERHEAD_SECONDS)
    # The datasheet floor is the batch itself, no engine overhead.
    assert graphs.decode_step_seconds(9, 1_000, datasheet=True) == bare.decode_step_seconds(9, 1_000, datasheet=True)


def test_ttft_adds_overhead_wait_prefill_hand_over_and_one_decode_step():
    replica = toy_replica()
    workload = Workload(0.001, 100, 10, 100, 10)
    # No wait at this rate: 0.1 s overhead + 0.04 s prefill + 0.1 ms hand-over + one step (0.02 s + 0.1 MB).
    expected = 0.1 + (2e11 + 1.28e6) / 5e12 + 100_000 / 1e9 + (1e9 + 100_000) / 5e10
    assert ttft_at_percentile(replica, replica, workload, Targets(1, 1, 0.99), 1) == pytest.approx(expected)


def test_replicas_needed_grow_with_the_rate_until_none_meets():
    replica = toy_replica()
    targets = Targets(ttft_seconds=1.0, tpot_seconds=0.05, objective=0.99)
    needed = [prefill_replicas_needed(replica, replica, Workload(rate, 100, 10, 100, 10), targets)
              for rate in (0.1, 30.0, 100.0)]
    assert needed[0] == 1 and needed[0] < needed[1] < needed[2]
    assert decode_replicas_needed(replica, Workload(0.1, 100, 10, 100, 10), Targets(1.0, 0.01, 0.99)) is None


def test_every_gpu_the_preview_accepts_has_vendor_figures():
    accepted = {instance_type(a).gpu_model for a in RECORDED_EC2_ANSWERS.values() if a.gpus and a.efa_supported}
    assert accepted <= set(GPU_SPECS)
    assert {"L4", "A10G", "L40S", "A100", "H100", "H200", "B200"} <= set(GPU_SPECS)


def test_figures_for_a_gpu_the_lab_has_not_run_are_labelled():
    assert label_for("L4") == "fitted to H200 measurements, extrapolated to L4"
    assert label_for("H200") == "fitted to H200 measurements"
    assert "stand-in" in label_for("H200", STAND_IN_H200_LLAMA3_8B)


# ── Validation: the model against measured percentiles ───────────────────────────────────────

def test_compare_reports_the_error_of_each_point():
    replica = toy_replica()
    point = MeasuredPoint(requests_per_second=0.5, prompt_tokens=100, output_tokens=10, ttft_seconds=0.2,
                          tpot_seconds=0.02)
    [comparison] = compare([point], replica, replica, 0.9)
    workload = Workload(0.5, 100, 10, 100, 10)
    assert comparison.predicted_ttft_seconds == ttft_at_percentile(replica, replica, workload, Targets(1, 1, 0.9), 1)
    assert comparison.ttft_error == pytest.approx(comparison.predicted_ttft_seconds / 0.2 - 1)
    assert comparison.tpot_error == pytest.approx(comparison.predicted_tpot_seconds / 0.02 - 1)


def test_fit_calibration_recovers_the_factors_that_made_the_measurements():
    truth = replace(HALF, prefill_compute_efficiency=0.4, decode_bandwidth_efficiency=0.7,
                    request_overhead_seconds=0.05)
    measured_with = toy_replica(calibration=truth)
    points = []
    for rate in (0.5, 2.0, 8.0):
        [made] = compare([MeasuredPoint(rate, 200, 50, 1.0, 1.0)], measured_with, measured_with, 0.9)
        points.append(MeasuredPoint(rate, 200, 50, made.predicted_ttft_seconds, made.predicted_tpot_seconds))
    start = toy_replica()  # HALF: 0.5 / 0.5 / 0.1 s
    fitted = fit_calibration(points, start, start, 0.9, template=replace(HALF, source="the three points"))
    assert fitted.decode_bandwidth_efficiency == pytest.approx(0.7)
    assert fitted.prefill_compute_efficiency == pytest.approx(0.4)
    assert fitted.request_overhead_seconds == pytest.approx(0.05)
    assert fitted.source == "the three points"


def test_a_lab_replica_has_the_h200s_speed_and_an_l4s_memory():
    model = known_model("Qwen/Qwen3.5-9B")
    assert model is not None
    capped = lab_replica(model, GPU_SPECS["H200"], usable_memory_mib=22_888, gpu_memory_utilization=0.9,
                         max_model_len=4096, kv_bytes_per_second=13e9)
    on_l4, on_h200 = qwen_on("g6.8xlarge"), qwen_on("p5en.48xlarge")
    assert capped.kv_budget_bytes == on_l4.kv_budget_bytes
    assert capped.decode_step_seconds(1, 1000) == pytest.approx(on_h200.decode_step_seconds(1, 1000))
    assert capped.transfer_seconds(1000) == pytest.approx((1000 * capped.kv_bytes_per_token
                                                           + capped.state_bytes_per_sequence) / 13e9)


# ── Validation on the GPU: the stack's own architecture on an L4's memory (H200 lab) ─────────────

# The open-loop runs of 2026-12-02 served the architecture with transformers' default rotary settings
# (no M-RoPE: vLLM's position table 96 MiB smaller than the published config's).
QWEN35_AS_RUN_ON_2026_12_02 = replace(known_model("Qwen/Qwen3.5-9B"), mrope=False)

def _lab_validation(calibration: Calibration = CALIBRATION):
    import json
    from pathlib import Path

    from facts.gpus import GPU_SPECS
    from serve_app.slo_validation import MeasuredPoint, compare, lab_replica

    data = json.loads((Path(__file__).parents[1] / "data" / "qwen35-open-loop-h200.json").read_text())
    replica = lab_replica(QWEN35_AS_RUN_ON_2026_12_02, GPU_SPECS["H200"], usable_memory_mib=22_888,
                          gpu_memory_utilization=0.9, max_model_len=4096,
                          kv_bytes_per_second=data["lab_link_bytes_per_second"], calibration=calibration)
    points = [MeasuredPoint(p["requests_per_second"], 512, 128, p["ttft_p90_seconds"], p["tpot_p90_seconds"])
              for p in data["points"]]
    return {c.point.requests_per_second: c for c in compare(points, replica, replica, 0.9)}


def test_below_the_labs_link_rate_the_model_is_within_a_quarter_of_the_gpu():
    at_2 = _lab_validation()[2.0]
    assert at_2.predicted_ttft_seconds == pytest.approx(at_2.point.ttft_seconds, rel=0.25)
    assert at_2.predicted_tpot_seconds == pytest.approx(at_2.point.tpot_seconds, rel=0.25)


def test_past_the_labs_link_rate_the_model_says_no_replica_meets_it_as_the_gpu_showed():
    # 6 and 12 requests/s exceed the one-host link's 5.4 hand-overs a second: TTFT p90 grew to 5–7 s
    # within 48 requests; the model calls the queue unbounded.
    comparisons = _lab_validation()
    for rate in (6.0, 12.0):
        assert comparisons[rate].predicted_ttft_seconds == math.inf
        assert comparisons[rate].point.ttft_seconds > 10 * comparisons[2.0].point.ttft_seconds


def test_counting_the_decode_engines_ingest_brings_tpot_within_a_quarter_at_every_lab_rate():
    before = _lab_validation(replace(CALIBRATION, decode_ingest_share=0.0))
    after = _lab_validation()
    # Without it, TPOT p90 at 6 and 12 requests/s is under-predicted by more than half.
    assert before[6.0].tpot_error < -0.5 and before[12.0].tpot_error < -0.5
    for rate, comparison in after.items():
        assert abs(comparison.tpot_error) <= 0.25, (rate, comparison.tpot_error)
    assert after[2.0].ttft_error == pytest.approx(before[2.0].ttft_error)  # TTFT below the link's rate unchanged


def test_the_ingest_share_is_what_the_recorded_lab_tpot_fits():
    import json
    from pathlib import Path

    from serve_app.slo_validation import fit_ingest_share

    data = json.loads((Path(__file__).parents[1] / "data" / "qwen35-open-loop-h200.json").read_text())
    replica = lab_replica(QWEN35_AS_RUN_ON_2026_12_02, GPU_SPECS["H200"], usable_memory_mib=22_888,
                          gpu_memory_utilization=0.9, max_model_len=4096,
                          kv_bytes_per_second=data["lab_link_bytes_per_second"])
    points = [MeasuredPoint(p["requests_per_second"], 512, 128, p["ttft_p90_seconds"], p["tpot_p90_seconds"])
              for p in data["points"]]
    assert fit_ingest_share(points, replica, replica, 0.9) == CALIBRATION.decode_ingest_share


def test_hand_overs_arriving_often_stretch_the_decode_step_and_can_starve_it():
    replica = toy_replica(calibration=replace(HALF, decode_ingest_share=0.5))
    workload, targets = Workload(1.0, 1_000, 100, 1_000, 100), Targets(1.0, 1.0, 0.99)
    # One hand-over moves 1 MB at 1 GB/s: 1 ms, half of it stalls decode; 100 a second take 5 % of its time.
    calm = decode_load(replica, workload, targets, 1, hand_overs_per_second=0.0)
    busy = decode_load(replica, workload, targets, 1, hand_overs_per_second=100.0)
    assert busy.stall_share == pytest.approx(0.05)
    assert busy.tpot_seconds >= calm.tpot_seconds / (1 - 0.05) * 0.999
    starved = decode_load(replica, workload, targets, 1, hand_overs_per_second=2_000.0)
    assert starved.stall_share >= 1 and not decode_meets(starved, targets)
    assert "never gets to a decode step" in (starved.shortfall() or "")


@pytest.mark.parametrize("needed", [1, 2, 23, 63, 64, None])
def test_the_fewest_replicas_are_found_in_a_few_tries(needed: int | None) -> None:
    # Each colocated try simulates an engine, and `pdctl size` asks every GPU type: a walk up to 64
    # replicas made it take seconds per type.
    tries: list[int] = []

    def meets(replicas: int) -> bool:
        tries.append(replicas)
        return needed is not None and replicas >= needed

    assert fewest_replicas(meets) == needed
    assert len(tries) <= 7
