"""The front door on real Ray Serve, on the CPU: the dev stack's rendered PD app (`build_pd_openai_app`
with the keyed ingress the render names) with the lab's fake vLLM engines, each generate call
counted. An OpenAI SDK client made from `clientConfig` and a key gets a completion; a missing, wrong,
revoked or over-limit key gets its status in OpenAI's error format and no engine call. About a
minute: Ray starts and three replicas deploy."""

from __future__ import annotations

import copy
import json
import os
import secrets
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from front_door.keys import KeyLimits, key_table_document

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SALT = "test-salt"
# Random as real keys are (a key of 40 'f' would match Ray's all-f nil ids in the exposition).
KEYS = {name: secrets.token_hex(24) for name in ("app-team", "tight", "frugal", "leaving")}
LIMITS = {"app-team": KeyLimits(), "tight": KeyLimits(requests_per_minute=2),
          "frugal": KeyLimits(tokens_per_minute=50), "leaving": KeyLimits()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_keys(path: Path, keys: dict[str, str]) -> None:
    # As the kubelet updates a mounted Secret: a new file swapped in, never one edited in place.
    staged = path.with_suffix(".new")
    staged.write_text(key_table_document(SALT, keys, LIMITS))
    os.replace(staged, path)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, settings_for):
    pytest.importorskip("ray.serve.llm")
    import sys

    import ray
    from ray import serve
    from ray.serve.llm import build_pd_openai_app

    from lab.fake_engine import ENGINE_CLASS_ENV, cpu_placement
    from lab.runner import phase_resources

    sys.path.insert(0, str(HERE))
    from counting_engine import CALLS_FILE_ENV, ENGINE_CLASS_PATH

    work = tmp_path_factory.mktemp("front-door")
    keys_file, calls_file = work / "keys.json", work / "engine-calls"
    write_keys(keys_file, KEYS)
    calls_file.touch()
    settings = settings_for("dev")
    args = copy.deepcopy(dict(settings.serving.app.serve_config_v2["applications"][0]["args"]))
    args["ingress_cls_config"]["ingress_extra_kwargs"]["keys_file"] = str(keys_file)
    for role in ("prefill_config", "decode_config"):
        args[role] = cpu_placement(args[role])

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    metrics_port = _free_port()
    ray.init(num_cpus=8, num_gpus=0, resources=phase_resources(), include_dashboard=False, log_to_driver=False,
             _metrics_export_port=metrics_port,
             runtime_env={"env_vars": {ENGINE_CLASS_ENV: ENGINE_CLASS_PATH, CALLS_FILE_ENV: str(calls_file),
                                       "PYTHONPATH": f"{REPO}:{HERE}"}})
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build_pd_openai_app(args), name="llm", route_prefix="/")
        yield {"base_url": f"http://127.0.0.1:{port}/v1", "model": settings.serving.app.config.model.model_id,
               "keys_file": keys_file, "calls_file": calls_file, "metrics_port": metrics_port, "port": port}
    finally:
        serve.shutdown()
        ray.shutdown()


def engine_calls(deployed) -> int:
    return len(deployed["calls_file"].read_text().splitlines())


def client(deployed, key: str):
    import openai

    return openai.OpenAI(base_url=deployed["base_url"], api_key=key, max_retries=0, timeout=60)


def raw_post(deployed, key: str | None, body: dict) -> tuple[int, dict, dict]:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    response = httpx.post(f"{deployed['base_url']}/chat/completions", json=body, headers=headers, timeout=60)
    return response.status_code, dict(response.headers), response.json()


def chat_body(deployed, **extra) -> dict:
    return {"model": deployed["model"], "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, **extra}


def test_an_openai_client_made_from_client_config_and_a_key_gets_a_completion(deployed, offline_run):
    import openai

    config = offline_run("dev").outputs["clientConfig"]
    # The NLB's DNS name is AWS's to give: here the same URL reaches this machine's Serve instead.
    here = urlparse(config["base_url"])._replace(netloc=f"127.0.0.1:{deployed['port']}", scheme="http").geturl()
    before = engine_calls(deployed)
    answer = openai.OpenAI(base_url=here, api_key=KEYS["app-team"], max_retries=0).chat.completions.create(
        model=config["model"], messages=[{"role": "user", "content": "hello"}], max_tokens=8)
    assert answer.choices[0].message.content.strip()
    assert answer.usage.completion_tokens == 8
    assert engine_calls(deployed) - before == 2  # prefill, then decode


@pytest.mark.parametrize("key", [None, "0" * 48, "not-a-key-of-this-endpoint-at-all-no"])
def test_a_missing_or_wrong_key_gets_401_in_openais_format_and_no_engine_call(deployed, key):
    before = engine_calls(deployed)
    status, headers, body = raw_post(deployed, key, chat_body(deployed))
    assert status == 401
    assert body["error"]["code"] == "invalid_api_key" and body["error"]["type"] == "invalid_request_error"
    assert headers["www-authenticate"] == "Bearer"
    assert engine_calls(deployed) == before


def test_a_bad_body_without_a_key_gets_401_not_a_validation_error(deployed):
    import httpx

    response = httpx.post(f"{deployed['base_url']}/chat/completions", content=b"{not json", timeout=60)
    assert response.status_code == 401


def test_the_model_list_needs_a_key_too(deployed):
    import httpx
    import openai

    assert httpx.get(f"{deployed['base_url']}/models", timeout=60).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        client(deployed, "wrong-key").models.list()
    assert [m.id for m in client(deployed, KEYS["app-team"]).models.list()] == [deployed["model"]]


def test_a_key_past_its_requests_per_minute_gets_429_with_retry_after_and_no_engine_call(deployed):
    import openai

    tight = client(deployed, KEYS["tight"])
    for _ in range(2):
        tight.chat.completions.create(model=deployed["model"], messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=4)
    before = engine_calls(deployed)
    with pytest.raises(openai.RateLimitError) as refused:
        tight.chat.completions.create(model=deployed["model"], messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=4)
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 60
    assert refused.value.body["code"] == "rate_limit_exceeded"
    assert engine_calls(deployed) == before
    # Another key is not held back by this one's limit.
    client(deployed, KEYS["app-team"]).models.list()


def test_a_streamed_answer_counts_its_tokens_without_sending_usage_the_client_did_not_ask_for(deployed):
    status, _, _ = raw_post(deployed, KEYS["frugal"], chat_body(deployed, max_tokens=4))
    assert status == 200
    import httpx

    with httpx.stream("POST", f"{deployed['base_url']}/chat/completions", timeout=60,
                      json=chat_body(deployed, max_tokens=30, stream=True),
                      headers={"Authorization": f"Bearer {KEYS['frugal']}"}) as stream:
        events = [line.removeprefix("data: ") for line in stream.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert not any("usage" in json.loads(event) for event in events[:-1])
    # The two answers' prompts and outputs are past 50 tokens: the next request waits.
    before = engine_calls(deployed)
    status, headers, body = raw_post(deployed, KEYS["frugal"], chat_body(deployed))
    assert (status, body["error"]["type"]) == (429, "tokens")
    assert int(headers["retry-after"]) >= 1
    assert engine_calls(deployed) == before


def test_a_revoked_key_gets_401_without_restarting_anything(deployed):
    leaving = client(deployed, KEYS["leaving"])
    leaving.models.list()
    actors = _live_actors()
    write_keys(deployed["keys_file"], {name: key for name, key in KEYS.items() if name != "leaving"})
    time.sleep(2.5)  # the ingress looks at the file every 2 s
    before = engine_calls(deployed)
    status, _, body = raw_post(deployed, KEYS["leaving"], chat_body(deployed))
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")
    assert engine_calls(deployed) == before
    assert _live_actors() == actors  # no replica (each has a name of its own) was replaced


def _live_actors() -> set[str]:
    import ray

    return {actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)}


def test_per_key_counters_reach_rays_metrics_exposition_without_key_material(deployed):
    import httpx

    client(deployed, KEYS["app-team"]).chat.completions.create(
        model=deployed["model"], messages=[{"role": "user", "content": "count me"}], max_tokens=4)
    deadline, text = time.monotonic() + 90, ""
    while time.monotonic() < deadline:  # Ray's metrics agent exports every few seconds
        text = httpx.get(f"http://127.0.0.1:{deployed['metrics_port']}/metrics", timeout=10).text
        if 'ray_pd_door_tokens_total{' in text and 'code="401"' in text:
            break
        time.sleep(3)
    requests = [line for line in text.splitlines() if line.startswith("ray_pd_door_requests_total{")]
    assert any('api_key="app-team"' in line and 'code="200"' in line for line in requests), requests
    assert any('api_key="-"' in line and 'code="401"' in line for line in requests), requests
    tokens = [line for line in text.splitlines() if line.startswith("ray_pd_door_tokens_total{")]
    assert any('api_key="app-team"' in line and 'kind="completion"' in line for line in tokens), tokens
    assert not any(key in text for key in KEYS.values())
