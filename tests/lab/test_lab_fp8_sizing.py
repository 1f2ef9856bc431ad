"""FP8 weights on the L4's budget: the plan's weights and KV blocks against what vLLM 0.26.0 held on the H200
(docs/PROVEN.md#first-start), read from the committed raw memory-probe.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facts.models import KNOWN_MODELS
from lab.probe import planned_kv_cache_bytes
from lab.stack import stack_app
from serve_app.capacity import FIXED_KV_CACHE_MARGIN_BYTES

REPO = Path(__file__).parents[2]
FP8_RESULTS = REPO / "lab" / "results" / "2026-12-03-h200-qwen35-first-start-fp8-memory-probe.json"
GIB = 2**30


def _measured() -> dict[str, dict]:
    data = json.loads(FP8_RESULTS.read_text())
    return {probe["name"]: probe for probe in data["probes"]}


def _planned() -> dict:
    return planned_kv_cache_bytes(stack_app("dev", REPO, {"quantization": "fp8"}))


def test_the_lab_ran_the_stacks_fp8_engine():
    for probe in _measured().values():
        assert probe["started"] and probe["engine_kwargs"]["quantization"] == "fp8"
        assert probe["engine_kwargs"]["max_num_seqs"] == 32 and probe["engine_kwargs"]["language_model_only"]


def test_the_plans_fp8_weights_are_within_two_percent_of_what_vllm_loaded():
    # 10.23 GiB planned against vLLM's "Model loading took 10.39 GiB"; bf16: 16.68 against 16.80 (its M-RoPE table).
    planned = KNOWN_MODELS["Qwen/Qwen3.5-9B"].fp8_weight_bytes("bfloat16", vision_inputs=False)
    for probe in _measured().values():
        assert planned / GIB == pytest.approx(probe["log"]["weights_gib"], rel=0.02)


@pytest.mark.parametrize(("probe", "planned_key"), [("fp8", "first_start_blocks"), ("fp8-warm", "restart_blocks")])
def test_the_plans_fp8_kv_blocks_are_within_ten_percent_of_vllms(probe, planned_key):
    # First start: 461 planned, 462 held; restart: 567 planned, 571 held.
    measured = _measured()[probe]["engine"]["num_blocks"]
    assert _planned()[planned_key] == pytest.approx(measured, rel=0.10)


def test_the_fixed_kv_cache_with_fp8_weights_holds_no_more_than_a_measured_restart():
    # kvCacheFromPlan sizes the KV cache from the FP8 weights: a restart's bytes less 64 MiB, 563 blocks of the
    # 571 a restart held, where the bf16 weights' arithmetic gives 163.
    planned = _planned()
    restart = _measured()["fp8-warm"]["engine"]
    blocks = planned["kv_cache_bytes"] // (restart["kv_cache_bytes"] // restart["num_blocks"])
    assert 0.95 * restart["num_blocks"] <= blocks <= restart["num_blocks"]


def test_sizing_md_quotes_the_plans_fp8_figures_and_the_measured_ones():
    import re

    text = re.sub(r"\s+", " ", (REPO / "docs" / "SIZING.md").read_text())
    section = text.split('<a id="fp8-weights"></a>')[1].split("<a id=")[0]
    planned, measured = _planned(), _measured()
    model = KNOWN_MODELS["Qwen/Qwen3.5-9B"]
    assert f"{model.fp8_weight_bytes('bfloat16', vision_inputs=False) / GIB:.2f} GiB of weights" in section
    assert f"vLLM loaded {measured['fp8']['log']['weights_gib']:.2f} GiB" in section
    assert f"against {model.loaded_weight_bytes('bfloat16', vision_inputs=False) / GIB:.2f} planned" in section
    assert (f"| first start, vLLM's profiling | {planned['first_start_blocks']} | "
            f"{measured['fp8']['engine']['num_blocks']} |") in section
    assert f"| restart | {planned['restart_blocks']} | {measured['fp8-warm']['engine']['num_blocks']} |" in section
    block_bytes = measured["fp8"]["engine"]["kv_cache_bytes"] // measured["fp8"]["engine"]["num_blocks"]
    blocks = planned["kv_cache_bytes"] // block_bytes
    assert f"| `kvCacheFromPlan` (a restart less {FIXED_KV_CACHE_MARGIN_BYTES // 2**20} MiB) | {blocks} |" in section
    assert f"({planned['kv_cache_bytes']:,} B, {blocks} blocks of 528 tokens: {blocks // 11} sequences" in section
    # Not rendered: vLLM's profiling sizes the first start (tests/serve_app/test_serve_checks.py).
    assert f"({planned['first_start_blocks']} blocks: {planned['first_start_blocks'] // 11} such sequences" in section
    bf16 = json.loads(FP8_RESULTS.with_name(FP8_RESULTS.name.replace("-fp8-", "-bf16-")).read_text())
    [bf16_restart] = [p for p in bf16["probes"] if p["name"] == "as-rendered-warm"]
    assert (f"on a restart: {measured['fp8-warm']['load']['seconds']} s against bf16's "
            f"{bf16_restart['load']['seconds']} s") in section
