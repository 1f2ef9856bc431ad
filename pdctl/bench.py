"""Stream N chat completions at concurrency C and time every chunk (arithmetic in `measure.latency`).

Every timestamp is read from the running event loop's clock (`loop.time()`, monotonic): the clock
the requests are scheduled on, and one a test can control, so the bench's own timing is checked
against known delays without depending on how busy the machine is."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from measure.latency import RequestSample

# Short common English words: about one token each in the tokenizers of current LLMs, so a prompt
# of N words is about N tokens. The server's usage.prompt_tokens reports the exact count.
_WORDS = [
    "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world", "school", "state",
    "family", "student", "group", "country", "problem", "hand", "part", "place", "case", "week", "company",
    "system", "program", "question", "work", "number", "night", "point", "home", "water", "room", "mother", "area",
    "money", "story", "fact", "month", "lot", "right", "study", "book", "eye", "job", "word"
]


@dataclass(frozen=True)
class BenchSpec:
    requests: int
    concurrency: int
    input_tokens: int
    output_tokens: int
    ignore_eos: bool = True  # vLLM extension: always produce output_tokens tokens
    seed: int = 0


def synthetic_prompt(n_words: int, rng: random.Random) -> str:
    """A random word sequence (distinct per request, so prefix caching cannot flatter TTFT)."""
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


async def _one_request(client, model: str, prompt: str, spec: BenchSpec) -> RequestSample:
    clock = asyncio.get_running_loop().time
    start = clock()
    token_times: list[float] = []
    usage = None
    try:
        stream = await client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=spec.output_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True} if spec.ignore_eos else None,
        )
        async for chunk in stream:
            now = clock()
            if chunk.usage is not None:
                usage = chunk.usage
            # A reasoning model streams its thinking as reasoning_content: those are output tokens too.
            if any(choice.delta.content or getattr(choice.delta, "reasoning_content", None)
                   for choice in chunk.choices):
                token_times.append(now)
    except Exception as exc:  # one failed request is data for the summary, not a crash
        return RequestSample(start=start, end=clock(), token_times=token_times,
                             error=f"{type(exc).__name__}: {exc}")
    return RequestSample(
        start=start, end=clock(), token_times=token_times,
        output_tokens=usage.completion_tokens if usage else None,
        prompt_tokens=usage.prompt_tokens if usage else None,
    )


async def run_bench(client, model: str, spec: BenchSpec,
                    on_done: Callable[[RequestSample], None] | None = None) -> tuple[list[RequestSample], float]:
    """(samples, wall seconds). `client` is an `openai.AsyncOpenAI`."""
    rng = random.Random(spec.seed)
    prompts = [synthetic_prompt(spec.input_tokens, rng) for _ in range(spec.requests)]
    gate = asyncio.Semaphore(spec.concurrency)
    samples: list[RequestSample] = []

    async def worker(prompt: str) -> None:
        async with gate:
            sample = await _one_request(client, model, prompt, spec)
        samples.append(sample)
        if on_done is not None:
            on_done(sample)

    clock = asyncio.get_running_loop().time
    started = clock()
    await asyncio.gather(*(worker(p) for p in prompts))
    return samples, clock() - started
