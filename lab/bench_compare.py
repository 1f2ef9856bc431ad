"""`pdctl bench` beside `vllm bench serve`: one endpoint, one workload, in rounds of alternating order,
and whether the medians over the rounds agree within 5% on TTFT p50 and p90, TPOT p50 and output
throughput.

Both send streamed chat completions (vLLM's `openai-chat` backend) of random tokens of an exact
input length in the model's tokenizer, force the output length (ignore_eos), warm up first and run
at the same concurrency (closed loop), or the same request rate (Poisson) capped at it. Run it where
a GPU serves the model: `python -m lab bench-compare --base-url http://127.0.0.1:8000/<prefix> ...`,
or `python -m lab run --side-by-side` against each timed app while it is up.

Measured on an H200 (lab/results/2026-12-01-h200-resilience-bench-compare-result.json.gz, one run of
64 requests each, pdctl first, ~3 s each): TTFT p50 98.1 vs 95.8 ms and p90 114.0 vs 114.2 agreed, but
TPOT p50 2.02 vs 2.30 ms (-12%), output throughput 2807 vs 2543 tok/s (+10%), E2E p50 0.356 vs
0.394 s. Both define E2E as the end of the stream and TPOT as (E2E - TTFT) / (tokens - 1) (pdctl:
measure/latency.py; vLLM: `endpoint_request_func`), so the gap is in the per-request decode time
(vLLM's run: 277-322 ms) — and one run each, one after the other, cannot tell a tool's difference
from the server drifting over those seconds. Hence rounds: each round runs both tools with its own
seed (seed + round index), the order alternates (pdctl first in round 1, vLLM first in round 2, ...)
so drift falls on both tools alike, the default workload is 128 requests, and agreement is judged on
the median over the rounds of each metric, with each tool's min–max beside it. Each round also
reports both tools' per-request decode time median: pdctl's from its `per_request` list (E2E -
TTFT), vLLM's from `--save-detailed` (the sum of a request's ITLs: first to last token, without the
stream's closing chunk).

One definition differs: vLLM's client starts TTFT at the first streamed chunk with any choice, the
role-only chunk included (vllm `benchmarks/lib/endpoint_request_func.py`,
`async_request_openai_chat_completions`, vLLM 0.29), pdctl at the first chunk with content. A server
that sends the role chunk with the first token, as vLLM's does, makes them the same.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

TOLERANCE = 0.05
TOOLS = ("pdctl", "vllm")
# metric: (its value in pdctl's run, the key of `vllm bench serve --save-result`'s JSON)
METRICS: dict[str, tuple[Callable[[dict], float | None], str]] = {
    "ttft_p50_ms": (lambda run: run["ttft_s"]["p50"] * 1000, "median_ttft_ms"),
    "ttft_p90_ms": (lambda run: run["ttft_s"]["p90"] * 1000, "p90_ttft_ms"),
    "tpot_p50_ms": (lambda run: run["tpot_s"]["p50"] * 1000, "median_tpot_ms"),
    "output_tokens_per_s": (lambda run: run["output_tokens_per_s"], "output_throughput"),
}


@dataclass(frozen=True)
class SideBySide:
    base_url: str  # the app's root: pdctl adds /v1, vLLM the endpoint path
    model: str  # the served model id
    tokenizer: str  # Hugging Face id or directory: both tools build prompts with it
    input_tokens: int = 512
    output_tokens: int = 128
    requests: int = 128  # at concurrency 8 on an H200, ~6 s a run: long enough that one batch is not the unit
    concurrency: int = 8
    rate: float | None = None  # None: closed loop at `concurrency`
    warmup: int = 8
    seed: int = 0  # round i (from 0) sends seed + i with both tools
    rounds: int = 3

    def pdctl_command(self, out: Path) -> list[str]:
        command = [sys.executable, "-m", "pdctl", "bench", "--base-url", f"{self.base_url}/v1",
                   "--model", self.model, "--tokenizer", self.tokenizer,
                   "--requests", str(self.requests), "--concurrency", str(self.concurrency),
                   "--input-tokens", str(self.input_tokens), "--output-tokens", str(self.output_tokens),
                   "--warmup", str(self.warmup), "--seed", str(self.seed), "--output", "json", "--json-out", str(out)]
        if self.rate is not None:
            command += ["--rate", f"{self.rate:g}", "--arrival", "poisson"]
        return command

    def vllm_command(self, out: Path) -> list[str]:
        # The `vllm` console script's module, run by this interpreter: no PATH lookup on a bundle host.
        return [sys.executable, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
                "--backend", "openai-chat", "--base-url", self.base_url,
                "--endpoint", "/v1/chat/completions", "--model", self.tokenizer, "--served-model-name", self.model,
                "--tokenizer", self.tokenizer, "--dataset-name", "random",
                "--random-input-len", str(self.input_tokens), "--random-output-len", str(self.output_tokens),
                "--random-range-ratio", "0", "--num-prompts", str(self.requests),
                "--request-rate", "inf" if self.rate is None else f"{self.rate:g}",
                "--max-concurrency", str(self.concurrency), "--num-warmups", str(self.warmup),
                "--ignore-eos", "--temperature", "0", "--seed", str(self.seed),
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
                "--save-result", "--save-detailed", "--result-dir", str(out.parent), "--result-filename", out.name]


def metrics_of(tool: str, result: dict[str, Any]) -> dict[str, float | None]:
    """The compared metrics from one tool's result file."""
    if tool == "pdctl":
        [run] = result["runs"]
        return {name: ours(run) for name, (ours, _) in METRICS.items()}
    return {name: result.get(key) for name, (_, key) in METRICS.items()}


