"""The benchmark behind `pdctl bench`: what a user of the endpoint feels, measured the way `vllm bench
serve` measures it (arithmetic in `measure.latency`).

- The client is ready before anything is timed: GET /v1/models must list the model, then warm-up
  requests (untimed, at the measured concurrency) open the HTTP connections and take the server
  through its first batches. A cold client otherwise spreads its first requests over tens of ms.
- Prompts have an exact length in the served model's own tokenizer (transformers, from the local
  Hugging Face cache): random token ids, decoded and re-encoded until the count holds. Without a
  tokenizer, random common words (≈ one token each) stand in, and the result says so.
- Every run draws a fresh seed unless one is given (and records it): the same prompts twice would
  measure the prefix cache.
- Arrivals: closed loop (N requests, C in flight) or open loop at a request rate, Poisson or
  constant, optionally capped at C in flight; a sweep is one open-loop run per rate.
- Goodput against TTFT/TPOT/E2E objectives; ITL comes with its caveat (`measure.latency.ITL_CAVEAT`).
- Each request is streamed and timed by `measure.stream` (the client the GPU lab uses too).

Every timestamp comes from the running event loop's clock (`loop.time()`, monotonic): the clock the
requests are scheduled on, and one a test can control. This module needs only the standard library,
`openai` and (for tokens) `transformers`: `pdctl bench --in-cluster` runs it in a Kubernetes Job with
`python -m pdctl.bench SPEC.json` (see `pdctl.bench_job`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from measure.latency import ITL_CAVEAT, RequestSample, Slo, per_request, summarize
from measure.stream import stream_sample

ARRIVALS = ("poisson", "constant")
# The line of a Job's log that carries its result (the log has whatever else the image prints).
RESULT_MARKER = "PDCTL_BENCH_RESULT "
WARMUP_OUTPUT_TOKENS = 16  # enough to exercise decode and the stream; warm-ups are not timed
OPEN_LOOP_WARMUP = 8  # warm-up requests of an uncapped open-loop run
EXACT_LENGTH_ROUNDS = 10

# Short common English words: about one token each in the tokenizers of current LLMs. Only used
# when no tokenizer is at hand; the server's usage.prompt_tokens then reports the real count.
_WORDS = [
    "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world", "school", "state",
    "family", "student", "group", "country", "problem", "hand", "part", "place", "case", "week", "company",
    "system", "program", "question", "work", "number", "night", "point", "home", "water", "room", "mother", "area",
    "money", "story", "fact", "month", "lot", "right", "study", "book", "eye", "job", "word",
]


def fresh_seed() -> int:
    """A seed from the system's entropy: each run sends prompts no earlier run sent."""
    return random.SystemRandom().randrange(2**32)


@dataclass(frozen=True)
class BenchSpec:
    """One benchmark run. `rate` None: closed loop with `concurrency` in flight; else open loop at
    `rate` requests/s (`arrival` poisson or constant) with `concurrency` a cap (None: no cap)."""

    requests: int
    input_tokens: int
    output_tokens: int
    concurrency: int | None = 4
    rate: float | None = None
    arrival: str = "poisson"
    warmup: int | None = None  # None: the concurrency (closed loop or cap), else OPEN_LOOP_WARMUP
    ignore_eos: bool = True  # vLLM extension: always produce output_tokens tokens
    seed: int | None = None  # the CLI always sets one: given, or `fresh_seed()`, and records it
    slo: Slo = field(default_factory=Slo)

    def __post_init__(self):
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        if self.rate is None and not self.concurrency:
            raise ValueError("a closed-loop run needs a concurrency")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be > 0 requests/s, got {self.rate}")

    @property
    def warmup_requests(self) -> int:
        if self.warmup is not None:
            return self.warmup
        return self.concurrency or OPEN_LOOP_WARMUP

    def to_dict(self) -> dict:
        data = asdict(self)
        data["slo"] = self.slo.to_dict()
        data["mode"] = "closed loop" if self.rate is None else "open loop"
        data["warmup"] = self.warmup_requests
        return data

    @classmethod
    def from_dict(cls, data: dict) -> BenchSpec:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "slo"}
        return cls(**fields, slo=Slo(**(data.get("slo") or {})))


# ---------------------------------------------------------------------------------- prompts

@dataclass(frozen=True)
class Prompts:
    texts: list[str]
    token_counts: list[int] | None  # in the tokenizer; None for words
    source: str  # what made them
    note: str | None = None  # why they are not token-exact, when they are not

    def to_dict(self, input_tokens: int) -> dict:
        return {
            "source": self.source, "note": self.note,
            "exact_token_length": self.token_counts is not None and all(n == input_tokens for n in self.token_counts),
            "content_tokens": sorted(set(self.token_counts)) if self.token_counts is not None else None,
        }


