"""`pdctl bench`: the arrival processes, prompts of exact token lengths, warm-up, SLO accounting and
the result document. Timings are asserted only on a controlled clock (looptime: the loop's time moves
only when every task waits), never on the wall clock of a shared machine; over real HTTP (the server
of conftest.py) only order and causality are asserted."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random

import pytest

from measure.latency import ITL_CAVEAT, Slo, summarize
from pdctl import bench
from pdctl.bench import BenchSpec, BenchTarget, arrival_offsets, make_prompts, run_bench

MODEL = "qwen3.5-9b"
TTFT = 0.15
ITL = 0.04


# ----------------------------------------------------------------------- a scripted client

class ScriptedStream:
    """A streamed chat completion as the OpenAI SDK yields it: a role-only chunk, then one content
    chunk per token after `ttft` and every ITL (asyncio.sleep on the test's loop clock), then usage."""

    def __init__(self, tokens: int, prompt_tokens: int, ttft: float):
        self.tokens, self.prompt_tokens, self.ttft = tokens, prompt_tokens, ttft

    async def __aiter__(self):
        from openai.types.chat import ChatCompletionChunk

        def chunk(**fields):
            return ChatCompletionChunk.model_validate(
                {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL, **fields})

        yield chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        await asyncio.sleep(self.ttft)
        for i in range(self.tokens):
            if i:
                await asyncio.sleep(ITL)
            yield chunk(choices=[{"index": 0, "delta": {"content": f" tok{i}"}}])
        yield chunk(choices=[], usage={"prompt_tokens": self.prompt_tokens, "completion_tokens": self.tokens,
                                       "total_tokens": self.prompt_tokens + self.tokens})


class ScriptedClient:
    """Just enough of `openai.AsyncOpenAI` for the bench. `ttfts` gives the n-th request's TTFT."""

    def __init__(self, ttfts=None):
        self.chat = self
        self.completions = self
        self.in_flight = self.max_in_flight = 0
        self.ttfts = list(ttfts or [])
        self.log: list[tuple[str, int, float]] = []  # (event, max_tokens, loop time)

    async def create(self, *, messages, max_tokens, **_):
        now = asyncio.get_running_loop().time
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.log.append(("start", max_tokens, now()))
        ttft = self.ttfts.pop(0) if self.ttfts else TTFT
        stream = ScriptedStream(max_tokens, len(messages[0]["content"].split()), ttft)

        async def tracked():
            try:
                async for item in stream:
                    yield item
            finally:
                self.in_flight -= 1
                self.log.append(("end", max_tokens, now()))

        return tracked()


def prompts(n: int) -> list[str]:
    return make_prompts(n, 40, random.Random(0)).texts


# ------------------------------------------------------------------------------ arrivals

def test_poisson_inter_arrivals_are_exponential_at_the_rate():
    rate, n = 5.0, 20_000
    offsets = arrival_offsets(n, rate, "poisson", random.Random(1))
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    mean = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1))
    assert offsets[0] == 0.0
    assert mean == pytest.approx(1 / rate, rel=0.03)
    assert sd / mean == pytest.approx(1.0, rel=0.03)  # an exponential's coefficient of variation is 1
    # Kolmogorov-Smirnov against Exp(rate): under the 1% critical value for this many gaps.
    ordered = sorted(gaps)
    ks = max(max((i + 1) / len(ordered) - cdf, cdf - i / len(ordered))
             for i, cdf in enumerate(1 - math.exp(-rate * g) for g in ordered))
    assert ks < 1.63 / math.sqrt(len(ordered))


def test_a_poisson_schedule_is_seeded_and_a_constant_one_is_exact():
    def poisson(seed):
        return arrival_offsets(50, 3.0, "poisson", random.Random(seed))

    assert poisson(9) == poisson(9) and poisson(9) != poisson(8)
    assert arrival_offsets(4, 8.0, "constant", random.Random(0)) == [0.0, 0.125, 0.25, 0.375]


