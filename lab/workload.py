"""The lab's client side: fixed-length streamed completions for timing, greedy ones for comparison.

Prompts are lists of token ids (the OpenAI completions API takes them), so every request has
exactly the prompt length asked for, and `ignore_eos` makes every output exactly `max_tokens`
long. Each prompt is drawn at random, so prefix caching cannot flatter TTFT.

Timing arithmetic (TTFT, ITL, TPOT, E2E, tokens/s) is `measure.latency`: one definition for the lab
and for `pdctl bench` against the cluster.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from measure.latency import RequestSample

REQUEST_TIMEOUT_S = 90


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event of a streamed completion, with its arrival time."""

    at: float
    payload: dict[str, Any]


def random_prompts(count: int, length: int, *, low: int, high: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` token ids drawn from [low, high) — the tokens the tokenizer was trained on."""
    rng = random.Random(seed)
    return [[rng.randrange(low, high) for _ in range(length)] for _ in range(count)]


def _has_content(payload: dict[str, Any]) -> bool:
    return any(choice.get("text") or choice.get("token_ids") for choice in payload.get("choices") or [])


def sample_from_events(start: float, events: Sequence[StreamEvent], end: float,
                       error: str | None = None) -> RequestSample:
    """A `RequestSample` from a stream: one token time per event carrying output, counts from usage."""
    usage = next((e.payload["usage"] for e in reversed(events) if e.payload.get("usage")), None)
    return RequestSample(
        start=start, end=end,
        token_times=tuple(e.at for e in events if _has_content(e.payload)),
        output_tokens=usage.get("completion_tokens") if usage else None,
        prompt_tokens=usage.get("prompt_tokens") if usage else None,
        error=error,
    )


def parse_sse_line(line: bytes) -> dict[str, Any] | None:
    """The JSON of one `data: …` line; None for blank lines, comments and the closing [DONE]."""
    text = line.decode("utf-8").strip()
    if not text.startswith("data:"):
        return None
    data = text[len("data:"):].strip()
    if data == "[DONE]":
        return None
    return json.loads(data)


def completion_body(model: str, prompt: list[int], max_tokens: int, *, stream: bool,
                    top_logprobs: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
        "ignore_eos": True, "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
        body["return_token_ids"] = True
    if top_logprobs is not None:
        body["logprobs"] = top_logprobs
        body["return_tokens_as_token_ids"] = True
    return body


async def stream_completion(session, url: str, body: dict[str, Any]) -> RequestSample:
    start = time.perf_counter()
    events: list[StreamEvent] = []
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                text = await response.text()
                return sample_from_events(start, events, time.perf_counter(), f"HTTP {response.status}: {text[:300]}")
            async for line in response.content:
                payload = parse_sse_line(line)
                if payload is not None:
                    events.append(StreamEvent(time.perf_counter(), payload))
    except Exception as exc:  # a failed request is data for the summary, not a crash
        return sample_from_events(start, events, time.perf_counter(), f"{type(exc).__name__}: {exc}")
    return sample_from_events(start, events, time.perf_counter())


async def run_load(base_url: str, model: str, prompts: Sequence[list[int]], max_tokens: int,
                   concurrency: int) -> tuple[list[RequestSample], float]:
    """Closed loop: `concurrency` workers send the prompts in order; returns samples and wall time."""
    import aiohttp

    url = f"{base_url}/v1/completions"
    queue: asyncio.Queue[list[int]] = asyncio.Queue()
    for prompt in prompts:
        queue.put_nowait(prompt)
    samples: list[RequestSample] = []
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def worker() -> None:
            while not queue.empty():
                prompt = queue.get_nowait()
                samples.append(await stream_completion(
                    session, url, completion_body(model, prompt, max_tokens, stream=True)))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return samples, wall


async def run_open_loop(base_url: str, model: str, prompts: Sequence[list[int]], max_tokens: int,
                        rate: float, seed: int) -> tuple[list[RequestSample], float]:
    """Open loop: the prompts arrive as a Poisson process of `rate` per second (seeded), whatever is in
    flight, so queueing shows in the latencies; returns samples and wall time."""
    import random

    import aiohttp

    url = f"{base_url}/v1/completions"
    rng = random.Random(seed)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.perf_counter()
        tasks = []
        due = 0.0
        for prompt in prompts:
            due += rng.expovariate(rate)
            await asyncio.sleep(max(0.0, started + due - time.perf_counter()))
            tasks.append(asyncio.create_task(stream_completion(
                session, url, completion_body(model, prompt, max_tokens, stream=True))))
        samples = list(await asyncio.gather(*tasks))
        wall = time.perf_counter() - started
    return samples, wall


async def post_json(base_url: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
        request = session.post(f"{base_url}{path}", json=body) if body is not None else session.get(f"{base_url}{path}")
        async with request as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except json.JSONDecodeError:
                return response.status, text


async def greedy_completions(base_url: str, model: str, prompts: Sequence[list[int]], max_tokens: int, *,
                             top_logprobs: int = 2, concurrency: int = 4) -> list[dict[str, Any]]:
    """Non-streamed greedy completions with top-`top_logprobs` log-probabilities, in prompt order."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: list[int]) -> dict[str, Any]:
        async with semaphore:
            status, data = await post_json(base_url, "/v1/completions", completion_body(
                model, prompt, max_tokens, stream=False, top_logprobs=top_logprobs))
        if status != 200:
            return {"error": f"HTTP {status}: {str(data)[:300]}"}
        return data["choices"][0]

    return list(await asyncio.gather(*(one(p) for p in prompts)))


def chat_smoke_body(model: str, max_tokens: int = 16) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "the prefill engine sends the cache"}],
            "max_tokens": max_tokens, "temperature": 0.0}


def long_prompt_lengths(count: int, shortest: int, longest: int) -> list[int]:
    """`count` prompt lengths spread evenly from `shortest` to `longest` (both included)."""
    if count == 1:
        return [longest]
    return [shortest + (longest - shortest) * i // (count - 1) for i in range(count)]


async def run_interference(base_url: str, model: str, short_prompts: Sequence[list[int]], short_max_tokens: int,
                           long_prompts: Sequence[list[int]], long_max_tokens: int, *,
                           long_start_after_s: float, long_interval_s: float,
                           ) -> tuple[list[RequestSample], list[RequestSample], float]:
    """Short requests all start at once and decode; long prompts arrive open-loop while they do.

    The long ones start `long_start_after_s` after the short ones (so those are past their first
    token) and then every `long_interval_s`. Returns (short samples, long samples, wall time). The
    short requests' inter-token latency is what a prefill on the decode GPU disturbs.
    """
    import aiohttp

    url = f"{base_url}/v1/completions"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
        async def long_one(index: int, prompt: list[int]) -> RequestSample:
            await asyncio.sleep(long_start_after_s + index * long_interval_s)
            return await stream_completion(session, url, completion_body(model, prompt, long_max_tokens, stream=True))

        started = time.perf_counter()
        shorts = [stream_completion(session, url, completion_body(model, p, short_max_tokens, stream=True))
                  for p in short_prompts]
        longs = [long_one(i, p) for i, p in enumerate(long_prompts)]
        results = await asyncio.gather(*shorts, *longs)
        wall = time.perf_counter() - started
    return list(results[:len(short_prompts)]), list(results[len(short_prompts):]), wall