def load_tokenizer(name: str | None, *, download: bool = False):
    """(tokenizer, None) from the local Hugging Face cache or a directory (or the hub when `download`),
    else (None, why not and how to get it)."""
    if not name:
        return None, "no tokenizer named (--tokenizer, or the stack's tokenizerSource output)"
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None, "transformers is not installed, so the model's tokenizer cannot be loaded"
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=not download), None
    except (OSError, ValueError) as exc:
        where = "the Hugging Face hub" if download else "the local Hugging Face cache"
        return None, (f"no tokenizer for {name!r} in {where} ({str(exc).splitlines()[0][:160]}); "
                      f"`hf download {name} --include 'tokenizer*'` puts it in the cache")


class TokenDraw:
    """Random token ids whose text encodes back to the same id alone: byte-level pieces of a character
    decode to U+FFFD and would re-encode as several tokens, so they are skipped. Checked lazily (a
    large vocabulary is sampled, never walked)."""

    MAX_MISSES = 10_000

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        special = set(tokenizer.all_special_ids)
        self.ids = sorted(i for i in tokenizer.get_vocab().values() if i not in special)
        self.clean: dict[int, bool] = {}

    def __call__(self, rng: random.Random) -> int:
        for _ in range(self.MAX_MISSES):
            token = rng.choice(self.ids)
            clean = self.clean.get(token)
            if clean is None:
                text = self.tokenizer.decode([token])
                clean = bool(text.strip()) and self.tokenizer.encode(text, add_special_tokens=False) == [token]
                self.clean[token] = clean
            if clean:
                return token
        raise ValueError("the tokenizer has no token that encodes back to itself")


def token_prompt(tokenizer, draw: TokenDraw, length: int, rng: random.Random) -> tuple[str, int]:
    """A text of `length` tokens in `tokenizer`: random ids, decoded, re-encoded and topped up or cut
    until encoding the text gives `length` tokens (neighbours can merge). (text, its token count)."""
    tokens = [draw(rng) for _ in range(length)]
    text, count = "", 0
    for _ in range(EXACT_LENGTH_ROUNDS):
        text = tokenizer.decode(tokens, skip_special_tokens=True)
        encoded = tokenizer.encode(text, add_special_tokens=False)
        count = len(encoded)
        if count == length:
            break
        tokens = encoded[:length] + [draw(rng) for _ in range(length - count)]
    return text, count


def word_prompt(length: int, rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(length))


def make_prompts(count: int, length: int, rng: random.Random, tokenizer=None, *, source: str = "",
                 note: str | None = None) -> Prompts:
    """`count` distinct prompts (no shared prefix for the cache to reuse) of `length` tokens."""
    if tokenizer is None:
        return Prompts([word_prompt(length, rng) for _ in range(count)], None,
                       "random common words (≈ 1 token each)", note)
    draw = TokenDraw(tokenizer)
    made = [token_prompt(tokenizer, draw, length, rng) for _ in range(count)]
    return Prompts([t for t, _ in made], [n for _, n in made], source or "tokenizer", note)


# ------------------------------------------------------------------------------- arrivals

def arrival_offsets(count: int, rate: float, arrival: str, rng: random.Random) -> list[float]:
    """Send times, in seconds from the start, of `count` requests at `rate` per second: evenly spaced
    (constant) or with exponential gaps of mean 1/rate (Poisson). The first is sent at 0."""
    if arrival == "constant":
        return [i / rate for i in range(count)]
    offsets, t = [], 0.0
    for _ in range(count):
        offsets.append(t)
        t += rng.expovariate(rate)
    return offsets


# ---------------------------------------------------------------------------------- requests