def test_open_loop_at_a_constant_rate_sends_on_schedule_and_does_not_wait_for_answers(on_controlled_clock):
    """10 req/s, each request taking 0.31 s: requests start exactly 0.1 s apart and overlap (4 in flight)."""
    client = ScriptedClient()
    spec = BenchSpec(requests=6, input_tokens=40, output_tokens=5, concurrency=None, rate=10.0, arrival="constant",
                     seed=1)
    samples, wall = on_controlled_clock(run_bench(client, MODEL, spec, prompts(6)))
    e2e = TTFT + 4 * ITL
    assert sorted(s.start for s in samples) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], abs=1e-9)
    assert all(s.e2e == pytest.approx(e2e, abs=1e-9) for s in samples)
    assert client.max_in_flight == math.ceil(e2e / 0.1)
    assert wall == pytest.approx(0.5 + e2e, abs=1e-9)


def test_an_open_loop_cap_holds_requests_back(on_controlled_clock):
    client = ScriptedClient()
    spec = BenchSpec(requests=6, input_tokens=40, output_tokens=5, concurrency=2, rate=10.0, arrival="constant",
                     seed=1)
    samples, _ = on_controlled_clock(run_bench(client, MODEL, spec, prompts(6)))
    assert client.max_in_flight == 2
    # The third arrives at 0.2 s but waits for the first to finish (0.31 s): sent late, timed from sending.
    assert sorted(s.start for s in samples)[2] == pytest.approx(TTFT + 4 * ITL, abs=1e-9)


def test_closed_loop_timings_on_a_controlled_clock(on_controlled_clock):
    """The bench's TTFT, ITL, TPOT, E2E and wall time equal the server's delays exactly, however busy
    the machine running the test is."""
    client = ScriptedClient()
    spec = BenchSpec(requests=6, input_tokens=40, output_tokens=5, concurrency=3, seed=1)
    samples, wall = on_controlled_clock(run_bench(client, MODEL, spec, prompts(6)))
    summary = summarize(samples, wall)
    e2e = TTFT + 4 * ITL
    for sample in samples:
        assert sample.ttft == pytest.approx(TTFT, abs=1e-9)  # the role-only chunk is not a token
        assert sample.itls == pytest.approx([ITL] * 4, abs=1e-9)
        assert sample.tpot == pytest.approx(ITL, abs=1e-9)
        assert sample.e2e == pytest.approx(e2e, abs=1e-9)
    assert client.max_in_flight == 3
    assert wall == pytest.approx(2 * e2e, abs=1e-9)  # two waves of three
    assert summary["output_tokens"] == 30 and summary["input_tokens"] == 6 * 40


# ---------------------------------------------------------------------------- SLO / goodput

def test_goodput_counts_the_requests_that_meet_every_objective(on_controlled_clock):
    """TTFTs of 0.1..0.4 s, TPOT 40 ms: a 250 ms TTFT objective admits two, a 30 ms TPOT one none."""
    ttfts = [0.1, 0.2, 0.3, 0.4]

    def run(slo):
        client = ScriptedClient(ttfts)
        spec = BenchSpec(requests=4, input_tokens=40, output_tokens=5, concurrency=4, seed=1, slo=slo)
        samples, wall = on_controlled_clock(run_bench(client, MODEL, spec, prompts(4)))
        return summarize(samples, wall, slo)["goodput"], wall

    goodput, wall = run(Slo(ttft_s=0.25))
    assert goodput["good_requests"] == 2 and goodput["fraction"] == 0.5
    assert wall == pytest.approx(0.4 + 4 * ITL, abs=1e-9)
    assert goodput["requests_per_s"] == pytest.approx(2 / wall)
    assert run(Slo(ttft_s=0.25, tpot_s=0.03))[0]["good_requests"] == 0
    assert run(Slo(ttft_s=1.0, tpot_s=0.05, e2e_s=0.6))[0]["good_requests"] == 4  # the slowest: 0.56 s
    assert run(Slo(e2e_s=0.35))[0]["good_requests"] == 1  # 0.1 + 4 × 0.04 = 0.26 only


