"""The OpenAI-compatible endpoint the client commands and the bench are tested against: a real HTTP
server on 127.0.0.1 (stdlib, streaming SSE), whose first token comes TTFT after the request and each
next one ITL later, and which records what it was sent."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from pdctl.cli import app

MODEL = "qwen3.5-9b"
TTFT = 0.15  # seconds before the first token
ITL = 0.04  # seconds between tokens


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.served_model = MODEL
        self.answer_model = MODEL
        self.answer = "Prefill and decode run on different GPUs."
        self.requests: list[dict] = []
        self.events: list[tuple[str, int]] = []  # ("start" | "end", max_tokens of the request), in server order
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, *args):
        pass

    def _json(self, body: dict, status: int = 200):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self._json({"object": "list", "data": [
                {"id": self.server.served_model, "object": "model", "created": 0, "owned_by": "ray"}]})
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        if self.path != "/v1/chat/completions":
            return self._json({"error": {"message": "not found"}}, 404)
        if body.get("stream"):
            return self._stream(body)
        self._json({
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": self.server.answer_model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.server.answer}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        })

    def _stream(self, body: dict):
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
            server.events.append(("start", body.get("max_tokens")))
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            tokens = int(body.get("max_tokens") or 4)
            prompt_tokens = len(body["messages"][0]["content"].split())

            def send(payload):
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

            def chunk(delta, finish=None):
                return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            send(chunk({"role": "assistant", "content": ""}))  # role-only chunk: not a token
            time.sleep(TTFT)
            for i in range(tokens):
                if i:
                    time.sleep(ITL)
                send(chunk({"content": f" tok{i}"}))
            send(chunk({}, "length"))
            if (body.get("stream_options") or {}).get("include_usage"):
                send({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                      "choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                               "completion_tokens": tokens,
                                               "total_tokens": prompt_tokens + tokens}})
            self.wfile.write(b"data: [DONE]\n\n")
        finally:
            with server.lock:
                server.in_flight -= 1
                server.events.append(("end", body.get("max_tokens")))


@pytest.fixture
def server():
    fake = FakeOpenAI()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


@pytest.fixture
def cli(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture
def server():
    fake = FakeOpenAI()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


@pytest.fixture
def cli(monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke
