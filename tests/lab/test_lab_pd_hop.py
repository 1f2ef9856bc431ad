"""The PD hop's breakdown on the H200 knobs deployment C's own Ray logs and results (committed in
lab/results): Serve's access lines matched to the client's concurrency-1 requests."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

from lab import pd_hop

RESULTS = Path(__file__).resolve().parents[2] / "lab" / "results"


@pytest.fixture(scope="module")
def run_c(tmp_path_factory) -> tuple[list[str], dict]:
    logs = tmp_path_factory.mktemp("run-c-logs")
    with tarfile.open(RESULTS / "2026-12-01-h200-knobs-run-c-ray-logs.tar.xz") as archive:
        archive.extractall(logs, filter="data")
    with gzip.open(RESULTS / "2026-12-01-h200-knobs-run-c-result.json.gz", "rt") as handle:
        return pd_hop.log_lines(logs), json.load(handle)


def breakdown(run_c, app: str) -> dict:
    lines, result = run_c
    spans = pd_hop.access_spans(lines, app, result["apps"][app]["route_prefix"])
    return pd_hop.breakdown(spans, [r for r in result["timing"] if r["app"] == app and r["concurrency"] == 1])


def test_every_timed_pd_request_is_matched_to_serves_and_its_parts_add_up_to_its_ttft(run_c):
    found = breakdown(run_c, "llama3-8b-shape-pd-graphs")
    assert found["requests"] == 24 and all(m["max_mismatch_ms"] < 5 for m in found["matches"])
    for request in found["per_request"]:
        assert sum(request[p] for p in pd_hop.PD_PARTS) == pytest.approx(request["ttft_ms"], abs=0.05)


def test_on_one_gpu_the_pd_ttft_is_the_time_after_prefill_not_serves_hops(run_c):
    parts = breakdown(run_c, "llama3-8b-shape-pd-graphs")["parts_ms"]
    assert parts["ttft_ms"]["p50"] == 277.0
    hops = sum(parts[p]["p50"] for p in ("proxy_to_ingress", "ingress_to_decode", "decode_to_prefill"))
    assert hops == pytest.approx(13.9, abs=0.05)
    assert parts["prefill_call"]["p50"] == 31.1 and parts["after_prefill"]["p50"] == 232.6


def test_the_colocated_baselines_show_what_the_50_ms_flush_costs_the_first_token(run_c):
    flushed = breakdown(run_c, "llama3-8b-shape-colocated-graphs")["parts_ms"]
    unflushed = breakdown(run_c, "llama3-8b-shape-colocated-graphs-sbi0")["parts_ms"]
    assert (flushed["ttft_ms"]["p50"], unflushed["ttft_ms"]["p50"]) == (65.3, 42.0)
    assert flushed["after_llmserver_start"]["p50"] - unflushed["after_llmserver_start"]["p50"] == pytest.approx(24.8)


def test_a_client_run_that_matches_no_proxy_requests_is_refused():
    spans = {"a": {"proxy": (0.0, 1.0), "OpenAiIngress": (0.002, 0.998), "LLMServer": (0.01, 0.99)}}
    rows = [{"repeat": 1, "samples": [{"e2e_s": 0.5, "ttft_s": 0.05, "error": None}]}]
    with pytest.raises(ValueError, match=r"differ by 500\.0 ms"):
        pd_hop.breakdown(spans, rows)


@pytest.mark.parametrize(("app", "logs_exist", "says"), [
    ("llama3-8b-shape-pd-nope", True, "app 'llama3-8b-shape-pd-nope': not in"),
    ("llama3-8b-shape-pd-graphs", False, "not a directory"),
    ("llama3-8b-shape-pd-graphs", True, "8 client requests at concurrency 1, but 0 requests with"),
])
def test_the_command_refuses_what_it_cannot_split_in_one_line(tmp_path, capsys, app, logs_exist, says):
    logs = tmp_path / "logs"
    if logs_exist:
        logs.mkdir()
    code = pd_hop.report(logs, RESULTS / "2026-12-01-h200-knobs-run-c-result.json.gz", app)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and says in err and err.count("\n") == 1
