"""lab.bench_compare: `pdctl bench` beside `vllm bench serve` in rounds of alternating order — with a
fake runner that writes each tool's result file, the order, seeds, median verdict and report; and both
real tools run against the local OpenAI-compatible server (tests/conftest.py). Agreement itself is for
a GPU host: CPU timings of a test server on a shared machine prove nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lab import bench_compare
from lab.__main__ import main as lab_main
from lab.report import side_by_side_table

# What vLLM measured on the H200 (lab/results/2026-12-01-h200-resilience-bench-compare-result.json.gz).
VLLM = {"ttft_p50_ms": 95.8, "ttft_p90_ms": 114.2, "tpot_p50_ms": 2.30, "output_tokens_per_s": 2543.0}


def pdctl_result(ttft_p50_ms, ttft_p90_ms, tpot_p50_ms, output_tokens_per_s, decode_s=(0.25,)) -> dict:
    return {"runs": [{"ttft_s": {"p50": ttft_p50_ms / 1000, "p90": ttft_p90_ms / 1000},
                      "tpot_s": {"p50": tpot_p50_ms / 1000}, "output_tokens_per_s": output_tokens_per_s,
                      "per_request": {"start_s": [0.0] * len(decode_s), "ttft_s": [0.1] * len(decode_s),
                                      "e2e_s": [0.1 + d for d in decode_s], "output_tokens": [128] * len(decode_s)}}]}


def vllm_result(ttft_p50_ms, ttft_p90_ms, tpot_p50_ms, output_tokens_per_s, itls=((0.1, 0.2),)) -> dict:
    return {"median_ttft_ms": ttft_p50_ms, "p90_ttft_ms": ttft_p90_ms, "median_tpot_ms": tpot_p50_ms,
            "output_throughput": output_tokens_per_s, "ttfts": [0.1] * len(itls), "itls": [list(i) for i in itls],
            "errors": [""] * len(itls)}


class FakeTools:
    """The `runner`: answers each tool's command line by writing its result file where the command
    says, from `results[(tool, round)]` (rounds from 1, told apart by the seed); logs (tool, seed)."""

    def __init__(self, results: dict[tuple[str, int], dict], first_seed: int = 0, fail: tuple[str, int] | None = None):
        self.results, self.first_seed, self.fail = results, first_seed, fail
        self.calls: list[tuple[str, int]] = []

    def __call__(self, command: list[str], **_) -> subprocess.CompletedProcess:
        tool = "pdctl" if command[2] == "pdctl" else "vllm"
        seed = int(command[command.index("--seed") + 1])
        self.calls.append((tool, seed))
        if (tool, seed - self.first_seed + 1) == self.fail:
            return subprocess.CompletedProcess(command, 1, "", "ConnectionError: refused")
        if tool == "pdctl":
            out = Path(command[command.index("--json-out") + 1])
        else:
            out = Path(command[command.index("--result-dir") + 1], command[command.index("--result-filename") + 1])
        out.write_text(json.dumps(self.results[(tool, seed - self.first_seed + 1)]))
        return subprocess.CompletedProcess(command, 0, "", "")


def side(rounds: int = 3, seed: int = 0) -> bench_compare.SideBySide:
    return bench_compare.SideBySide(base_url="http://127.0.0.1:8000/tiny", model="tiny", tokenizer="/m/tiny",
                                    rounds=rounds, seed=seed)


def rounds_of(pdctl: list[dict], vllm: list[dict]) -> dict[tuple[str, int], dict]:
    return {**{("pdctl", i + 1): r for i, r in enumerate(pdctl)}, **{("vllm", i + 1): r for i, r in enumerate(vllm)}}


def test_rounds_alternate_the_order_each_with_its_own_seed_and_keep_every_file(tmp_path):
    same = pdctl_result(96, 114, 2.3, 2543), vllm_result(96, 114, 2.3, 2543)
    tools = FakeTools(rounds_of([same[0]] * 4, [same[1]] * 4), first_seed=10)
    document = bench_compare.run(side(rounds=4, seed=10), tmp_path, runner=tools)
    assert tools.calls == [("pdctl", 10), ("vllm", 10), ("vllm", 11), ("pdctl", 11),
                           ("pdctl", 12), ("vllm", 12), ("vllm", 13), ("pdctl", 13)]
    assert [(r["round"], r["seed"], r["order"][0]) for r in document["rounds"]] == [
        (1, 10, "pdctl"), (2, 11, "vllm"), (3, 12, "pdctl"), (4, 13, "vllm")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"round-{n}-{name}.json" for n in range(1, 5) for name in ("pdctl-bench", "vllm-bench-serve"))
    assert document["comparison"]["agree"] is True and document["comparison"]["rounds"] == 4
    json.dumps(document)  # the lab writes it as JSON


def test_one_outlier_round_does_not_flip_agreement_and_shows_in_the_spread(tmp_path):
    vllm = [vllm_result(95.8, 114.2, 2.30, 2543)] * 3
    pdctl = [pdctl_result(96.5, 115.0, 2.31, 2530), pdctl_result(130.0, 160.0, 2.90, 2000),
             pdctl_result(96.0, 114.0, 2.29, 2550)]
    document = bench_compare.run(side(), tmp_path, runner=FakeTools(rounds_of(pdctl, vllm)))
    comparison = document["comparison"]
    assert comparison["agree"] is True
    tpot = comparison["metrics"]["tpot_p50_ms"]
    assert tpot["pdctl"] == pytest.approx(2.31) and tpot["vllm"] == pytest.approx(2.30)  # not the mean, 2.50
    assert tpot["rounds"]["pdctl"] == pytest.approx([2.31, 2.90, 2.29])
    assert tpot["spread"] == {"pdctl": pytest.approx([2.29, 2.90]), "vllm": pytest.approx([2.30, 2.30])}
    table = side_by_side_table("tiny-pd", document)
    assert "medians of 3 round(s) (order alternating), agree within 5%: True" in table
    assert "| tpot_p50_ms | 2.31 (2.29–2.90) | 2.30 (2.30–2.30) | +0.4% | yes |" in table
    assert "| 2 | vllm | 1 | 130.00 / 95.80 | 160.00 / 114.20 | 2.90 / 2.30 | 2000.00 / 2543.00 | " in table


def test_a_consistent_twelve_percent_tpot_gap_fails_and_the_report_says_which(tmp_path):
    # The H200's single run, every round: TPOT p50 2.02 vs 2.30 ms, output 2807 vs 2543 tok/s.
    pdctl = [pdctl_result(98.1, 114.0, 2.02, 2807, decode_s=(0.25, 0.26, 0.27))] * 3
    vllm = [vllm_result(95.8, 114.2, 2.30, 2543, itls=((0.1, 0.19), (0.1, 0.2), (0.1, 0.22)))] * 3
    document = bench_compare.run(side(), tmp_path, runner=FakeTools(rounds_of(pdctl, vllm)))
    comparison = document["comparison"]
    assert comparison["agree"] is False
    assert [k for k, m in comparison["metrics"].items() if not m["within"]] == ["tpot_p50_ms", "output_tokens_per_s"]
    assert comparison["metrics"]["tpot_p50_ms"]["relative_difference"] == pytest.approx(2.02 / 2.30 - 1)
    # Per round, both tools' median per-request decode time: pdctl's e2e - ttft, vLLM's summed ITLs.
    assert document["rounds"][0]["decode_s_p50"] == {"pdctl": pytest.approx(0.26), "vllm": pytest.approx(0.30)}
    table = side_by_side_table("tiny-pd", document)
    assert "agree within 5%: False" in table
    assert "| tpot_p50_ms | 2.02 (2.02–2.02) | 2.30 (2.30–2.30) | -12.2% | **NO** |" in table
    assert "| ttft_p50_ms | 98.10 (98.10–98.10) | 95.80 (95.80–95.80) | +2.4% | yes |" in table
    assert table.endswith("| 3 | pdctl | 2 | 98.10 / 95.80 | 114.00 / 114.20 | 2.02 / 2.30 | 2807.00 / 2543.00 "
                          "| 260.00 / 300.00 |")


def test_a_failed_tool_stops_the_rounds_with_no_comparison(tmp_path):
    same = pdctl_result(96, 114, 2.3, 2543), vllm_result(96, 114, 2.3, 2543)
    tools = FakeTools(rounds_of([same[0]] * 3, [same[1]] * 3), fail=("vllm", 2))
    document = bench_compare.run(side(), tmp_path, runner=tools)
    assert tools.calls == [("pdctl", 0), ("vllm", 0), ("vllm", 1)]
    assert document["comparison"] is None and document["vllm_error"] == "round 2: ConnectionError: refused"
    assert side_by_side_table("tiny-pd", document) == (
        "Side by side (tiny-pd): not compared (round 2: ConnectionError: refused)")


def test_bench_rounds_below_one_is_refused_naming_the_flag(capsys):
    assert lab_main(["bench-compare", "--base-url", "http://x", "--model", "m", "--tokenizer", "t",
                     "--bench-rounds", "0"]) == 2
    assert "--bench-rounds" in capsys.readouterr().err


def test_both_tools_run_against_one_endpoint_with_one_workload(server, tiny_tokenizer, tmp_path):
    side = bench_compare.SideBySide(base_url=server.base_url.removesuffix("/v1"), model=server.served_model,
                                    tokenizer=str(tiny_tokenizer), input_tokens=24, output_tokens=6, requests=6,
                                    concurrency=3, warmup=2, seed=1, rounds=2)
    result = bench_compare.run(side, tmp_path)
    assert [(r["order"], r.get("pdctl_exit"), r.get("vllm_exit")) for r in result["rounds"]] == [
        (["pdctl", "vllm"], 0, 0), (["vllm", "pdctl"], 0, 0)], result
    last = result["rounds"][1]
    # vLLM's own result carries every key the comparison reads, and both sent the same workload.
    assert {key for _, key in bench_compare.METRICS.values()} <= set(last["vllm"])
    assert last["vllm"]["completed"] == 6 and last["vllm"]["total_output_tokens"] == 36
    assert last["pdctl"]["runs"][0]["output_tokens"] == 36
    assert last["pdctl"]["runs"][0]["prompts"]["content_tokens"] == [24]
    assert all(isinstance(v, float) for v in last["decode_s_p50"].values())
    assert all(isinstance(m["relative_difference"], float) for m in result["comparison"]["metrics"].values())
    timed = [r for r in server.requests if (r.get("max_tokens") or r.get("max_completion_tokens")) == 6]
    assert len(timed) == 2 * 2 * (6 + 2)  # two tools, two rounds: six timed requests and two warm-ups each
    assert all(r.get("ignore_eos") is True for r in timed)
    json.dumps(result)  # the lab writes it as JSON
