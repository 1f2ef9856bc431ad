"""Client commands (smoke, chat, client-config) against the local OpenAI-compatible server of
conftest.py, driven through the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import stat
import subprocess

MODEL = "qwen3.5-9b"


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
    assert "is `pdctl connect` running?" in result.stderr  # the next step, on a local URL
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


def test_client_config_asks_the_pulumi_cli_for_no_secret(cli, tmp_path, monkeypatch):
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    f"echo '{json.dumps(OUTPUTS)}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    result = cli("client-config", "--stack", "dev")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == MODEL
    # The model id is all it needs: the kubeconfig (a secret output) stays where it is.
    assert (tmp_path / "args").read_text().split() == ["stack", "output", "--json", "--stack", "dev"]


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


# --------------------------------------------------------------------------- through the front door

DOOR_OUTPUTS = {**OUTPUTS, "endpointUrl": "http://internal-door.elb.us-west-2.amazonaws.com:80/v1",
                "apiKeySecret": "apiKeys (stack secret); inference/ray-llm-api-keys key keys.json (salted hashes)",
                "apiKeyNames": ["app-team", "batch"]}
DOOR_KEYS = {"app-team": "a1" * 20, "batch": "b2" * 20}


def fake_pulumi_config(tmp_path, monkeypatch) -> None:
    """A pulumi CLI that answers `config get apiKeys` with the keys (as the caller's credentials would)."""
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/args\"\n"
                    f"echo '{json.dumps(DOOR_KEYS)}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_client_config_goes_through_the_door_with_the_key_read_from_the_stack_config(cli, tmp_path, monkeypatch):
    fake_pulumi_config(tmp_path, monkeypatch)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(DOOR_OUTPUTS))
    result = cli("client-config", "--from-file", outputs, "--key", "batch", "--env")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"export OPENAI_BASE_URL={DOOR_OUTPUTS['endpointUrl']}",
                                          f"export OPENAI_API_KEY={DOOR_KEYS['batch']}", f"export OPENAI_MODEL={MODEL}"]
    assert (tmp_path / "args").read_text().split() == ["config", "get", "apiKeys"]
    # Several keys and none named: the command asks which, naming them (never a key).
    asked = cli("client-config", "--from-file", outputs)
    assert asked.exit_code == 1 and "one of app-team, batch" in asked.stderr and DOOR_KEYS["batch"] not in asked.stderr


def test_smoke_uses_the_doors_url_from_the_saved_outputs(tmp_path):
    from pdctl.commands.client import openai_target

    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(DOOR_OUTPUTS))
    assert openai_target(None, None, outputs) == (DOOR_OUTPUTS["endpointUrl"], MODEL)
    assert openai_target("http://127.0.0.1:8000/v1", None, outputs)[0] == "http://127.0.0.1:8000/v1"
