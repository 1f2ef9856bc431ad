"""docs/PROVEN.md#first-start quotes the lab's raw results of 2026-12-03: every figure of its table is read
back from the committed memory-probe.json files, and the plan-derived KV bytes from the product's arithmetic."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
RESULTS = REPO / "lab" / "results"
PREFIX = "2026-12-03-h200-qwen35-first-start"

# Table row → the (result file tag, probe name) pairs whose starts the row's values list, in order.
ROWS = {
    "bf16, first start (caches empty)": [("bf16", "as-rendered"), ("repeat-bf16", "as-rendered")],
    "bf16, restart (caches warm)": [("bf16", "as-rendered-warm"), ("restored", "as-rendered-warm")],
    "bf16, first start, `kv_cache_memory_bytes` 2,849,190,707": [("kv-bytes", "kv-bytes"),
                                                                 ("repeat-kv-bytes", "kv-bytes")],
    "FP8 weights, first start": [("fp8", "fp8")],
    "FP8 weights, restart": [("fp8", "fp8-warm")],
    "bf16, first start on caches copied to a new path": [("restored", "as-rendered")],
}


def _probe(tag: str, name: str) -> dict:
    data = json.loads((RESULTS / f"{PREFIX}-{tag}-memory-probe.json").read_text())
    (probe,) = [p for p in data["probes"] if p["name"] == name]
    return probe


def _table() -> dict[str, list[str]]:
    text = (REPO / "docs" / "PROVEN.md").read_text()
    section = text.split('<a id="first-start"></a>')[1].split("<a id=")[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def _numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", cell)]


@pytest.mark.parametrize("row", ROWS)
def test_the_first_start_table_is_the_raw_results(row):
    blocks, kv_bytes, peak, ready = _table()[row]
    probes = [_probe(tag, name) for tag, name in ROWS[row]]
    assert all(p["started"] for p in probes)
    assert _numbers(blocks) == [p["engine"]["num_blocks"] for p in probes]
    assert _numbers(kv_bytes) == sorted({p["engine"]["kv_cache_bytes"] for p in probes})
    assert _numbers(peak) == [p["memory"]["peak_gpu_memory_mib"] for p in probes]
    assert _numbers(ready) == [p["start_s"] for p in probes]


def test_the_fixed_kv_cache_was_the_plans_restart_less_150_mib_and_lands_within_five_percent():
    # The plan of that commit: its restart (173 blocks, before it counted the M-RoPE table) less 150 MiB.
    data = json.loads((RESULTS / f"{PREFIX}-kv-bytes-memory-probe.json").read_text())
    plan = data["kv_cache_plan"]
    assert data["kv_cache_bytes"] == plan["restart_kv_bytes"] - 150 * 2**20 == 2_849_190_707
    fixed, restart = _probe("kv-bytes", "kv-bytes"), _probe("bf16", "as-rendered-warm")
    assert fixed["engine"]["num_blocks"] / restart["engine"]["num_blocks"] == pytest.approx(164 / 167)
    assert fixed["engine"]["num_blocks"] >= 0.95 * restart["engine"]["num_blocks"]
    assert fixed["memory"]["peak_gpu_memory_mib"] < 22_888  # the L4's memory (facts/instances.py)
    load = fixed["load"]
    assert (load["sequences"], load["finished"], load["preempted_sequences"]) == (15, 15, 0)


def _plan(**engine):
    from facts.instances import RECORDED_EC2_ANSWERS, instance_type
    from facts.models import KNOWN_MODELS
    from serve_app.capacity import capacity_report

    return capacity_report(KNOWN_MODELS["Qwen/Qwen3.5-9B"], instance_type(RECORDED_EC2_ANSWERS["g6.8xlarge"]),
                           dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.9, enforce_eager=False,
                           max_num_seqs=32, max_num_batched_tokens=2048, **engine)


@pytest.mark.parametrize(("tag", "quantization"), [("bf16", ""), ("fp8", "fp8")])
def test_the_plan_counts_the_m_rope_position_table_and_holds_vllms_blocks(tag, quantization):
    """With the published rotary settings vLLM held 62 / 167 blocks (bf16) and 462 / 571 (FP8) where the plan
    said 67 / 173 and 467 / 573: its M-RoPE position table (4 × 262,144 positions × 64 rotated dims × 2 B,
    128 MiB) took the difference. The plan now counts it, and never says more blocks than vLLM held."""
    from serve_app.capacity import MEASURED_KV_BLOCKS_ERROR

    data = json.loads((RESULTS / f"{PREFIX}-{tag}-memory-probe.json").read_text())
    first, restart = (next(p for p in data["probes"] if p["name"] == name)["engine"]["num_blocks"]
                      for name in (("as-rendered", "as-rendered-warm") if tag == "bf16" else ("fp8", "fp8-warm")))
    plan = _plan(quantization=quantization)
    assert plan.position_table_bytes == 134_217_728
    for planned, held in ((plan.num_blocks, first), (plan.num_blocks_restart, restart)):
        assert held * (1 - MEASURED_KV_BLOCKS_ERROR) <= planned <= held
    if tag == "bf16":
        assert (plan.num_blocks, plan.num_blocks_restart) == (first, restart) == (62, 167)


def test_the_plans_fixed_kv_cache_keeps_a_first_start_near_a_restart_and_under_the_measured_peak():
    from serve_app.capacity import FIXED_KV_CACHE_MARGIN_BYTES

    plan = _plan(fixed_kv_cache=True, vllm_version="0.26.0")
    fixed, restart = _probe("kv-bytes", "kv-bytes"), _probe("bf16", "as-rendered-warm")
    page = restart["engine"]["kv_cache_bytes"] // restart["engine"]["num_blocks"]
    blocks = plan.kv_cache_memory_bytes // page
    assert blocks == plan.num_blocks == 163 and blocks >= 0.95 * restart["engine"]["num_blocks"]
    # The first start measured at 2,849,190,707 B peaked 1,722 MiB under the L4; the new size moves it by the
    # difference, far inside that.
    peak = fixed["memory"]["peak_gpu_memory_mib"] + (plan.kv_cache_memory_bytes - 2_849_190_707) / 2**20
    assert peak < 22_888 - 1_000
    assert plan.kv_cache_memory_bytes == plan.kv_budget_bytes_restart == (
        _plan().kv_budget_bytes_restart - FIXED_KV_CACHE_MARGIN_BYTES)
