"""The lab's fake vLLM engine, counting each generate call it gets in a file (the Ray workers run in
processes of their own): what proves a refused request never reached an engine."""

from __future__ import annotations

import os

from lab.fake_engine import FakeVLLMEngine

CALLS_FILE_ENV = "FRONT_DOOR_TEST_ENGINE_CALLS"
ENGINE_CLASS_PATH = "counting_engine:CountingEngine"


def _count(kind: str) -> None:
    with open(os.environ[CALLS_FILE_ENV], "a", encoding="utf-8") as calls:
        calls.write(kind + "\n")


class CountingEngine(FakeVLLMEngine):
    async def completions(self, request, raw_request_info=None):
        _count("completions")
        async for chunk in super().completions(request, raw_request_info):
            yield chunk

    async def chat(self, request, raw_request_info=None):
        _count("chat")
        async for chunk in super().chat(request, raw_request_info):
            yield chunk
