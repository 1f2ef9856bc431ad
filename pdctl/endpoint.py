"""The stack's OpenAI-compatible endpoint: client configuration from stack outputs, and smoke checks."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from serve_app.render import SERVE_HTTP_PORT

# Stack outputs pdctl reads (exported by __main__.py).
OUTPUT_NAMESPACE = "namespace"
OUTPUT_RAY_SERVICE = "rayServiceName"
OUTPUT_MODEL_ID = "modelId"
OUTPUT_TOKENIZER = "tokenizerSource"
OUTPUT_KUBECONFIG = "kubeconfig"
OUTPUT_REGION = "region"
OUTPUT_CLUSTER = "clusterName"
OUTPUT_ENDPOINT_URL = "endpointUrl"
OUTPUT_API_KEY_NAMES = "apiKeyNames"
OUTPUT_API_KEY_SECRET = "apiKeySecret"
# The stack secret holding the front door's keys (components/config/front_door.py API_KEYS_KEY).
API_KEYS_CONFIG_KEY = "apiKeys"
# What `pulumi stack output --json` prints for a secret unless asked for --show-secrets.
HIDDEN_SECRET = "[secret]"

API_KEY_PLACEHOLDER = "not-needed"  # without a front door nothing checks keys; the SDK insists on one


class EndpointError(RuntimeError):
    """The endpoint or the stack outputs are not what the user needs; the message says why."""


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    model: str
    api_key: str = API_KEY_PLACEHOLDER

    def to_dict(self) -> dict:
        return {"base_url": self.base_url, "model": self.model, "api_key": self.api_key}

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key,
                "OPENAI_MODEL": self.model}

    def env_text(self) -> str:
        # Quoted for the shell: the README runs this through `eval`, and a --base-url may hold `&`.
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env().items())


def read_stack_outputs(stack: str | None, from_file: Path | None, *, secrets: bool = False,
                       cwd: Path | None = None) -> dict:
    """Stack outputs from a saved `pulumi stack output --json` file, or from the pulumi CLI. The CLI
    is asked for secret values (the kubeconfig) only when `secrets` says the caller needs them."""
    if from_file is not None:
        try:
            return json.loads(from_file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise EndpointError(f"cannot read stack outputs from {from_file}: {exc}") from None
    pulumi = shutil.which("pulumi")
    show = " --show-secrets" if secrets else ""
    if pulumi is None:
        raise EndpointError(
            f"the pulumi CLI is not on PATH: save `pulumi stack output --json{show}` "
            "to a file and pass it with --from-file"
        )
    command = [pulumi, "stack", "output", "--json", *(["--show-secrets"] if secrets else [])]
    if stack:
        command += ["--stack", stack]
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
    if result.returncode != 0:
        raise EndpointError(f"`{' '.join(command[1:])}` failed: {result.stderr.strip()}")
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise EndpointError(f"`{' '.join(command[1:])}` did not print JSON ({exc}): {result.stdout[:200]!r}") from None


def required_output(outputs: dict, key: str) -> str:
    value = outputs.get(key)
    if value in (None, ""):
        raise EndpointError(
            f"stack output {key!r} is missing (have: {', '.join(sorted(outputs)) or 'none'})"
        )
    return str(value)


def has_front_door(outputs: dict) -> bool:
    return bool(outputs.get(OUTPUT_API_KEY_SECRET))


def door_url(outputs: dict) -> str | None:
    """The front door's base URL when the stack has one, else None (the port-forward is the way in)."""
    return required_output(outputs, OUTPUT_ENDPOINT_URL) if has_front_door(outputs) else None


def client_config(outputs: dict, *, base_url: str | None = None, local_port: int = SERVE_HTTP_PORT,
                  api_key: str = API_KEY_PLACEHOLDER) -> ClientConfig:
    """Through the front door when the stack has one, else through `pdctl connect` on localhost;
    `base_url` overrides either (a laptop's port-forward to a stack with a door)."""
    return ClientConfig(
        base_url=base_url or door_url(outputs) or f"http://127.0.0.1:{local_port}/v1",
        model=required_output(outputs, OUTPUT_MODEL_ID),
        api_key=api_key,
    )


