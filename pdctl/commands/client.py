"""The endpoint as an OpenAI client sees it: `smoke` and `chat`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from pdctl import endpoint
from pdctl.commands.common import (
    OUTPUTS_FILE_OPTION,
    console,
    fail,
    stack_outputs,
)
from serve_app.render import SERVE_HTTP_PORT

# ------------------------------------------------------------------------------ endpoint

BASE_URL_OPTION = typer.Option(
    None, "--base-url", envvar="OPENAI_BASE_URL",
    help="Default: $OPENAI_BASE_URL, else the front door of --from-file's stack, else the `connect` port-forward.")
MODEL_OPTION = typer.Option(None, "--model", envvar="OPENAI_MODEL",
                            help="The stack's model id (default $OPENAI_MODEL, else the stack's modelId output).")


def openai_target(base_url: str | None, model: str | None, from_file: Path | None) -> tuple[str, str]:
    """(base URL, model): as given, else from the saved outputs (the front door's URL when the stack
    has one), else the `connect` port-forward."""
    outputs = stack_outputs(None, from_file) if from_file is not None else {}
    model = model or outputs.get(endpoint.OUTPUT_MODEL_ID)
    if not model:
        raise fail("which model? pass --model, set OPENAI_MODEL (pdctl client-config --env) or --from-file", 2)
    try:
        door = endpoint.door_url(outputs)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    return base_url or door or f"http://127.0.0.1:{SERVE_HTTP_PORT}/v1", model


def api_key() -> str:
    return os.environ.get("OPENAI_API_KEY", endpoint.API_KEY_PLACEHOLDER)


def openai_client(base_url: str | None, model: str | None, from_file: Path | None, timeout: float):
    """(a synchronous OpenAI client for the stack's endpoint, the stack's model id)."""
    import openai

    base_url, model = openai_target(base_url, model, from_file)
    return openai.OpenAI(base_url=base_url, api_key=api_key(), timeout=timeout, max_retries=0), model


def smoke(
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    prompt: str = typer.Option("In one sentence: what is prefill/decode disaggregation?"),
    max_tokens: int = typer.Option(64),
    timeout: float = typer.Option(120.0, help="Seconds per request."),
) -> None:
    """List models and send one chat completion; fail on a model mismatch or an empty answer."""
    client, model = openai_client(base_url, model, from_file, timeout)
    try:
        result = endpoint.smoke(client, model, prompt, max_tokens=max_tokens)
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    console.print(f"models: {', '.join(result.models)}", highlight=False)
    console.print(f"answer ({result.completion_tokens} tokens, finish={result.finish_reason}): "
                  f"{result.answer}", highlight=False, markup=False)
    console.print("[bold green]OK[/]")


def chat(
    message: str = typer.Argument(..., help="What to ask."),
    base_url: str | None = BASE_URL_OPTION, model: str | None = MODEL_OPTION,
    from_file: Path | None = OUTPUTS_FILE_OPTION,
    max_tokens: int = typer.Option(512),
    timeout: float = typer.Option(120.0, help="Seconds per request."),
) -> None:
    """Stream one chat answer to the terminal (checks the model id first)."""
    import openai

    client, model = openai_client(base_url, model, from_file, timeout)
    try:
        endpoint.served_models(client, model)
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message}],
            max_tokens=max_tokens, stream=True)
        received = []
        for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    received.append(choice.delta.content)
                    sys.stdout.write(choice.delta.content)
                    sys.stdout.flush()
    except endpoint.EndpointError as exc:
        raise fail(str(exc)) from None
    except openai.APIError as exc:
        raise fail(f"{client.base_url}: {exc}") from None
    sys.stdout.write("\n")
    if not "".join(received).strip():
        raise fail("the model streamed an empty answer")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the pdctl app."""
    app.command()(smoke)
    app.command()(chat)
