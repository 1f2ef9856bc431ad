"""The lab's client side: fixed-length streamed completions for timing, greedy ones for comparison.

Prompts are lists of token ids (the OpenAI completions API takes them), so every request has
exactly the prompt length asked for, and `ignore_eos` makes every output exactly `max_tokens`
long. Each prompt is drawn at random, so prefix caching cannot flatter TTFT.

Streamed requests go through `measure.stream` (openai), timing arithmetic (TTFT, ITL, TPOT, E2E,
tokens/s) is `measure.latency`: one client and one definition for the lab and for `pdctl bench`
against the cluster. Plain JSON requests (greedy completions, smoke checks) go through httpx.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx
import openai

from measure.latency import RequestSample, poisson_arrival_times
from measure.stream import stream_sample

REQUEST_TIMEOUT_S = 90
# What the SDK sends where the app checks no key (the SDK refuses to start without one).
NO_KEY = "not-needed"
# httpx logs every request at INFO, and the lab runs under Ray's INFO logging: a line per request in
# the run log (164 in 93 s of timing on the GPU host; a soak sends thousands). Failures stay in the samples.
logging.getLogger("httpx").setLevel(logging.WARNING)


def random_prompts(count: int, length: int, *, low: int, high: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` token ids drawn from [low, high) — the tokens the tokenizer was trained on."""
    rng = random.Random(seed)
    return [[rng.randrange(low, high) for _ in range(length)] for _ in range(count)]


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


def openai_client(base_url: str, api_key: str = NO_KEY) -> openai.AsyncOpenAI:
    """The client of the lab's streamed requests: no retries (a failure is data), REQUEST_TIMEOUT_S
    for each connect, read and write; `api_key` for an app behind the front door."""
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, timeout=REQUEST_TIMEOUT_S,
                              max_retries=0)


async def stream_completion(client: openai.AsyncOpenAI, body: dict[str, Any]) -> RequestSample:
    """One streamed request timed by `measure.stream`, on the lab's clock: time.perf_counter, which the
    fault, soak and scaling runs also read (in other threads) to place samples in their windows."""
    return await stream_sample(client, body, clock=time.perf_counter)


async def run_load(base_url: str, model: str, prompts: Sequence[list[int]], max_tokens: int,
                   concurrency: int, *, api_key: str = NO_KEY,
                   stop: asyncio.Event | None = None) -> tuple[list[RequestSample], float]:
    """Closed loop: `concurrency` workers send the prompts in order (until `stop` is set, if given: a
    load held while something else happens); returns samples and wall time."""
    queue: asyncio.Queue[list[int]] = asyncio.Queue()
    for prompt in prompts:
        queue.put_nowait(prompt)
    samples: list[RequestSample] = []
    async with openai_client(base_url, api_key) as client:
        async def worker() -> None:
            while not queue.empty() and not (stop is not None and stop.is_set()):
                prompt = queue.get_nowait()
                samples.append(await stream_completion(client, completion_body(model, prompt, max_tokens, stream=True)))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return samples, wall


async def run_open_loop(base_url: str, model: str, prompts: Sequence[list[int]], max_tokens: int,
                        rate: float, seed: int) -> tuple[list[RequestSample], float]:
    """Open loop: the prompts arrive as a Poisson process of `rate` per second (seeded), whatever is in
    flight, so queueing shows in the latencies; returns samples and wall time."""
    arrivals = poisson_arrival_times(rate, len(prompts), seed)
    async with openai_client(base_url) as client:
        started = time.perf_counter()
        tasks = []
        for prompt, due in zip(prompts, arrivals, strict=True):
            await asyncio.sleep(max(0.0, started + due - time.perf_counter()))
            tasks.append(asyncio.create_task(stream_completion(
                client, completion_body(model, prompt, max_tokens, stream=True))))
        samples = list(await asyncio.gather(*tasks))
        wall = time.perf_counter() - started
    return samples, wall


def json_or_text(response: httpx.Response) -> Any:
    """An answer's JSON, or its text where it is not JSON (a proxy's error page, a bare message)."""
    try:
        return response.json()
    except ValueError:
        return response.text


async def post_json(base_url: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """POST `body` as JSON (GET without one) to `path`: (HTTP status, the answer's JSON or text)."""
    response = await send_json(base_url, path, body)
    return response.status_code, json_or_text(response)


async def send_json(base_url: str, path: str, body: dict[str, Any] | None = None,
                    headers: dict[str, str] | None = None) -> httpx.Response:
    """POST `body` as JSON (GET without one) to `path` with `headers`: the whole response (read)."""
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
        url = f"{base_url}{path}"
        return await (client.post(url, json=body, headers=headers) if body is not None
                      else client.get(url, headers=headers))


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
    async with openai_client(base_url) as client:
        async def long_one(index: int, prompt: list[int]) -> RequestSample:
            await asyncio.sleep(long_start_after_s + index * long_interval_s)
            return await stream_completion(client, completion_body(model, prompt, long_max_tokens, stream=True))

        started = time.perf_counter()
        shorts = [stream_completion(client, completion_body(model, p, short_max_tokens, stream=True))
                  for p in short_prompts]
        longs = [long_one(i, p) for i, p in enumerate(long_prompts)]
        results = await asyncio.gather(*shorts, *longs)
        wall = time.perf_counter() - started
    return list(results[:len(short_prompts)]), list(results[len(short_prompts):]), wall
