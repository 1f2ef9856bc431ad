"""`pdctl bench` beside `vllm bench serve`: one endpoint, one workload, one after the other, and whether
they agree within 5% on TTFT p50 and p90, TPOT p50 and output throughput.

Both send streamed chat completions (vLLM's `openai-chat` backend) of random tokens of an exact
input length in the model's tokenizer, force the output length (ignore_eos), warm up first and run
at the same concurrency (closed loop), or the same request rate (Poisson) capped at it. Run it where
a GPU serves the model: `python -m lab bench-compare --base-url http://127.0.0.1:8000/<prefix> ...`,
or `python -m lab run --side-by-side` against each timed app while it is up. Neither was run here:
no result exists until a GPU host runs it.

One definition differs: vLLM's client starts TTFT at the first streamed chunk with any choice, the
role-only chunk included (vllm `benchmarks/lib/endpoint_request_func.py`,
`async_request_openai_chat_completions`, vLLM 0.29), pdctl at the first chunk with content. A server
that sends the role chunk with the first token, as vLLM's does, makes them the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TOLERANCE = 0.05
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
    requests: int = 64
    concurrency: int = 8
    rate: float | None = None  # None: closed loop at `concurrency`
    warmup: int = 8
    seed: int = 0

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


def compare(pdctl_result: dict[str, Any], vllm_result: dict[str, Any], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Each metric from both tools and their relative difference (against vLLM's); agree when every
    one is within `tolerance`."""
    [run] = pdctl_result["runs"]
    metrics = {}
    for name, (ours, key) in METRICS.items():
        mine, theirs = ours(run), vllm_result.get(key)
        difference = None if mine is None or not theirs else (mine - theirs) / theirs
        metrics[name] = {"pdctl": mine, "vllm": theirs, "relative_difference": difference,
                         "within": difference is not None and abs(difference) <= tolerance}
    return {"tolerance": tolerance, "metrics": metrics, "agree": all(m["within"] for m in metrics.values())}


def run(side: SideBySide, out_dir: Path, runner: Callable[..., subprocess.CompletedProcess] = subprocess.run
        ) -> dict[str, Any]:
    """Run pdctl bench, then vllm bench serve, against `side.base_url`; the side-by-side document."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pdctl_out, vllm_out = out_dir / "pdctl-bench.json", out_dir / "vllm-bench-serve.json"
    document: dict[str, Any] = {"workload": asdict(side), "commands": {
        "pdctl": side.pdctl_command(pdctl_out), "vllm": side.vllm_command(vllm_out)}}
    for tool, out in (("pdctl", pdctl_out), ("vllm", vllm_out)):
        done = runner(document["commands"][tool], capture_output=True, text=True, check=False)
        document[f"{tool}_exit"] = done.returncode
        if done.returncode != 0 or not out.exists():
            document[f"{tool}_error"] = (done.stderr or done.stdout)[-2000:]
    if "pdctl_error" in document or "vllm_error" in document:
        document["comparison"] = None
        return document
    pdctl_result, vllm_result = json.loads(pdctl_out.read_text()), json.loads(vllm_out.read_text())
    document["pdctl"], document["vllm"] = pdctl_result, vllm_result
    document["comparison"] = compare(pdctl_result, vllm_result)
    return document