def test_warm_up_finishes_before_the_first_timed_request(on_controlled_clock):
    client = ScriptedClient()
    spec = BenchSpec(requests=4, input_tokens=40, output_tokens=64, concurrency=2, seed=3)
    result = on_controlled_clock(bench.benchmark(client, BenchTarget("http://x/v1", MODEL), [spec]))
    warm = [t for event, tokens, t in client.log if tokens == bench.WARMUP_OUTPUT_TOKENS]
    timed_starts = [t for event, tokens, t in client.log if event == "start" and tokens == 64]
    assert len(warm) == 2 * 2  # two warm-up requests (the concurrency), a start and an end each
    assert max(warm) <= min(timed_starts)
    [run] = result["runs"]
    assert run["warmup"] == {"requests": 2, "failed": 0}
    assert run["requests"]["total"] == 4  # warm-ups are not in the numbers


# ------------------------------------------------------------------------------- prompts

def test_prompts_have_the_exact_token_length_in_the_models_tokenizer(tiny_tokenizer):
    tokenizer, why_not = bench.load_tokenizer(str(tiny_tokenizer))
    assert why_not is None
    made = make_prompts(20, 37, random.Random(5), tokenizer, source="tokenizer tiny")
    assert made.token_counts == [37] * 20
    for text in made.texts:
        assert len(tokenizer.encode(text, add_special_tokens=False)) == 37
    assert len(set(made.texts)) == 20
    assert made.to_dict(37)["exact_token_length"] is True


def test_without_a_tokenizer_the_prompts_are_words_and_say_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    tokenizer, why_not = bench.load_tokenizer("no-such-org/no-such-model")
    assert tokenizer is None
    assert "no tokenizer for 'no-such-org/no-such-model' in the local Hugging Face cache" in why_not
    assert "hf download no-such-org/no-such-model" in why_not
    made = make_prompts(3, 10, random.Random(0), None, note=why_not)
    assert all(len(t.split()) == 10 for t in made.texts)
    assert made.to_dict(10) == {"source": "random common words (≈ 1 token each)", "note": why_not,
                                "exact_token_length": False, "content_tokens": None}


# ------------------------------------------------------------------ the CLI over real HTTP

def test_bench_checks_the_model_list_warms_up_then_times(server, cli, tmp_path):
    out = tmp_path / "bench.json"
    result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "--requests", 6, "-c", 3,
                 "--input-tokens", 40, "--output-tokens", 20, "--seed", 7, "--output", "json", "--json-out", out)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(out.read_text())
    # The server's identity and what made the numbers.
    assert document["where"] == "client"
    assert document["server"]["base_url"] == server.base_url and document["server"]["model"] == MODEL
    assert [m["id"] for m in document["server"]["models"]] == [MODEL]
    assert document["server"]["models"][0]["owned_by"] == "ray"  # the /v1/models answer as given
    versions = document["versions"]
    assert versions["openai"] and versions["pdctl"] and versions["python"]
    assert document["notes"] == [ITL_CAVEAT]
    [run] = document["runs"]
    assert run["parameters"]["seed"] == 7 and run["parameters"]["mode"] == "closed loop"
    assert run["requests"] == {"total": 6, "succeeded": 6, "failed": 0}
    assert run["warmup"] == {"requests": 3, "failed": 0}
    # The raw data beside the summary: one row per timed request, decode time = e2e - ttft.
    rows = run["per_request"]
    assert rows["output_tokens"] == [20] * 6 and min(rows["start_s"]) == 0.0
    assert sorted(rows["e2e_s"])[2] <= run["e2e_s"]["p50"] <= sorted(rows["e2e_s"])[3]
    assert all(e2e - ttft >= 19 * ITL for ttft, e2e in zip(rows["ttft_s"], rows["e2e_s"], strict=True))
    # Over real sockets only causality holds: no token before the server's delay.
    assert run["ttft_s"]["p50"] >= TTFT and run["e2e_s"]["p50"] >= TTFT + 19 * ITL
    # Three untimed warm-ups (16 tokens) were answered before the first timed request (20) arrived.
    first_timed = server.events.index(("start", 20))
    assert server.events[:first_timed].count(("end", bench.WARMUP_OUTPUT_TOKENS)) == 3
    assert server.max_in_flight == 3
    timed = [r for r in server.requests if r["max_tokens"] == 20]
    assert len(timed) == 6 and all(r["ignore_eos"] is True for r in timed)
    assert len({r["messages"][0]["content"] for r in server.requests}) == 9  # no prompt sent twice


