"""A stand-in for vLLM behind the REAL Ray Serve LLM app, for CPU rehearsals of the lab's fault, soak
and bad-request runs.

Ray Serve LLM builds its LLMServer replicas with the engine class named by `RAYLLM_VLLM_ENGINE_CLS`
(ray/llm/_internal/serve/core/server/llm_server.py, "for testing or escape-hatch"): with it set to
`lab.fake_engine:FakeVLLMEngine`, `build_pd_openai_app(the stack's rendered args)` runs unchanged —
the real OpenAI ingress and its request validation, the real prefill/decode orchestration and NIXL
connector backend (ports, engine ids) — and only the engine is this class. What it keeps of vLLM:

- request validation by vLLM's own code: the request's `build_tok_params(model_config)` and
  `TokenizeParams.apply_post_tokenization` (prompt and max_tokens against max_model_len), an empty
  prompt refused with vLLM's message (v1/engine/input_processor.py), every error turned into the
  response vLLM sends by vLLM's `create_error_response` (400 BadRequestError for validation);
- an engine core in a process of its own, like vLLM's EngineCore: when it dies, requests fail with a
  500 and `check_health` raises, so Serve replaces the replica — what the lab's fault run kills;
- a scheduler that runs `MAX_RUNNING` requests at a time and queues the rest (vLLM's max_num_seqs);
- the PD handshake: prefill answers with kv_transfer_params, decode hand-shakes (and logs the NIXL
  lines the lab's evidence scan reads) when it first sees a prefill engine id, and caches the peer
  by id as vLLM does: a prefill engine restarted under its old id fails every pull, as on the H200.

What it does not do: load a model. Text is tokenized one token per UTF-8 byte; outputs are a
deterministic function of the prompt (greedy PD == colocated holds by construction, and across a
restart); a chat request without max_tokens stops after `DEFAULT_CHAT_TOKENS`, where vLLM would run
to the context limit.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from types import SimpleNamespace
from typing import Any

from ray.llm._internal.serve.core.configs.openai_api_models import (
    ChatCompletionResponse,
    ChatCompletionStreamResponse,
    CompletionResponse,
    CompletionStreamResponse,
    ErrorResponse,
)
from ray.llm._internal.serve.core.engine.protocol import LLMEngine

ENGINE_CLASS_PATH = "lab.fake_engine:FakeVLLMEngine"
ENGINE_CLASS_ENV = "RAYLLM_VLLM_ENGINE_CLS"
# The marker on the engine core's command line (vLLM names its process VLLM::EngineCore_DP0).
ENGINE_CORE_MARKER = "FakeVLLM::EngineCore"
MAX_RUNNING = 8
DEFAULT_CHAT_TOKENS = 32
SECONDS_PER_TOKEN = 0.002
FIRST_TOKEN_S = 0.01
VOCAB_LOW, VOCAB_HIGH = 4, 504


def next_token(context: list[int]) -> tuple[int, float]:
    """The greedy next token of a context, and its margin over the runner-up (nats)."""
    value = (sum((i + 1) * t for i, t in enumerate(context[-8:])) * 2654435761) % 1000
    return VOCAB_LOW + value % (VOCAB_HIGH - VOCAB_LOW), (value % 37) / 10


def tokenize(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def _error(exc: Exception) -> ErrorResponse:
    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response

    return ErrorResponse(**create_error_response(exc).model_dump())


def _engine_core_command() -> list[str]:
    # The child dies with its parent (PR_SET_PDEATHSIG), as vLLM's engine core does with the replica.
    script = ("import ctypes, signal, time; ctypes.CDLL('libc.so.6').prctl(1, signal.SIGKILL); "
              "[time.sleep(3600) for _ in iter(int, 1)]")
    return [sys.executable, "-c", script, ENGINE_CORE_MARKER]


class EngineDead(RuntimeError):
    """What vLLM raises once its engine core process is gone (EngineDeadError)."""


class StaleNixlPeer(RuntimeError):
    """A KV pull against a prefill engine's previous NIXL registration."""


