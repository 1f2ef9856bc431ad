"""What the preview says about the Hugging Face Hub, against a local stand-in for it (huggingface_hub's
own HTTP client, pointed at 127.0.0.1): a Hub that does not answer is told within a few seconds, a
model that does not exist is an error naming modelSource, and a gated one is told apart from both."""

from __future__ import annotations

import importlib
import json
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from serve_app.errors import ConfigError
from serve_app.model_facts import HUB_PROBE_TIMEOUT_S, read_model_facts

GATED = "acme/gated-3b"
# A small dense model that fits one L4 (its config.json's sized fields, and its index's total_size).
SMALL = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24, "num_attention_heads": 16,
         "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 32000, "max_position_embeddings": 32768,
         "torch_dtype": "bfloat16"}
SMALL_BYTES = 4_000_000_000


class FakeHub(BaseHTTPRequestHandler):
    """The Hub's answers for two repos: acme/gated-3b (metadata public, files need access); anything
    else does not exist."""

    def _answer(self, status: int, body: dict, error_code: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if error_code:
            self.send_header("X-Error-Code", error_code)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.startswith(f"/api/models/{GATED}"):
            self._answer(200, {"id": GATED, "private": False, "gated": "manual", "sha": "0" * 40})
        elif self.path.startswith(f"/{GATED}/resolve/"):
            self._answer(401, {"error": "Access to this model is restricted."}, "GatedRepo")
        else:
            self._answer(404, {"error": "Repository not found"}, "RepoNotFound")

    do_HEAD = do_GET

    def log_message(self, *args) -> None:
        pass


def online(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """huggingface_hub online against `endpoint` (it reads its environment at import; hf_cache's
    teardown undoes this and reloads it again)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    importlib.reload(huggingface_hub.constants)


@pytest.fixture
def hub(hf_cache, serve_http, monkeypatch):
    """huggingface_hub online, its endpoint this test's stand-in; returns hf_cache's `add`."""
    server = serve_http(ThreadingHTTPServer(("127.0.0.1", 0), FakeHub))
    online(monkeypatch, f"http://127.0.0.1:{server.server_address[1]}")
    return hf_cache


@pytest.fixture
def silent_hub(hf_cache, monkeypatch):
    """A Hub that accepts the connection and never answers (a black-holing proxy or firewall)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    online(monkeypatch, f"http://127.0.0.1:{listener.getsockname()[1]}")
    yield hf_cache
    listener.close()


def test_a_model_that_does_not_exist_is_an_error_naming_model_source(hub, settings_for):
    with pytest.raises(ConfigError) as caught:
        settings_for(modelSource="acme/no-such-model", modelId="x")
    assert caught.value.setting == "modelSource"
    assert str(caught.value).startswith("modelSource: got 'acme/no-such-model'")
    assert "no such model (404)" in str(caught.value)


def test_a_gated_model_says_it_needs_a_token(hub):
    facts = read_model_facts(GATED)
    assert facts.gated and not facts.missing and facts.architecture is None
    assert facts.problem.startswith("gated: needs a token")


def test_a_gated_model_with_no_hf_token_is_a_finding(hub, settings_for):
    hub(GATED, SMALL, SMALL_BYTES)  # sized from the cache; the cluster still has to download it
    settings = settings_for(modelSource=GATED, modelId="small")
    (finding,) = [w for w in settings.warnings if w.startswith("hfToken:")]
    assert f"{GATED} is gated and no token is set" in finding


def test_a_silent_hub_is_told_within_seconds_and_the_cache_still_serves(silent_hub):
    silent_hub("acme/small-3b", SMALL, SMALL_BYTES)
    started = time.monotonic()
    cached = read_model_facts("acme/small-3b")
    missing = read_model_facts("acme/not-cached")
    elapsed = time.monotonic() - started
    assert elapsed < 2 * HUB_PROBE_TIMEOUT_S + 2, f"{elapsed:.1f} s for two probes"
    assert cached.architecture is not None and cached.architecture.checkpoint_bytes == SMALL_BYTES
    assert not missing.missing  # unreachable is not "does not exist"
    assert missing.problem == (f"the Hub did not answer within {HUB_PROBE_TIMEOUT_S:g} s and the model is not "
                               "in the Hugging Face cache")


def test_a_recorded_gated_model_is_a_finding_without_the_hub(settings_for, monkeypatch):
    # Offline the Hub cannot say it; facts/models.py records that Meta's Llama repositories are gated.
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    settings = settings_for(modelSource="meta-llama/Llama-3.1-8B-Instruct")
    (finding,) = [w for w in settings.warnings if w.startswith("hfToken:")]
    assert "meta-llama/Llama-3.1-8B-Instruct is gated and no token is set" in finding
    assert not [w for w in settings_for(modelSource="Qwen/Qwen3-8B").warnings if w.startswith("hfToken:")]
