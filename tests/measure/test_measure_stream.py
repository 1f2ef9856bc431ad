"""The streamed-request client `pdctl bench` and the GPU lab share (measure.stream), through the real
openai library against a scripted server (an in-process HTTP transport): what is sent, which chunks
are tokens, the counts from usage, and failures as samples. Times are asserted on a controlled clock
(the `on_controlled_clock` fixture), so they are exact."""

from __future__ import annotations

import asyncio
import json

import httpx2  # the HTTP library of the pinned openai SDK
import openai
import pytest

from measure.latency import summarize
from measure.stream import stream_sample

MODEL = "m"


def scripted_client(events: list[tuple[float, dict | str]], sent: list[dict], status: int = 200) -> openai.AsyncOpenAI:
    """An `openai.AsyncOpenAI` whose server records each request's body, then streams `events`:
    (seconds after the previous one, a chunk's JSON or a raw `data:` payload), then [DONE]. A status
    other than 200 answers with an error body instead."""

    async def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append({"path": request.url.path, **json.loads(request.content)})
        if status != 200:
            return httpx2.Response(status, json={"error": {"message": "engine core died", "code": status}})

        async def body():
            for delay, event in events:
                await asyncio.sleep(delay)
                yield f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return openai.AsyncOpenAI(base_url="http://endpoint/v1", api_key="none", max_retries=0,
                              http_client=openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(handle)))


def completion_chunk(text: str, token_ids: list[int] | None = None, finish: str | None = None) -> dict:
    choice: dict = {"index": 0, "text": text, "finish_reason": finish}
    if token_ids is not None:
        choice["token_ids"] = token_ids
    return {"id": "c", "object": "text_completion", "created": 0, "model": MODEL, "choices": [choice]}


def chat_chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage(prompt: int, completion: int) -> dict:
    return {"id": "c", "object": "text_completion", "created": 0, "model": MODEL, "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def test_a_token_id_completion_is_timed_by_the_chunks_that_carry_output(on_controlled_clock):
    sent: list[dict] = []
    client = scripted_client([
        (0.2, completion_chunk("a", [7])),
        (0.05, completion_chunk("", [8, 9])),  # two tokens whose text is not whole yet: output all the same
        (0.15, completion_chunk("d", [10])),
        (0.0, completion_chunk("", finish="length")),  # the finish chunk: no token
        (0.0, usage(16, 4)),
    ], sent)
    body = {"model": MODEL, "prompt": [5, 6, 7], "max_tokens": 4, "temperature": 0.0, "ignore_eos": True,
            "return_token_ids": True}
    sample = on_controlled_clock(stream_sample(client, body))

    assert sample.error is None and sample.start == 0.0
    assert sample.token_times == pytest.approx((0.2, 0.25, 0.4), abs=1e-9)
    assert (sample.output_tokens, sample.prompt_tokens) == (4, 16)  # the server's count, not the 3 chunks
    assert sample.ttft == pytest.approx(0.2, abs=1e-9)
    assert sample.tpot == pytest.approx(0.2 / 3, abs=1e-9)  # (E2E − TTFT) / (tokens − 1)
    # Sent as given, streamed with usage, vLLM's own fields beside the OpenAI ones.
    [request] = sent
    assert request["path"] == "/v1/completions"
    assert request["prompt"] == [5, 6, 7] and request["max_tokens"] == 4 and request["temperature"] == 0.0
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["ignore_eos"] is True and request["return_token_ids"] is True


def test_a_chat_stream_counts_content_and_reasoning_not_the_role_chunk(on_controlled_clock):
    sent: list[dict] = []
    client = scripted_client([
        (0.1, chat_chunk({"role": "assistant", "content": ""})),  # vLLM's first chunk: no token yet
        (0.05, chat_chunk({"reasoning": "Let me"})),  # a reasoning model thinks first: output tokens too
        (0.05, chat_chunk({"reasoning_content": " think"})),  # the field's name before vLLM renamed it
        (0.1, chat_chunk({"content": "Hi"})),
        (0.0, chat_chunk({}, finish="stop")),
    ], sent)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
    sample = on_controlled_clock(stream_sample(client, body))

    assert sample.error is None
    assert sample.token_times == pytest.approx((0.15, 0.2, 0.3), abs=1e-9)
    assert sample.output_tokens is None and sample.tokens_out == 3  # no usage: one token per chunk
    [request] = sent
    assert request["path"] == "/v1/chat/completions" and request["messages"][0]["content"] == "hello"
    assert "ignore_eos" not in request


def test_an_http_error_is_a_failed_sample_not_a_crash(on_controlled_clock):
    client = scripted_client([], [], status=500)
    body = {"model": MODEL, "prompt": [1], "max_tokens": 4}
    sample = on_controlled_clock(stream_sample(client, body))

    assert not sample.ok and sample.token_times == ()
    assert sample.error.startswith("InternalServerError: Error code: 500")
    assert "engine core died" in sample.error
    assert summarize([sample])["requests"] == {"total": 1, "succeeded": 0, "failed": 1}


def test_an_error_event_in_the_stream_fails_the_request(on_controlled_clock):
    """vLLM ends a stream whose engine died with an error event: the tokens before it do not make it a success."""
    client = scripted_client([
        (0.1, completion_chunk("a", [7])),
        (0.1, {"error": {"message": "engine core process exited", "type": "InternalServerError", "code": 500}}),
    ], [])
    sample = on_controlled_clock(stream_sample(client, {"model": MODEL, "prompt": [1], "max_tokens": 4}))

    assert not sample.ok and sample.token_times == pytest.approx((0.1,), abs=1e-9)
    assert sample.error == "APIError: engine core process exited"
    assert sample.end == pytest.approx(0.2, abs=1e-9)
