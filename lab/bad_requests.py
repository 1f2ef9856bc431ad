"""The requests real clients get wrong, sent to a served PD app; each must get a clear 4xx, the burst
must be queued (or refused with 429/503), no replica may restart, and a normal request must
succeed afterwards.

Who answers what, in the stack's app (Ray Serve LLM's `build_pd_openai_app`, Ray 2.60 / vLLM 0.29;
docs/SOURCES.md#bad-request-handling):
- malformed JSON, a wrong field type: Ray Serve LLM's OpenAI ingress (FastAPI parsing the request
  into vLLM's protocol models) → 400;
- an unknown model: the ingress → 404;
- a prompt longer than maxModelLen, max_tokens beyond it, an empty message list: the engine (vLLM's
  TokenizeParams and input processor), its error response passed back through the prefill/decode
  orchestrator and the ingress → 400;
- a burst far above what the engines run at once: Ray Serve LLM gives its deployments
  max_ongoing_requests 1e9 (ray/llm/_internal/serve/constants.py DEFAULT_MAX_ONGOING_REQUESTS), so
  nothing is refused at the Serve layer: the engine's scheduler runs max_num_seqs and queues the
  rest, and every request is answered, later. The stack sets nothing for this: a client that
  cannot wait sets its own timeout.

`run_bad_requests(base_url, model_id, max_model_len, replicas)` sends them and returns the results;
`replicas()` returns the running replica ids (to prove none restarted). Used by the CPU test tier
(tests/lab/test_lab_bad_requests.py, real ingress, fake engines) and the GPU run
(`python -m lab bad-requests`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from lab.workload import json_or_text

REQUEST_TIMEOUT_S = 120


@dataclass(frozen=True)
class BadRequest:
    name: str
    path: str
    body: Any  # a dict sent as JSON, or bytes sent as they are
    expect: tuple[int, ...]  # acceptable HTTP statuses
    answered_by: str


def bad_requests(model_id: str, max_model_len: int) -> list[BadRequest]:
    """The list, for a model served as `model_id` with `max_model_len` tokens of context."""
    chat = "/v1/chat/completions"
    completions = "/v1/completions"
    return [
        BadRequest("prompt longer than maxModelLen", completions,
                   {"model": model_id, "prompt": [7] * (max_model_len + 16), "max_tokens": 4},
                   (400,), "engine (vLLM TokenizeParams)"),
        BadRequest("max_tokens beyond maxModelLen", completions,
                   {"model": model_id, "prompt": [7] * 16, "max_tokens": max_model_len + 1},
                   (400,), "engine (vLLM TokenizeParams)"),
        BadRequest("prompt + max_tokens beyond maxModelLen", completions,
                   {"model": model_id, "prompt": [7] * (max_model_len // 2 + 8), "max_tokens": max_model_len // 2},
                   (400,), "engine (vLLM TokenizeParams)"),
        BadRequest("malformed JSON", chat, b'{"model": "' + model_id.encode() + b'", "messages": [',
                   (400,), "ingress (FastAPI)"),
        BadRequest("wrong field type", chat,
                   {"model": model_id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"},
                   (400,), "ingress (vLLM protocol model)"),
        BadRequest("messages not a list", chat, {"model": model_id, "messages": "hi"}, (400,),
                   "ingress (vLLM protocol model)"),
        BadRequest("unknown model", chat,
                   {"model": model_id + "-nope", "messages": [{"role": "user", "content": "hi"}]},
                   (404,), "ingress"),
        BadRequest("empty message list", chat, {"model": model_id, "messages": [], "max_tokens": 4},
                   (400,), "engine (chat template / empty prompt)"),
    ]


async def _send(client: httpx.AsyncClient, base_url: str, path: str, body: Any) -> tuple[int, Any]:
    """POST `body` (bytes as they are, anything else as JSON): (HTTP status, the answer's JSON or text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(base_url + path, content=data, headers={"Content-Type": "application/json"})
    return response.status_code, json_or_text(response)


def _message(answer: Any) -> str:
    if isinstance(answer, dict):
        error = answer.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))[:300]
        return str(answer.get("detail", answer))[:300]
    return str(answer)[:300]


def normal_request(model_id: str) -> dict[str, Any]:
    return {"model": model_id, "messages": [{"role": "user", "content": "the prefill engine sends the cache"}],
            "max_tokens": 8, "temperature": 0.0}


async def _burst(client: httpx.AsyncClient, base_url: str, model_id: str, size: int) -> dict[str, Any]:
    started = time.perf_counter()

    async def one() -> tuple[int, float]:
        status, _ = await _send(client, base_url, "/v1/completions",
                                {"model": model_id, "prompt": [9] * 32, "max_tokens": 16, "temperature": 0.0})
        return status, time.perf_counter() - started

    results = await asyncio.gather(*(one() for _ in range(size)), return_exceptions=True)
    statuses: dict[str, int] = {}
    latencies = []
    for result in results:
        key = type(result).__name__ if isinstance(result, BaseException) else str(result[0])
        statuses[key] = statuses.get(key, 0) + 1
        if not isinstance(result, BaseException):
            latencies.append(result[1])
    return {"requests": size, "statuses": statuses, "first_answer_s": round(min(latencies), 3) if latencies else None,
            "last_answer_s": round(max(latencies), 3) if latencies else None}


def burst_ok(burst: dict[str, Any]) -> bool:
    """Every request of the burst answered: 200 (queued) or refused as overload (429, 503), none lost."""
    return set(burst["statuses"]) <= {"200", "429", "503"} and sum(burst["statuses"].values()) == burst["requests"]


async def run_bad_requests(base_url: str, model_id: str, max_model_len: int, *, burst_size: int,
                           replicas: Callable[[], dict[str, frozenset[str]]]) -> dict[str, Any]:
    """Send every bad request, then the burst, then a normal request; check no replica restarted."""
    before = replicas()
    results = []
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
        for request in bad_requests(model_id, max_model_len):
            status, answer = await _send(client, base_url, request.path, request.body)
            results.append({"name": request.name, "status": status, "expected": list(request.expect),
                            "ok": status in request.expect, "answered_by": request.answered_by,
                            "message": _message(answer)})
        burst = await _burst(client, base_url, model_id, burst_size)
        status, answer = await _send(client, base_url, "/v1/chat/completions", normal_request(model_id))
    after = replicas()
    restarted = {name: sorted(ids - after.get(name, frozenset())) for name, ids in before.items()
                 if ids - after.get(name, frozenset())}
    return {
        "requests": results,
        "burst": {**burst, "ok": burst_ok(burst)},
        "next_normal_request": {"status": status, "ok": status == 200, "message": _message(answer)},
        "replicas_before": {k: sorted(v) for k, v in before.items()},
        "replicas_restarted": restarted,
        "passed": all(r["ok"] for r in results) and burst_ok(burst) and status == 200 and not restarted,
    }
