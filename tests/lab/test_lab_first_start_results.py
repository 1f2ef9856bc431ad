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
    from lab.probe import planned_kv_cache_bytes
    from lab.stack import stack_app

    data = json.loads((RESULTS / f"{PREFIX}-kv-bytes-memory-probe.json").read_text())
    assert data["kv_cache_bytes"] == planned_kv_cache_bytes(stack_app("dev"))["kv_cache_bytes"] == 2_849_190_707
    fixed, restart = _probe("kv-bytes", "kv-bytes"), _probe("bf16", "as-rendered-warm")
    assert fixed["engine"]["num_blocks"] / restart["engine"]["num_blocks"] == pytest.approx(164 / 167)
    assert fixed["engine"]["num_blocks"] >= 0.95 * restart["engine"]["num_blocks"]
    assert fixed["memory"]["peak_gpu_memory_mib"] < 22_888  # the L4's memory (facts/instances.py)
    load = fixed["load"]
    assert (load["sequences"], load["finished"], load["preempted_sequences"]) == (15, 15, 0)