def chat_body(model: str, prompt: str, max_tokens: int, ignore_eos: bool) -> dict:
    """The bench's request: one user message, greedy, `max_tokens` long (exactly, with `ignore_eos`)."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0}
    return {**body, "ignore_eos": True} if ignore_eos else body


async def warm_up(client, model: str, spec: BenchSpec, prompts: Sequence[str]) -> list[RequestSample]:
    """Untimed requests, all at once: the HTTP pool then holds that many open connections and the
    server has run its first batches before the first timed request."""
    return list(await asyncio.gather(*(
        stream_sample(client, chat_body(model, p, min(spec.output_tokens, WARMUP_OUTPUT_TOKENS), spec.ignore_eos))
        for p in prompts)))


async def run_bench(client, model: str, spec: BenchSpec, prompts: Sequence[str], rng: random.Random | None = None,
                    on_done: Callable[[RequestSample], None] | None = None) -> tuple[list[RequestSample], float]:
    """Send `prompts` as `spec` says; (samples in completion order, wall seconds of the run).
    `client` is an `openai.AsyncOpenAI`; `rng` draws Poisson gaps (default: seeded by the spec)."""
    rng = rng or random.Random(spec.seed)
    clock = asyncio.get_running_loop().time
    # Without a concurrency cap nothing waits: nullcontext stands in for the semaphore.
    gate = asyncio.Semaphore(spec.concurrency) if spec.concurrency else contextlib.nullcontext()
    samples: list[RequestSample] = []

    async def one(prompt: str) -> None:
        async with gate:
            sample = await stream_sample(client, chat_body(model, prompt, spec.output_tokens, spec.ignore_eos))
        samples.append(sample)
        if on_done is not None:
            on_done(sample)

    started = clock()
    if spec.rate is None:
        await asyncio.gather(*(one(p) for p in prompts))
    else:
        async def at(offset: float, prompt: str) -> None:
            delay = started + offset - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            await one(prompt)

        offsets = arrival_offsets(len(prompts), spec.rate, spec.arrival, rng)
        await asyncio.gather(*(at(o, p) for o, p in zip(offsets, prompts, strict=True)))
    return samples, clock() - started


# --------------------------------------------------------------------------------- a whole run

def versions(pdctl_version: str) -> dict:
    """What made the numbers: pdctl, the OpenAI SDK, transformers (prompt tokens), Python."""
    import importlib.metadata

    def version_of(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"pdctl": pdctl_version, "openai": version_of("openai"),
            "transformers": version_of("transformers"), "python": platform.python_version()}


def git_commit() -> str | None:
    """The commit of the checkout pdctl runs from (`+dirty` with local changes); None outside one."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty=+dirty", "--abbrev=12"],
                              cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


@dataclass(frozen=True)
class BenchTarget:
    base_url: str
    model: str
    tokenizer: str | None = None
    tokenizer_download: bool = False  # in a Job: fetch the tokenizer from the hub (no local cache there)


async def benchmark(client, target: BenchTarget, specs: Sequence[BenchSpec], *, where: str = "client",
                    pdctl_version: str = "unknown", server_models: list[dict] | None = None,
                    on_done: Callable[[RequestSample], None] | None = None) -> dict:
    """Warm up, then run every spec in turn (a sweep has several): the result document.
    `server_models` is the /v1/models answer the caller checked (it must list `target.model`)."""
    tokenizer, why_not = load_tokenizer(target.tokenizer, download=target.tokenizer_download)
    # One stream of random numbers for the whole sweep: no two runs send the same prompts.
    rng = random.Random(specs[0].seed)
    runs = []
    for spec in specs:
        prompts = make_prompts(spec.requests, spec.input_tokens, rng, tokenizer,
                               source=f"tokenizer {target.tokenizer}", note=why_not)
        warmups = make_prompts(spec.warmup_requests, spec.input_tokens, rng, tokenizer).texts
        warm = await warm_up(client, target.model, spec, warmups)
        samples, wall = await run_bench(client, target.model, spec, prompts.texts, rng, on_done)
        runs.append({
            "parameters": spec.to_dict(),
            "prompts": prompts.to_dict(spec.input_tokens),
            "warmup": {"requests": len(warm), "failed": sum(1 for s in warm if not s.ok)},
            **summarize(samples, wall, spec.slo),
            "per_request": per_request(samples),
        })
    return {
        "where": where,
        "server": {"base_url": target.base_url, "model": target.model, "models": server_models},
        "versions": versions(pdctl_version),
        "tokenizer": target.tokenizer,
        "runs": runs,
        "notes": [ITL_CAVEAT],
    }


async def check_models(client, model: str) -> list[dict]:
    """The /v1/models answer, as dicts; raise LookupError unless `model` is served."""
    cards = [m.model_dump() for m in (await client.models.list()).data]
    if model not in [c.get("id") for c in cards]:
        raise LookupError(f"the endpoint serves {[c.get('id') for c in cards] or 'no model'}, not {model!r}")
    return cards


def main(argv: list[str] | None = None) -> int:
    """`python -m pdctl.bench SPEC.json`: the in-cluster run. Prints the result as one line after
    RESULT_MARKER (exit 0), or the error after it (exit 1)."""
    import openai

    document = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    target = BenchTarget(**document["target"])
    specs = [BenchSpec.from_dict(s) for s in document["specs"]]

    async def go() -> dict:
        async with openai.AsyncOpenAI(base_url=target.base_url, api_key="not-needed",  # the Service checks none
                                      timeout=document.get("timeout", 600.0), max_retries=0) as client:
            models = await check_models(client, target.model)
            return await benchmark(client, target, specs, where="in-cluster",
                                   pdctl_version=document.get("pdctl_version", "unknown"), server_models=models)

    try:
        result = asyncio.run(go())
    except (LookupError, openai.APIError) as exc:
        print(RESULT_MARKER + json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(RESULT_MARKER + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
