"""The front door's GPU figures docs/FRONT_DOOR.md#door-lab-results quotes are read back from the committed raw
result (lab/results/2026-12-03-h200-qwen35-0824utc-door-*) and the door-cost runs."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from lab.door_report import latency_table, refusals_table

REPO = Path(__file__).parents[2]
RESULT = REPO / "lab" / "results" / "2026-12-03-h200-qwen35-0824utc-door-result.json.gz"
COSTS = sorted((REPO / "lab" / "results").glob("2026-12-03-cpu-door-cost-*.json"))


def _result() -> dict:
    return json.loads(gzip.decompress(RESULT.read_bytes()))


def _section() -> str:
    text = (REPO / "docs" / "FRONT_DOOR.md").read_text()
    return text.split('<a id="door-lab-results"></a>')[1].split("<a id=")[0]


def _flat() -> str:
    return re.sub(r"\s+", " ", _section())


def test_the_door_run_passed_and_its_tables_are_in_the_doc():
    data = _result()
    assert data["verdict"]["passed"] and all(data["verdict"]["checks"].values())
    section = _section()
    for line in [*latency_table(data["latency"]).splitlines(), *refusals_table(data["refusals"]).splitlines()]:
        assert line in section, line
    assert data["provenance"]["git_commit"] in section
    assert f"from {data['started_at'][11:19]} to {data['finished_at'][11:19]} UTC" in _flat()


def test_the_doc_says_what_the_door_minus_open_difference_was_per_pass():
    by = {row["concurrency"]: row["ttft_s"] for row in _result()["latency"]}
    one, sixteen = by[1], by[16]
    flat = _flat()
    assert f"{-one['door_minus_open']['p50'] * 1000:.1f} ms *lower*" in flat
    passes = one["door_minus_open_per_pass"]["p50"]
    assert f"from {min(passes) * 1000:.1f} to +{max(passes) * 1000:.1f} ms".replace("-", "−") in flat
    assert f"it was {sixteen['door_minus_open']['p50'] * 1000:.0f} ms higher" in flat
    passes = sixteen["door_minus_open_per_pass"]["p50"]
    assert f"per pass {min(passes) * 1000:.0f} to +{max(passes) * 1000:.0f} ms".replace("-", "−") in flat


def test_no_refused_request_reached_an_engine_and_the_sdk_got_a_completion():
    data = _result()
    counters = data["engine_counters"]
    assert counters["engines_saw_only_admitted"] and counters["serve_requests_delta"] == {"prefill": 62.0,
                                                                                          "decode": 62.0}
    assert counters["vllm_requests_finished_delta"] == 2 * counters["admitted"] == 124
    assert sum(counters["refused"].values()) == 12
    sdk = data["sdk_from_client_config"]
    assert sdk["ok"] and sdk["completion_tokens"] == 16
    flat = _flat()
    assert "grew by 62 on prefill and 62 on decode, exactly the 62 requests" in flat
    assert f"{sdk['completion_tokens']} tokens, model `{sdk['model']}`" in flat
    assert f"refused {data['refusals']['revoked_waited_s']} s after its table was rewritten" in flat


def test_the_door_cost_runs_are_the_ones_the_doc_quotes():
    runs = [json.loads(path.read_text()) for path in COSTS]
    assert len(runs) == 3 and {r["requests"] for r in runs} == {20_000}
    p50s, p99s = sorted(r["p50_us"] for r in runs), sorted(r["p99_us"] for r in runs)
    flat = _flat()
    assert f"p50 **{p50s[0]:.0f}–{p50s[-1]:.0f} µs**, p99 {p99s[0]:.0f}–{p99s[-1]:.0f} µs" in flat
    assert max(p50s) < 250 and all(r["provenance"]["git_commit"] for r in runs)
