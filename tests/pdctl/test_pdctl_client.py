"""Client commands against a real OpenAI-compatible HTTP server on 127.0.0.1 (stdlib, streaming SSE
with known token timings), driven through the CLI as a user runs it."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import looptime
import pytest
from typer.testing import CliRunner

from measure.latency import summarize
from pdctl.bench import BenchSpec, run_bench
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


# -------------------------------------------------------------------------------- bench

def test_bench_over_http_sends_what_it_should_and_summarizes_every_request(server, cli, tmp_path):
    out = tmp_path / "bench.json"
    result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "-n", 6, "-c", 3,
                 "--input-tokens", 40, "--output-tokens", 5, "--output", "json", "--json-out", out)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary == json.loads(out.read_text())
    assert summary["requests"] == {"total": 6, "succeeded": 6, "failed": 0}
    # Timing is checked exactly on a controlled clock (test_bench_timings_on_a_controlled_clock);
    # over real sockets on a shared machine only causality holds: no token before the server's delay.
    assert summary["ttft_s"]["p50"] >= TTFT
    assert summary["e2e_s"]["p50"] >= TTFT + 4 * ITL
    assert summary["output_tokens"] == 30 and summary["input_tokens"] == 6 * 40
    assert summary["output_tokens_per_s"] == pytest.approx(30 / summary["wall_s"])
    assert server.max_in_flight == 3
    # What each request asked for: the requested output length, forced by ignore_eos, with usage.
    assert {r["max_tokens"] for r in server.requests} == {5}
    assert all(r["ignore_eos"] is True and r["stream_options"] == {"include_usage": True}
               for r in server.requests)
    assert len({r["messages"][0]["content"] for r in server.requests}) == 6  # no shared prefix cache hits


class ScriptedStream:
    """A streamed chat completion as the OpenAI SDK yields it: a role-only chunk, then one content
    chunk per token after TTFT and every ITL (asyncio.sleep on the test's loop clock), then usage."""

    def __init__(self, tokens: int, prompt_tokens: int):
        self.tokens, self.prompt_tokens = tokens, prompt_tokens

    async def __aiter__(self):
        from openai.types.chat import ChatCompletionChunk

        def chunk(**fields):
            return ChatCompletionChunk.model_validate(
                {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": MODEL, **fields})

        yield chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        await asyncio.sleep(TTFT)
        for i in range(self.tokens):
            if i:
                await asyncio.sleep(ITL)
            yield chunk(choices=[{"index": 0, "delta": {"content": f" tok{i}"}}])
        yield chunk(choices=[], usage={"prompt_tokens": self.prompt_tokens, "completion_tokens": self.tokens,
                                       "total_tokens": self.prompt_tokens + self.tokens})


class ScriptedClient:
    """Just enough of `openai.AsyncOpenAI` for the bench: chat.completions.create(stream=True)."""

    def __init__(self):
        self.chat = self
        self.completions = self
        self.in_flight = self.max_in_flight = 0

    async def create(self, *, messages, max_tokens, **_):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        stream = ScriptedStream(max_tokens, len(messages[0]["content"].split()))

        async def tracked():
            try:
                async for item in stream:
                    yield item
            finally:
                self.in_flight -= 1

        return tracked()


def test_bench_timings_on_a_controlled_clock():
    """On a loop whose clock only advances when every task waits (looptime), the server's delays are
    the only time that passes: the bench's TTFT, ITL, TPOT, E2E and wall time must equal them exactly,
    however slow or busy the machine running the test is."""
    client = ScriptedClient()
    spec = BenchSpec(requests=6, concurrency=3, input_tokens=40, output_tokens=5)
    loop = looptime.new_event_loop(start=0)
    try:
        samples, wall = loop.run_until_complete(run_bench(client, MODEL, spec))
    finally:
        loop.close()
    summary = summarize(samples, wall)
    assert summary["requests"] == {"total": 6, "succeeded": 6, "failed": 0}
    e2e = TTFT + 4 * ITL
    for sample in samples:
        assert sample.ttft == pytest.approx(TTFT, abs=1e-6)  # the role-only chunk is not a token
        assert sample.itls == pytest.approx([ITL] * 4, abs=1e-6)
        assert sample.tpot == pytest.approx(ITL, abs=1e-6)
        assert sample.e2e == pytest.approx(e2e, abs=1e-6)
    assert summary["output_tokens"] == 30 and summary["input_tokens"] == 6 * 40
    # 6 requests, 3 at a time: two waves of one request's E2E each.
    assert client.max_in_flight == 3
    assert wall == pytest.approx(2 * e2e, abs=1e-6)
    assert summary["output_tokens_per_s"] == pytest.approx(30 / (2 * e2e))


def test_bench_table_and_failure_exit(server, cli):
    result = cli("bench", "--base-url", server.base_url, "--model", MODEL, "-n", 2, "-c", 2,
                 "--input-tokens", 5, "--output-tokens", 3)
    assert result.exit_code == 0, result.output
    for label in ("TTFT", "ITL", "TPOT", "E2E", "p99", "tok/s"):
        assert label in result.stdout
    dead = cli("bench", "--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, "-n", 2, "-c", 1,
               "--output", "json", "--timeout", 2)
    assert dead.exit_code == 1
    assert "2 of 2 requests failed" in dead.stderr


# -------------------------------------------------------------------------- smoke / chat

def test_smoke_passes_on_a_good_endpoint(server, cli):
    result = cli("smoke", "--base-url", server.base_url, "--model", MODEL)
    assert result.exit_code == 0, result.output
    assert "Prefill and decode run on different GPUs." in result.stdout
    assert server.requests[-1]["model"] == MODEL


def test_smoke_fails_when_the_endpoint_serves_another_model(server, cli):
    server.served_model = "llama-3"
    result = cli("smoke", "--base-url", server.base_url, "--model", MODEL)
    assert result.exit_code == 1
    assert "serves ['llama-3'], not the stack's model 'qwen3.5-9b'" in result.stderr


def test_smoke_fails_when_the_answer_comes_from_another_model(server, cli):
    server.answer_model = "llama-3"
    result = cli("smoke", "--base-url", server.base_url, "--model", MODEL)
    assert result.exit_code == 1
    assert "came from model 'llama-3'" in result.stderr


def test_smoke_fails_on_an_empty_answer(server, cli):
    server.answer = "   "
    result = cli("smoke", "--base-url", server.base_url, "--model", MODEL)
    assert result.exit_code == 1
    assert "empty answer" in result.stderr


def test_smoke_reads_the_model_from_stack_outputs(server, cli, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"modelId": MODEL}))
    result = cli("smoke", "--base-url", server.base_url, "--from-file", outputs)
    assert result.exit_code == 0, result.output


def test_smoke_without_a_model_says_how_to_give_one(cli):
    result = cli("smoke", "--base-url", "http://127.0.0.1:9/v1")
    assert result.exit_code == 2
    assert "--model" in result.stderr


def test_smoke_on_an_unreachable_endpoint_is_one_line_not_a_traceback(cli):
    result = cli("smoke", "--base-url", "http://127.0.0.1:9/v1", "--model", MODEL, "--timeout", 2)
    assert result.exit_code == 1
    assert "GET /v1/models failed" in result.stderr
    assert "Traceback" not in result.output


def test_chat_streams_the_answer(server, cli):
    result = cli("chat", "hello", "--base-url", server.base_url, "--model", MODEL, "--max-tokens", 3)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "tok0 tok1 tok2"
    assert server.requests[-1]["stream"] is True


def test_chat_refuses_a_model_the_endpoint_does_not_serve(server, cli):
    result = cli("chat", "hello", "--base-url", server.base_url, "--model", "other")
    assert result.exit_code == 1
    assert "the endpoint serves ['qwen3.5-9b'], not the stack's model 'other'" in result.stderr


def test_env_vars_from_client_config_drive_the_client(server, cli, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", MODEL)
    assert cli("smoke").exit_code == 0


# --------------------------------------------------------------------------- client-config

OUTPUTS = {"modelId": MODEL, "namespace": "inference", "rayServiceName": "ray-llm",
           "serveServiceName": "ray-llm-serve-svc", "servePort": 8000}


def test_client_config_from_saved_outputs(cli, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    written = tmp_path / "client.json"
    result = cli("client-config", "--from-file", outputs, "--write", written)
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)
    assert config == {"base_url": "http://127.0.0.1:8000/v1", "model": MODEL, "api_key": "not-needed"}
    assert json.loads(written.read_text()) == config
    env = cli("client-config", "--from-file", outputs, "--env", "--local-port", 9000).stdout
    assert env.splitlines() == ["export OPENAI_BASE_URL=http://127.0.0.1:9000/v1",
                                "export OPENAI_API_KEY=not-needed", f"export OPENAI_MODEL={MODEL}"]


def test_client_config_asks_the_pulumi_cli(cli, tmp_path, monkeypatch):
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    f"echo '{json.dumps(OUTPUTS)}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = cli("client-config", "--stack", "dev")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == MODEL
    assert (tmp_path / "args").read_text().split() == ["stack", "output", "--json", "--show-secrets",
                                                       "--stack", "dev"]


def test_client_config_names_the_missing_output(cli, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"namespace": "inference"}))
    result = cli("client-config", "--from-file", outputs)
    assert result.exit_code == 1
    assert "stack output 'modelId' is missing (have: namespace)" in result.stderr


def test_client_config_without_pulumi_points_to_from_file(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = cli("client-config")
    assert result.exit_code == 1
    assert "--from-file" in result.stderr


def test_client_config_env_survives_eval_with_shell_characters(cli, tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(OUTPUTS))
    url = "https://gw.example.com/v1?team=a&env=dev"
    env = cli("client-config", "--from-file", outputs, "--env", "--base-url", url).stdout
    shell = subprocess.run(["sh", "-c", f'{env}\nprintf "%s" "$OPENAI_BASE_URL"'], capture_output=True,
                           text=True, check=True)
    assert shell.stdout == url


def test_client_config_when_the_pulumi_cli_prints_no_json(cli, tmp_path, monkeypatch):
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho 'error: no stack selected'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = cli("client-config")
    assert result.exit_code == 1
    assert "did not print JSON" in result.stderr and "no stack selected" in result.stderr