def test_bench_refuses_to_start_when_the_endpoint_serves_another_model(server, cli):
    server.served_model = "llama-3"
    result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "--requests", 2)
    assert result.exit_code == 1
    assert "the endpoint serves ['llama-3'], not 'qwen3.5-9b'" in result.stderr
    assert server.requests == []  # not one chat request


def test_each_run_draws_a_fresh_seed_unless_one_is_given(server, cli):
    def run(*extra):
        result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "--requests", 2, "-c", 2,
                     "--warmup", 0, "--input-tokens", 8, "--output-tokens", 2, "-o", "json", *extra)
        assert result.exit_code == 0, result.output
        sent = sorted(r["messages"][0]["content"] for r in server.requests[-2:])  # in any arrival order
        return json.loads(result.stdout)["runs"][0]["parameters"]["seed"], sent

    (seed_a, sent_a), (seed_b, sent_b) = run(), run()
    assert seed_a != seed_b and set(sent_a).isdisjoint(sent_b)
    assert run("--seed", "11") == run("--seed", "11")


def test_a_rate_sweep_runs_once_per_rate_with_goodput_and_the_itl_caveat(server, cli, tiny_tokenizer):
    result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "--rate", "50,100", "--arrival",
                 "constant", "--requests", 3, "--input-tokens", 12, "--output-tokens", 3,
                 "--tokenizer", tiny_tokenizer, "--slo-ttft-ms", 100, "--slo-tpot-ms", 500)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "open loop, 50 req/s constant" in text and "open loop, 100 req/s constant" in text
    assert text.count("prompts: tokenizer") == 2 and "(exact)" in text
    # The server waits 150 ms before any first token: a 100 ms TTFT objective is never met.
    assert "goodput (TTFT ≤ 100 ms, TPOT ≤ 500 ms): 0/3 requests" in text
    assert "ITL is the gap between streamed chunks" in text
    sent = [r["messages"][0]["content"] for r in server.requests]
    assert len(sent) == 2 * (3 + bench.OPEN_LOOP_WARMUP)  # per rate: its warm-up, then its requests
    assert len(set(sent)) == len(sent)  # the second run sends none of the first's prompts


def test_bench_reads_model_and_tokenizer_from_the_stack_outputs(server, cli, tmp_path, tiny_tokenizer):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"modelId": MODEL, "tokenizerSource": str(tiny_tokenizer)}))
    result = cli("bench", "--base-url", server.base_url, "--from-file", outputs, "--requests", 2,
                 "--input-tokens", 9, "--output-tokens", 2, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["tokenizer"] == str(tiny_tokenizer)
    assert document["runs"][0]["prompts"]["content_tokens"] == [9]


def test_bench_failure_exit_and_flag_errors(server, cli):
    dead = cli("bench", "--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, "--requests", 2, "--timeout", 2)
    assert dead.exit_code == 1
    assert "GET /v1/models failed" in dead.stderr and "is `pdctl connect` running?" in dead.stderr
    refused = cli("bench", "--base-url", server.base_url, "--model", MODEL, "--rate", "0")
    assert refused.exit_code == 2 and "--rate takes requests per second" in refused.stderr
