"""Ray Serve LLM's OpenAI ingress with API keys, per-key limits and per-key accounting.

`build_pd_openai_app` builds its ingress from `ingress_cls_config` (serve_app/render.py names this
class and its keyword arguments). Every route first checks the caller's key against the mounted key
table and the key's per-minute windows; a refused request is answered here (401 or 429 in OpenAI's
error format) and never reaches an engine. The body is parsed only after that, so a caller without a
key learns nothing about the API. Per key: Prometheus counters through ray.serve.metrics (exported as
`ray_pd_door_requests_total` and `ray_pd_door_tokens_total`), and one access log line per request
with its key's name, route, status, token counts and duration, never the prompt or the key.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from ray.llm._internal.serve.core.configs.openai_api_models import (
    ChatCompletionRequest,
    CompletionRequest,
    DetokenizeRequest,
    EmbeddingRequest,
    ScoreRequest,
    TokenizeCompletionRequest,
    TranscriptionRequest,
)
from ray.llm._internal.serve.core.ingress.ingress import OpenAiIngress
from ray.serve import metrics
from starlette.responses import JSONResponse, Response, StreamingResponse

from front_door.keys import KeyEntry, KeyFile, MinuteWindows, bearer_key

ACCESS_LOG = logging.getLogger("ray.serve")
REQUESTS_METRIC = "pd_door_requests"
TOKENS_METRIC = "pd_door_tokens"
# What metrics and logs call a request without a known key (never what it presented).
UNKNOWN_KEY = "-"
# Where the handler leaves the request's accounting for the response stream to finish.
_CALL_STATE = "front_door_call"


@dataclass
class _Call:
    key: str
    route: str
    started: float
    strip_usage: bool = False  # usage was asked of the engine for accounting, not by the client
    prompt_tokens: int = 0
    completion_tokens: int = 0


def openai_error(status: int, message: str, error_type: str, code: str,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    """An error as OpenAI's API sends it: {"error": {"message", "type", "param", "code"}}."""
    return JSONResponse(status_code=status, headers=headers,
                        content={"error": {"message": message, "type": error_type, "param": None, "code": code}})