class FakeVLLMEngine(LLMEngine):
    def __init__(self, llm_config: Any) -> None:
        self.llm_config = llm_config
        # The real connector backend: NIXL side-channel port and host, the engine id made unique.
        llm_config.setup_engine_backend()
        kv = llm_config.engine_kwargs.get("kv_transfer_config") or {}
        self.engine_id = kv.get("engine_id")
        self.role = kv.get("kv_role")
        self.model_config = SimpleNamespace(max_model_len=int(llm_config.engine_kwargs["max_model_len"]))
        self.model_id = llm_config.model_id
        self.core: subprocess.Popen | None = None
        self.running = asyncio.Semaphore(MAX_RUNNING)
        # What a NIXL handshake learns of a prefill engine (its agent's memory registration), cached
        # by engine id as vLLM's NixlConnector caches it; `agent` is this engine start's own.
        self.peers: dict[str, str] = {}
        self.agent = uuid.uuid4().hex

    async def start(self) -> None:
        self.core = subprocess.Popen(_engine_core_command())
        print(f"Fake engine {self.engine_id or self.model_id}: engine core pid {self.core.pid}", flush=True)
        # vLLM's KV capacity line (v1/core/kv_cache_utils.py) for the lab's log reading: what this
        # scheduler holds, MAX_RUNNING sequences of the context limit.
        tokens = MAX_RUNNING * self.model_config.max_model_len
        print(f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
              f"{self.model_config.max_model_len:,} tokens per request: {MAX_RUNNING:.2f}x", flush=True)
        if self.engine_id:
            print(f"Creating v1 connector with name: NixlConnector and engine_id: {self.engine_id}", flush=True)
            print("Backend UCX was instantiated", flush=True)

    def routing_stats(self) -> dict:
        return {}

    async def resolve_lora(self, lora_model: Any) -> None:
        raise NotImplementedError("the fake engine serves no LoRA adapters")

    async def reset_prefix_cache(self) -> None:
        """Nothing is cached."""

    async def check_health(self) -> None:
        if self.core is None or self.core.poll() is not None:
            raise EngineDead("engine core process exited")

    # ── requests ──────────────────────────────────────────────────────────────────────────────

    def _validated_prompt(self, request: Any, token_ids: list[int]) -> list[int]:
        from vllm.exceptions import VLLMValidationError

        params = request.build_tok_params(self.model_config)
        tokens = params.apply_post_tokenization(None, {"prompt_token_ids": token_ids})["prompt_token_ids"]
        if not tokens:
            raise VLLMValidationError("The decoder prompt cannot be empty")
        return tokens

    def _generate(self, prompt: list[int], count: int) -> list[tuple[int, float]]:
        context, steps = list(prompt), []
        for _ in range(count):
            token, margin = next_token(context)
            steps.append((token, margin))
            context.append(token)
        return steps

    def _kv_params(self, request: Any) -> dict[str, Any] | None:
        """Prefill: what decode needs to pull the KV. Decode: pull it from the prefill engine, hand-
        shaking with an engine id seen for the first time.

        `fake_agent` stands for the prefill engine's live NIXL registration (the real params carry
        none: decode learns it in the handshake). A prefill engine that restarted under the same id
        is not hand-shaken again, and the pull fails as vLLM's does against the dead registration.
        """
        params = getattr(request, "kv_transfer_params", None) or {}
        if params.get("do_remote_decode"):
            return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [0],
                    "remote_engine_id": self.engine_id, "remote_host": os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST"),
                    "remote_port": os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT"), "tp_size": 1,
                    "fake_agent": self.agent}
        peer = params.get("remote_engine_id")
        if not (params.get("do_remote_prefill") and peer):
            return None
        if peer not in self.peers:
            self.peers[peer] = params.get("fake_agent", "")
            print(f"NIXL compatibility check passed (remote engine {peer})", flush=True)
            print("Transfer plan: TransferTopology(tp_ratio=1)", flush=True)
        elif self.peers[peer] != params.get("fake_agent", ""):
            raise StaleNixlPeer(f"transfer_setup_failed: KV read from engine {peer} failed: its NIXL agent "
                                "is not the one hand-shaken (the engine restarted under the same id)")
        return None

    async def _run(self, request: Any, prompt_ids: list[int], default_tokens: int, chat: bool):
        try:
            await self.check_health()
            prompt = self._validated_prompt(request, prompt_ids)
        except EngineDead as exc:
            yield self._dead(exc)
            return
        except Exception as exc:  # vLLM answers a bad request with its error response, not a crash
            yield _error(exc)
            return
        try:
            kv_params = self._kv_params(request)
        except StaleNixlPeer as exc:
            yield self._dead(exc)
            return
        count = getattr(request, "max_tokens", None) or getattr(request, "max_completion_tokens", None) \
            or default_tokens
        steps = self._generate(prompt, min(count, self.model_config.max_model_len - len(prompt)))
        async with self.running:
            await asyncio.sleep(FIRST_TOKEN_S)
            if request.stream:
                async for chunk in self._stream(request, prompt, steps, chat):
                    yield chunk
                return
            await asyncio.sleep(SECONDS_PER_TOKEN * len(steps))
            if self.core is None or self.core.poll() is not None:
                yield self._dead(EngineDead("engine core process exited"))
                return
            yield self._response(request, prompt, steps, chat, kv_params)

    def _dead(self, exc: Exception) -> ErrorResponse:
        from vllm.exceptions import VLLMServerError

        return _error(VLLMServerError(str(exc)))

    def _usage(self, prompt: list[int], steps: list) -> dict[str, int]:
        return {"prompt_tokens": len(prompt), "completion_tokens": len(steps),
                "total_tokens": len(prompt) + len(steps)}

    def _response(self, request: Any, prompt: list[int], steps: list, chat: bool, kv_params: dict | None):
        text = "".join(f" w{t}" for t, _ in steps)
        usage = self._usage(prompt, steps)
        if chat:
            return ChatCompletionResponse(model=self.model_id, usage=usage, kv_transfer_params=kv_params, choices=[
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}])
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "length",
                                  "token_ids": [t for t, _ in steps]}
        if request.logprobs:
            choice["logprobs"] = {
                "tokens": [f"token_id:{t}" for t, _ in steps],
                "token_logprobs": [-0.1 for _ in steps],
                "top_logprobs": [{f"token_id:{t}": -0.1, f"token_id:{t + 1}": -0.1 - m} for t, m in steps]}
        return CompletionResponse(model=self.model_id, usage=usage, kv_transfer_params=kv_params, choices=[choice])

    async def _stream(self, request: Any, prompt: list[int], steps: list, chat: bool):
        for token, _ in steps:
            await asyncio.sleep(SECONDS_PER_TOKEN)
            if self.core is None or self.core.poll() is not None:
                # vLLM ends a stream whose engine died with an error event.
                yield f"data: {self._dead(EngineDead('engine core process exited')).model_dump_json()}\n\n"
                return
            if chat:
                chunk: Any = ChatCompletionStreamResponse(model=self.model_id, choices=[
                    {"index": 0, "delta": {"content": f" w{token}"}}])
            else:
                chunk = CompletionStreamResponse(model=self.model_id, choices=[
                    {"index": 0, "text": f" w{token}", "token_ids": [token]}])
            yield f"data: {chunk.model_dump_json(exclude_none=True)}\n\n"
        options = getattr(request, "stream_options", None)
        if options is not None and options.include_usage:
            kind = ChatCompletionStreamResponse if chat else CompletionStreamResponse
            last = kind(model=self.model_id, choices=[], usage=self._usage(prompt, steps))
            yield f"data: {last.model_dump_json(exclude_none=True)}\n\n"
        yield "data: [DONE]\n\n"

    async def completions(self, request: Any, raw_request_info: Any = None):
        prompt = request.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
            prompt = prompt[0]  # one prompt per request in the lab
        ids = list(prompt) if isinstance(prompt, list) else tokenize(prompt)
        async for chunk in self._run(request, ids, 16, chat=False):  # 16: OpenAI's and vLLM's default
            yield chunk

    async def chat(self, request: Any, raw_request_info: Any = None):
        text = "".join(f"<{m.get('role')}>{m.get('content')}" for m in request.messages)
        ids = tokenize(text + "<assistant>") if request.messages else []
        async for chunk in self._run(request, ids, DEFAULT_CHAT_TOKENS, chat=True):
            yield chunk

    async def embeddings(self, request: Any, raw_request_info: Any = None):
        yield _error(NotImplementedError("the fake engine generates text only"))

    async def transcriptions(self, request: Any, raw_request_info: Any = None):
        yield _error(NotImplementedError("the fake engine generates text only"))


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def env() -> dict[str, str]:
    """The environment that makes Ray Serve LLM build this engine (set before ray.init)."""
    return {ENGINE_CLASS_ENV: ENGINE_CLASS_PATH}



def cpu_placement(llm_config: dict[str, Any]) -> dict[str, Any]:
    """A copy of one phase's LLMConfig dict that a CPU-only Ray can place: no GPU in its bundle; the
    phase's Ray resource (pd-prefill / pd-decode) stays, so the rehearsal's Ray must advertise it as
    the GPU host's does."""
    placed = dict(llm_config)
    bundle = llm_config.get("placement_group_config", {}).get("bundle_per_worker", {})
    phase_resources = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")}
    placed["placement_group_config"] = {"bundles": [{"CPU": 0.1, **phase_resources}], "strategy": "PACK"}
    return placed

