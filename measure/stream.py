"""One streamed request to an OpenAI-compatible endpoint, timed: the client `pdctl bench` and the GPU
lab share, so both count tokens and failures the same way.

A request is its JSON body: chat completions when it has `messages`, completions (a text or a list
of token ids as `prompt`) otherwise. It is sent through the openai library, always streamed with
`stream_options.include_usage`; the body's fields the library does not name (vLLM's `ignore_eos`,
`return_token_ids`) travel in its `extra_body`, as given.

- A token time is the arrival of a chunk that carries output: chat `delta.content` or the reasoning a
  reasoning model streams before it (`delta.reasoning`, `reasoning_content` before vLLM renamed it);
  completions `text`, or `token_ids` (a chunk can hold token ids whose text is still empty, the
  first bytes of a character). Role-only, finish and usage chunks are not tokens.
- Token counts come from the server's usage (the last chunk); without it, one token per chunk.
- A failed request (an HTTP error status, a connection or timeout error, an error event in the
  stream) is a sample with `error`, never an exception: failures are data for the summary.

Times come from `clock`, by default the running event loop's (`loop.time()`): the clock the requests
are scheduled on, and one a test can fast-forward.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from measure.latency import RequestSample

# The body's fields the openai library takes as arguments; `stream` and `stream_options` it is
# always given here.
_ARGUMENTS = frozenset({"model", "messages", "prompt", "max_tokens", "temperature"})
_ALWAYS = frozenset({"stream", "stream_options"})


def _carries_output(choice: Any) -> bool:
    delta = getattr(choice, "delta", None)
    if delta is not None:  # a chat chunk
        return bool(delta.content or getattr(delta, "reasoning", None) or getattr(delta, "reasoning_content", None))
    return bool(choice.text or getattr(choice, "token_ids", None))


async def stream_sample(client: Any, body: Mapping[str, Any],
                        clock: Callable[[], float] | None = None) -> RequestSample:
    """Send `body` streamed through `client` (an `openai.AsyncOpenAI`) and time it: see the module."""
    clock = clock or asyncio.get_running_loop().time
    arguments = {k: v for k, v in body.items() if k in _ARGUMENTS}
    extra = {k: v for k, v in body.items() if k not in _ARGUMENTS | _ALWAYS}
    create = client.chat.completions.create if "messages" in body else client.completions.create
    start = clock()
    token_times: list[float] = []
    usage = None
    try:
        stream = await create(**arguments, stream=True, stream_options={"include_usage": True},
                              extra_body=extra or None)
        async for chunk in stream:
            now = clock()
            if chunk.usage is not None:
                usage = chunk.usage
            if any(_carries_output(choice) for choice in chunk.choices):
                token_times.append(now)
    except Exception as exc:  # one failed request is data for the summary, not a crash
        return RequestSample(start=start, end=clock(), token_times=tuple(token_times),
                             error=f"{type(exc).__name__}: {exc}")
    return RequestSample(
        start=start, end=clock(), token_times=tuple(token_times),
        output_tokens=usage.completion_tokens if usage else None,
        prompt_tokens=usage.prompt_tokens if usage else None,
    )
