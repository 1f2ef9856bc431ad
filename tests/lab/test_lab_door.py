"""`python -m lab door` rehearsed on the CPU (lab/rehearse_door_cpu.py): the real Ray Serve LLM PD app
behind the front door and, beside it, Ray Serve LLM's own ingress over the same engines (the fake
ones). Both paths timed; under load a missing, wrong, revoked and over-limit key get their status and
the engines' counters grow only by what the door let through; an OpenAI SDK client from the stack's
clientConfig gets a completion; the report says so. Two to three minutes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.commands.door import DEFAULT_CLIENT_CONFIG, DEFAULT_PROBE
from lab.door import DOOR_SUFFIX, OPEN_SUFFIX, latency_comparison, pass_order

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_client_config_is_what_the_stack_outputs(offline_run):
    # The GPU host has no Pulumi: the lab builds its SDK client from this copy of the output.
    assert json.loads((REPO / DEFAULT_CLIENT_CONFIG).read_text()) == offline_run("dev").outputs["clientConfig"]


def test_the_default_engine_budget_is_a_committed_probe_of_the_stacks_engine():
    probe = json.loads((REPO / DEFAULT_PROBE).read_text())
    assert any(p["name"] == "as-rendered" and p["started"] for p in probe["probes"])


def test_the_paths_take_turns_going_first():
    firsts = [pass_order(repeat, index)[0] for repeat in (1, 2, 3) for index in (0, 1)]
    assert firsts.count(0) == firsts.count(1) == 3


def _row(path: str, concurrency: int, repeat: int, ttfts: list[float]) -> dict:
    return {"path": path, "concurrency": concurrency, "repeat": repeat,
            "samples": [{"ttft_s": t, "e2e_s": t + 1, "error": None} for t in ttfts]}


def test_the_difference_is_pooled_over_the_passes_and_given_per_pass():
    timing = [_row(DOOR_SUFFIX, 1, 1, [0.102] * 5), _row(OPEN_SUFFIX, 1, 1, [0.100] * 5),
              _row(DOOR_SUFFIX, 1, 2, [0.205] * 5), _row(OPEN_SUFFIX, 1, 2, [0.200] * 5)]
    [entry] = latency_comparison(timing)
    assert entry["requests"] == {DOOR_SUFFIX: 10, OPEN_SUFFIX: 10}
    ttft = entry["ttft_s"]
    assert ttft["door_minus_open_per_pass"]["p50"] == pytest.approx([0.002, 0.005])
    assert ttft["pooled"][DOOR_SUFFIX]["p99"] == pytest.approx(0.205)
    assert entry["e2e_s"]["door_minus_open"]["p99"] == pytest.approx(0.005)


@pytest.mark.slow
class TestRehearsal:
    @pytest.fixture(scope="class")
    def run(self, tmp_path_factory) -> tuple[dict, str]:
        pytest.importorskip("ray.serve.llm")
        from lab.door_report import markdown_report
        from lab.rehearse_door_cpu import rehearse

        data = rehearse(tmp_path_factory.mktemp("door"))
        return data, markdown_report(data)

    def test_it_passes_every_check(self, run):
        data, _ = run
        assert data["verdict"]["passed"], [k for k, ok in data["verdict"]["checks"].items() if not ok]

    def test_both_paths_are_timed_at_each_concurrency_in_every_pass_with_every_sample(self, run):
        data, _ = run
        timed = {(r["path"], r["concurrency"], r["repeat"]) for r in data["timing"]}
        assert timed == {(p, c, n) for p in (DOOR_SUFFIX, OPEN_SUFFIX) for c in (1, 8) for n in (1, 2)}
        assert all(len(r["samples"]) == r["requests"] and all(s["ttft_s"] for s in r["samples"])
                   for r in data["timing"])

    def test_refused_requests_get_their_status_in_openais_format(self, run):
        refusals = run[0]["refusals"]
        for kind, status, code in (("no_key", 401, "invalid_api_key"), ("wrong_key", 401, "invalid_api_key"),
                                   ("revoked_key", 401, "invalid_api_key"), ("over_limit", 429, "rate_limit_exceeded")):
            assert [a["status"] for a in refusals[kind]] == [status] * 3, kind
            assert all(a["error"]["code"] == code for a in refusals[kind])
        assert all(1 <= int(a["headers"]["retry-after"]) <= 60 for a in refusals["over_limit"])
        assert [a["status"] for a in refusals["revoked_before"]] == [200]
        assert refusals["load"]["in_flight_throughout"]

    def test_the_engines_counted_only_what_the_door_let_through(self, run):
        counters = run[0]["engine_counters"]
        admitted = counters["admitted"]
        assert admitted == len(run[0]["refusals"]["load"]["samples"]) + 3 + 1
        assert counters["serve_requests_delta"] == {"prefill": admitted, "decode": admitted}
        assert counters["door_requests_delta"]["-:401"] == 9
        assert counters["door_requests_delta"]["limited:429"] == 3

    def test_an_openai_client_from_the_stacks_client_config_gets_a_completion(self, run):
        sdk = run[0]["sdk_from_client_config"]
        assert sdk["ok"] and sdk["completion_tokens"] > 0
        assert sdk["client_config"]["base_url"] in sdk["swapped"]

    def test_the_report_gives_the_difference_and_the_refusals(self, run):
        _, report = run
        assert "door − open p50" in report and "| 8 | TTFT |" in report
        assert "| over limit | 429, 429, 429 | rate_limit_exceeded |" in report
        assert "Verdict: passed" in report