def fetch_api_key(outputs: dict, name: str | None, stack: str | None, *, cwd: Path | None = None) -> str:
    """The front door key `name` (the only one when None), read from the stack's encrypted config with
    the caller's own credentials (`pulumi config get apiKeys`): never from an output."""
    names = list(outputs.get(OUTPUT_API_KEY_NAMES) or [])
    if not has_front_door(outputs) or not names:
        raise EndpointError("the stack has no API key: set one with `pulumi config set --secret apiKeys "
                            "'{\"app-team\": \"<openssl rand -hex 24>\"}'` and `pulumi up`")
    if name is None:
        if len(names) > 1:
            raise EndpointError(f"which key? pass --key, one of {', '.join(names)}")
        name = names[0]
    if name not in names:
        raise EndpointError(f"the stack has no key named {name!r} (have: {', '.join(names)})")
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise EndpointError("the pulumi CLI is not on PATH: it reads the key from the stack's encrypted config")
    command = [pulumi, "config", "get", API_KEYS_CONFIG_KEY, *(["--stack", stack] if stack else [])]
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
    if result.returncode != 0:
        raise EndpointError(f"`pulumi config get {API_KEYS_CONFIG_KEY}` failed: {result.stderr.strip()}")
    try:
        return json.loads(result.stdout)[name]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(f"the stack's {API_KEYS_CONFIG_KEY} holds no key named {name!r}") from None


@dataclass(frozen=True)
class SmokeResult:
    models: list[str]
    answer: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def unreachable_hint(base_url: str) -> str:
    """The next step when the endpoint does not answer: on localhost, the port-forward is the usual
    cause; elsewhere (the front door), where the caller calls from."""
    host = urlparse(str(base_url)).hostname or ""
    if host in ("127.0.0.1", "localhost", "::1"):
        return " (is `pdctl connect` running? It forwards this port to the serve Service)"
    return (" (the front door answers callers in the VPC and frontDoorAllowedCidrs only; from elsewhere "
            "use `pdctl connect` and --base-url http://127.0.0.1:8000/v1)")


def served_models(client, model: str) -> list[str]:
    """The endpoint's model ids; raise EndpointError unless the stack's `model` is among them."""
    return [m.id for m in list_models(client, model)]


def list_models(client, model: str) -> list:
    """GET /v1/models as the endpoint answers it (ids and whatever metadata the server adds);
    raise EndpointError unless the stack's `model` is among them."""
    import openai

    try:
        cards = list(client.models.list())
    except openai.APIConnectionError as exc:
        raise EndpointError(f"GET /v1/models failed: {exc}{unreachable_hint(client.base_url)}") from None
    except openai.APIError as exc:
        raise EndpointError(f"GET /v1/models failed: {exc}") from None
    models = [m.id for m in cards]
    if model not in models:
        raise EndpointError(
            f"the endpoint serves {models or 'no model'}, not the stack's model {model!r}"
        )
    return cards


def smoke(client, model: str, prompt: str, *, max_tokens: int = 64) -> SmokeResult:
    """List models and send one chat completion; raise EndpointError on any mismatch or empty answer."""
    import openai

    models = served_models(client, model)
    try:
        completion = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
        )
    except openai.APIError as exc:
        raise EndpointError(f"POST /v1/chat/completions failed: {exc}") from None
    if completion.model != model:
        raise EndpointError(f"the completion came from model {completion.model!r}, not {model!r}")
    choice = completion.choices[0] if completion.choices else None
    answer = (choice.message.content or "") if choice else ""
    if choice is None or not answer.strip():
        raise EndpointError(
            f"the model returned an empty answer (finish_reason={choice.finish_reason if choice else None})"
        )
    usage = completion.usage
    return SmokeResult(
        models=models, answer=answer, finish_reason=choice.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
    )
