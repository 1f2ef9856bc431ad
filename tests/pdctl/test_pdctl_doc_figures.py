"""Every figure docs/PLAN.md and docs/SIZING.md quote about the plan is the plan's (or the model's) own:
each is recomputed here and looked for in the document's text, so a change that moves one fails."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from facts.gpus import GPU_SPECS, gpu_spec
from facts.instances import RECORDED_EC2_ANSWERS, instance_type
from facts.models import known_model
from facts.slo_calibration import CALIBRATION, EAGER_STEP_OVERHEAD_SECONDS
from offline import run_offline
from pdctl.plan import build_plan
from serve_app.capacity import capacity_report
from serve_app.config import EngineSettings
from serve_app.performance import ReplicaModel
from serve_app.slo_sizing import Targets, Workload, decode_replicas_needed
from serve_app.slo_validation import MeasuredPoint, compare, lab_replica

DOCS = Path(__file__).resolve().parents[2] / "docs"
DATA = Path(__file__).resolve().parents[1] / "data"


def text_of(name: str) -> str:
    """The document with its line breaks as spaces: a figure may wrap."""
    return re.sub(r"\s+", " ", (DOCS / name).read_text())


@pytest.fixture(scope="module")
def dev_plan():
    run = run_offline("dev")
    return json.loads(json.dumps(build_plan(run, stack="dev", config_region="us-west-2").to_dict(), default=str))


def test_plan_md_quotes_the_dev_plans_start_times(dev_plan):
    text = text_of("PLAN.md")
    restart = dev_plan["cold_start"]["pod_restart"]
    assert f"pod restart → serving {restart['seconds']:.0f} s against ≤ {restart['target']['at_most']:.0f} s" in text
    path = dev_plan["critical_path"]
    assert f"whole deploy {path['minutes']:.1f} min" in text
    reach = path["control_plane_to_first_token"]
    assert f"first token {reach['minutes']:.1f} min against ≤ {reach['target']['at_most']:.0f}" in text
    load = dev_plan["cold_start"]["weight_load"]
    assert f"default loader at {load['disk_read_percent']:.0f}% of the disk's sequential read" in text


def test_plan_md_quotes_the_first_token_of_a_stack_with_every_start_path():
    run = run_offline("dev", overrides={"modelSource": "s3://acme-models/mirror/Qwen/Qwen3.5-9B",
                                        "rayImageCarriesRunaiStreamer": "true", "compileCacheInS3": "true",
                                        "gpuImageSnapshotId": "snap-0123456789abcdef0"})
    plan = build_plan(run, stack="dev", config_region="us-west-2")
    reach, start = plan.control_plane_to_first_token, plan.cold_start
    assert reach is not None and start is not None and not reach.met
    text = text_of("PLAN.md")
    assert f"EKS control plane ready → first token {reach.figure:.1f} min against ≤ {reach.limit:.0f}" in text
    assert f"compiles, {start.first_compile_minutes:.1f} min more" in text
    # What that path waits for before the GPU node's share: the head's image on the system node, then the head.
    steps = {s.name: s for s in plan.critical_path.steps}
    pull = steps["ray-image-prepull-system"]
    assert f"the Ray image's pull onto it for the head, {pull.minutes:.1f} min, an {pull.source}" in text
    head = start.ray_service[0].duration
    assert f"whose head then starts ({head.seconds:.0f} s, an {head.source})" in text


def test_sizing_md_quotes_what_the_default_serves_and_holds(dev_plan):
    text = text_of("SIZING.md")
    slo = dev_plan["slo"]
    assert f"serves about {slo['serves_requests_per_second']:.2g} requests/s at p99" in text
    report = dev_plan["capacity"]["per_phase"]["decode"]
    assert (f"({report['num_blocks']} blocks of {report['block_size']} tokens on a first start, "
            f"{report['kv_budget_bytes'] / 2**20:,.0f} MiB left after {report['weight_bytes'] / 2**30:.2f} GiB "
            "of text-only weights") in text
    model = known_model("Qwen/Qwen3.5-9B")
    node = instance_type(RECORDED_EC2_ANSWERS["g6.8xlarge"])
    engine = EngineSettings()
    capacity = capacity_report(model, node, dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.9,
                               enforce_eager=False, max_num_seqs=32, max_num_batched_tokens=2048,
                               fixed_kv_cache=True, vllm_version="0.26.0")  # the dev stack's image, kvCacheFromPlan
    replica = ReplicaModel.from_capacity(capacity, model, GPU_SPECS["L4"], engine=engine)
    assert f"holds {replica.sequences_that_fit(1024 + 256)} typical sequences at once" in text
    shapes = slo["shapes"]
    colocated, pd = shapes["colocated"], shapes["pd"]
    assert (f"colocated needs {colocated['nodes']} L4 node against PD's {pd['nodes']}: taking prompts in takes "
            f"{colocated['stall_share']:.0%} of the engine".replace("%", " %")) in text
    assert f"a fixed {CALIBRATION.prompt_intake_fixed_seconds * 1000:.1f} ms on the H200" in text
    assert f"plus {CALIBRATION.stream_overhead_seconds * 1000:.1f} ms outside the engine" in text
    link = slo["hand_over"]
    assert (f"prompt's {link['bytes_moved'] / 2**20:,.0f} MiB take {link['fallback_seconds'] * 1000:,.0f} ms "
            f"instead of {link['link_seconds'] * 1000:,.0f} ms, a prefill node hands over at most "
            f"{link['fallback_per_node_per_second']:.1f} a second") in text


def test_sizing_md_quotes_the_models_own_figures():
    text = text_of("SIZING.md")
    assert f"(s = {CALIBRATION.decode_ingest_share:g}" in text
    assert f"eager, {EAGER_STEP_OVERHEAD_SECONDS * 1000:.1f} ms more per step" in text
    model = known_model("Qwen/Qwen3.5-9B")
    node = instance_type(RECORDED_EC2_ANSWERS["g6e.8xlarge"])
    needed = []
    for cap in (256, 32, 4):
        engine = EngineSettings(max_num_seqs=cap)
        report = capacity_report(model, node, dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.9,
                                 enforce_eager=False, max_num_seqs=cap, max_num_batched_tokens=2048)
        replica = ReplicaModel.from_capacity(report, model, gpu_spec("L40S"), engine=engine)
        needed.append(decode_replicas_needed(replica, Workload(20, 1024, 256, 3072, 1024), Targets(1, 0.1, 0.99)))
    assert f"`maxNumSeqs` 256, 32 and 4 need {needed[0]}, {needed[1]} and {needed[2]} replicas" in text


def _signed(error: float) -> str:
    return f"{error:+.0%}".replace("-", "−").replace("%", " %")


def _ms(seconds: float) -> str:
    return "unbounded" if seconds == float("inf") else f"{seconds * 1000:,.0f} ms"


def test_sizing_md_validation_table_is_the_models_against_the_recorded_lab_runs():
    text = (DOCS / "SIZING.md").read_text()
    data = json.loads((DATA / "qwen35-open-loop-h200.json").read_text())
    points = [MeasuredPoint(p["requests_per_second"], 512, 128, p["ttft_p90_seconds"], p["tpot_p90_seconds"])
              for p in data["points"]]

    def compared(calibration):
        # The 2026-12-02 runs served transformers' default rotary settings (no M-RoPE).
        replica = lab_replica(replace(known_model("Qwen/Qwen3.5-9B"), mrope=False), GPU_SPECS["H200"],
                              usable_memory_mib=22_888,
                              gpu_memory_utilization=0.9, max_model_len=4096,
                              kv_bytes_per_second=data["lab_link_bytes_per_second"], calibration=calibration)
        return compare(points, replica, replica, 0.9)

    for before, after in zip(compared(replace(CALIBRATION, decode_ingest_share=0.0)), compared(CALIBRATION),
                             strict=True):
        point = before.point
        row = (f"| {point.requests_per_second:g} | {_ms(point.ttft_seconds)} | {_ms(after.predicted_ttft_seconds)} | "
               f"{point.tpot_seconds * 1000:.2f} ms | {before.predicted_tpot_seconds * 1000:.1f} ms | "
               f"{_signed(before.tpot_error)} | {after.predicted_tpot_seconds * 1000:.1f} ms | "
               f"{_signed(after.tpot_error)} |")
        assert row in text, row


def test_sizing_md_quotes_where_pd_pays_as_pdctl_size_answers_it():
    from offline import stack_config
    from pdctl.size import size_on, size_question

    raw, _ = stack_config("dev")
    raw.update({"eks-pd-llm:peakRequestsPerSecond": "5", "eks-pd-llm:typicalPromptTokens": "3072",
                "eks-pd-llm:typicalOutputTokens": "64", "eks-pd-llm:tpotSloSeconds": "0.1"})
    option = size_on(instance_type(RECORDED_EC2_ANSWERS["g6.12xlarge"]), size_question(raw))
    assert option.recommended == "PD" and option.colocated_replicas is None
    assert (f"on g6.12xlarge need {option.prefill_replicas} + {option.decode_replicas} PD replicas on "
            f"{option.nodes} nodes, where no count of colocated engines up to 64 meets TPOT p99 100 ms") \
        in text_of("SIZING.md")
    question = size_question(raw)
    engine = question.app.engine_for("decode")
    report = capacity_report(question.model, instance_type(RECORDED_EC2_ANSWERS["g6.12xlarge"]), dtype=engine.dtype,
                             max_model_len=engine.max_model_len,
                             gpu_memory_utilization=engine.gpu_memory_utilization, enforce_eager=engine.enforce_eager,
                             max_num_seqs=engine.max_num_seqs, max_num_batched_tokens=engine.max_num_batched_tokens)
    l4 = ReplicaModel.from_capacity(report, question.model, GPU_SPECS["L4"], engine=engine)
    intake = l4.intake_seconds(1024) + l4.intake_seconds(2048)  # two steps of the 2,048-token budget
    assert (f"stalls every running sequence for {intake:.2f} s (two steps of the 2,048-token budget), beside an "
            f"L4's {l4.decode_step_seconds(1, 3072 + 32) * 1000:.0f} ms decode step") in text_of("SIZING.md")