def decode_s_p50(tool: str, result: dict[str, Any]) -> float | None:
    """Median per-request decode time (first token to the end), where the raw data allows: pdctl's
    `per_request` E2E - TTFT, vLLM's `--save-detailed` ITLs summed; None without it."""
    if tool == "pdctl":
        per_request = result["runs"][0].get("per_request")
        decode = [] if per_request is None else [
            e2e - ttft for ttft, e2e in zip(per_request["ttft_s"], per_request["e2e_s"], strict=True)
            if ttft is not None]
    else:
        decode = [sum(itls) for itls, error in zip(result.get("itls") or [], result.get("errors") or [], strict=False)
                  if itls and not error]
    return statistics.median(decode) if decode else None


def _known(values: list[float | None]) -> list[float] | None:
    """The values when every round has one; None otherwise."""
    known = [v for v in values if v is not None]
    return known if known and len(known) == len(values) else None


def compare(rounds: list[dict[str, dict[str, float | None]]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """`rounds`: per round, each tool's metrics (`metrics_of`). Each metric's median over the rounds
    per tool, its per-round values and min–max, and the medians' relative difference (against
    vLLM's); agree when every difference is within `tolerance`."""
    metrics = {}
    for name in METRICS:
        values = {tool: [r[tool][name] for r in rounds] for tool in TOOLS}
        known = {tool: _known(v) for tool, v in values.items()}
        mine, theirs = (None if v is None else statistics.median(v) for v in (known["pdctl"], known["vllm"]))
        difference = None if mine is None or not theirs else (mine - theirs) / theirs
        metrics[name] = {
            "pdctl": mine, "vllm": theirs, "relative_difference": difference,
            "within": difference is not None and abs(difference) <= tolerance, "rounds": values,
            "spread": {tool: None if v is None else [min(v), max(v)] for tool, v in known.items()}}
    return {"tolerance": tolerance, "rounds": len(rounds), "metrics": metrics,
            "agree": all(m["within"] for m in metrics.values())}


def run(side: SideBySide, out_dir: Path, runner: Callable[..., subprocess.CompletedProcess] = subprocess.run
        ) -> dict[str, Any]:
    """`side.rounds` rounds against `side.base_url`, pdctl first in odd rounds, vLLM first in even ones;
    each round's result files kept in `out_dir`. The side-by-side document (a plain dict): stops at
    the first round in which a tool fails, with no comparison."""
    out_dir.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {"workload": asdict(side), "rounds": []}
    for index in range(side.rounds):
        number, seeded = index + 1, replace(side, seed=side.seed + index)
        outs = {"pdctl": out_dir / f"round-{number}-pdctl-bench.json",
                "vllm": out_dir / f"round-{number}-vllm-bench-serve.json"}
        order = TOOLS if index % 2 == 0 else TOOLS[::-1]
        this: dict[str, Any] = {"round": number, "seed": seeded.seed, "order": list(order), "commands": {
            "pdctl": seeded.pdctl_command(outs["pdctl"]), "vllm": seeded.vllm_command(outs["vllm"])}}
        document["rounds"].append(this)
        for tool in order:
            done = runner(this["commands"][tool], capture_output=True, text=True, check=False)
            this[f"{tool}_exit"] = done.returncode
            if done.returncode != 0 or not outs[tool].exists():
                document[f"{tool}_error"] = f"round {number}: " + (done.stderr or done.stdout or "")[-2000:]
                document["comparison"] = None
                return document
        for tool in TOOLS:
            this[tool] = json.loads(outs[tool].read_text())
        this["metrics"] = {tool: metrics_of(tool, this[tool]) for tool in TOOLS}
        this["decode_s_p50"] = {tool: decode_s_p50(tool, this[tool]) for tool in TOOLS}
    document["comparison"] = compare([r["metrics"] for r in document["rounds"]])
    return document