class KeyedOpenAiIngress(OpenAiIngress):
    """OpenAiIngress behind API keys. `keys_file`: the mounted key table (front_door/keys.py);
    `ingress_replicas`: how many replicas share each key's limits; `code_version` is not read here:
    it is in the arguments so that new front door code restarts the app (Serve hashes its args)."""

    def __init__(self, llm_deployments, model_cards, *, keys_file: str, ingress_replicas: int = 1,
                 code_version: str = "", **kwargs: Any) -> None:
        super().__init__(llm_deployments, model_cards, **kwargs)
        self._keys = KeyFile(keys_file)
        self._windows = MinuteWindows(share=ingress_replicas)
        self._requests = metrics.Counter(
            REQUESTS_METRIC, description="Requests at the front door, by API key name and HTTP status.",
            tag_keys=("api_key", "route", "code"))
        self._tokens = metrics.Counter(
            TOKENS_METRIC, description="Tokens served, by API key name and kind (prompt, completion).",
            tag_keys=("api_key", "kind"))

    # ── the routes (the names Ray Serve LLM's DEFAULT_ENDPOINTS maps to paths) ──────────────────

    async def models(self, request: Request) -> Any:
        return await self._guarded(request, None, lambda _: OpenAiIngress.models(self))

    async def model_data(self, model: str, request: Request) -> Any:
        return await self._guarded(request, None, lambda _: OpenAiIngress.model_data(self, model))

    async def completions(self, request: Request) -> Any:
        return await self._generating(request, CompletionRequest, OpenAiIngress.completions)

    async def chat(self, request: Request) -> Any:
        return await self._generating(request, ChatCompletionRequest, OpenAiIngress.chat)

    async def embeddings(self, request: Request) -> Any:
        return await self._generating(request, EmbeddingRequest, OpenAiIngress.embeddings)

    async def transcriptions(self, request: Request) -> Any:
        return await self._generating(request, TranscriptionRequest, OpenAiIngress.transcriptions)

    async def score(self, request: Request) -> Any:
        return await self._generating(request, ScoreRequest, OpenAiIngress.score)

    async def tokenize(self, request: Request) -> Any:
        return await self._generating(request, TokenizeCompletionRequest, OpenAiIngress.tokenize)

    async def detokenize(self, request: Request) -> Any:
        return await self._generating(request, DetokenizeRequest, OpenAiIngress.detokenize)

    # ── the door ─────────────────────────────────────────────────────────────────────────────

    def _admit(self, request: Request) -> tuple[KeyEntry | None, Response | None]:
        """The caller's key entry, and the refusal to send instead of serving (None: serve)."""
        presented = bearer_key(request.headers.get("authorization"))
        entry = self._keys.current().lookup(presented) if presented else None
        if entry is None:
            return None, openai_error(
                401, "Incorrect or missing API key: send `Authorization: Bearer <key>` with a key of this "
                "endpoint (pdctl client-config prints it).", "invalid_request_error", "invalid_api_key",
                {"WWW-Authenticate": "Bearer"})
        refused = self._windows.admit(entry)
        if refused is not None:
            limit, retry_after = refused
            return entry, openai_error(
                429, f"Rate limit reached for API key {entry.name!r}: {limit} per minute. Try again in "
                f"{retry_after} s.", limit, "rate_limit_exceeded", {"Retry-After": str(retry_after)})
        return entry, None

    async def _generating(self, request: Request, body_type: Any, route: Callable[..., Awaitable[Any]]) -> Any:
        return await self._guarded(request, body_type, lambda body: route(self, body, request))

    async def _guarded(self, request: Request, body_type: Any,
                       handler: Callable[[Any], Awaitable[Any]]) -> Any:
        entry, refusal = self._admit(request)
        call = _Call(entry.name if entry else UNKNOWN_KEY, request.url.path, time.perf_counter())
        if refusal is not None:
            self._finish(call, refusal.status_code)
            return refusal
        setattr(request.state, _CALL_STATE, call)
        try:
            body = await self._body(request, body_type, call) if body_type is not None else None
            response = await handler(body)
        except BaseException as exc:
            self._finish(call, int(getattr(exc, "status_code", 400 if isinstance(exc, ValueError) else 500)))
            raise
        if isinstance(response, StreamingResponse):
            response.body_iterator = self._finishing(response.body_iterator, call)
        else:
            self._finish(call, response.status_code if isinstance(response, Response) else 200)
        return response

    @staticmethod
    async def _body(request: Request, body_type: Any, call: _Call) -> Any:
        if body_type is TranscriptionRequest:
            return body_type.model_validate(dict(await request.form()))
        try:
            data = await request.json()
        except ValueError as exc:  # the same 400 FastAPI's own body parsing gives (Ray's handler formats it)
            raise RequestValidationError([{"type": "json_invalid", "loc": ("body", 0), "msg": "JSON decode error",
                                           "input": {}, "ctx": {"error": str(exc)}}]) from None
        if isinstance(data, dict) and data.get("stream"):
            options = data.get("stream_options") or {}
            if not options.get("include_usage"):
                # Ask the engine for the usage chunk, counted here and not passed on.
                data["stream_options"] = {**options, "include_usage": True}
                call.strip_usage = True
        return body_type.model_validate(data)

    async def _get_response(self, *, body: Any, call_method: str,
                            raw_request: Request | None = None) -> AsyncGenerator[Any, None]:
        call: _Call | None = getattr(raw_request.state, _CALL_STATE, None) if raw_request is not None else None
        async for response in super()._get_response(body=body, call_method=call_method, raw_request=raw_request):
            if call is None:
                yield response
            elif isinstance(response, list):
                passed = [chunk for chunk in response if _counted(chunk, call)]
                if passed:  # Ray's stream writer takes no empty batch
                    yield passed
            elif _counted(response, call):
                yield response

    async def _finishing(self, stream: Any, call: _Call) -> AsyncGenerator[Any, None]:
        status = 200
        try:
            async for chunk in stream:
                yield chunk
        except BaseException:
            status = 499  # the client went away, or the stream failed, after its 200 was sent
            raise
        finally:
            self._finish(call, status)

    def _finish(self, call: _Call, status: int) -> None:
        tokens = call.prompt_tokens + call.completion_tokens
        if call.key != UNKNOWN_KEY:
            self._windows.charge(call.key, tokens)
        self._requests.inc(tags={"api_key": call.key, "route": call.route, "code": str(status)})
        for kind, count in (("prompt", call.prompt_tokens), ("completion", call.completion_tokens)):
            if count:
                self._tokens.inc(count, tags={"api_key": call.key, "kind": kind})
        ACCESS_LOG.info("front door: key=%s route=%s status=%d prompt_tokens=%d completion_tokens=%d ms=%.1f",
                        call.key, call.route, status, call.prompt_tokens, call.completion_tokens,
                        (time.perf_counter() - call.started) * 1000)


def _counted(response: Any, call: _Call) -> bool:
    """Count the usage a response carries; False for a usage-only chunk the client did not ask for."""
    if isinstance(response, str):
        if '"usage"' not in response:
            return True
        try:
            chunk = json.loads(response.strip().removeprefix("data: "))
        except ValueError:
            return True
        if not isinstance(chunk, dict):
            return True
        usage, choices = chunk.get("usage"), chunk.get("choices")
        prompt, completion = (usage.get("prompt_tokens"), usage.get("completion_tokens")) if usage else (0, 0)
    else:
        usage, choices = getattr(response, "usage", None), getattr(response, "choices", None)
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
    if not usage:
        return True
    call.prompt_tokens, call.completion_tokens = prompt or 0, completion or 0
    return not (call.strip_usage and choices == [])
