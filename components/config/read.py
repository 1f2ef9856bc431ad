"""A stack's raw config (what `pulumi.Config` hands the program, strings by key) into typed values:
only declared keys of the project, keys of the namespaces something reads, provider keys their SDK
reads; each value parsed by its declared type. Every mistake is a ConfigError naming the key."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.config.declared import DeclaredKey, declared_keys
from serve_app.errors import ConfigError, unknown_setting


@functools.cache
def provider_config_keys(package: str) -> frozenset[str]:
    """The config keys a Pulumi provider SDK reads (`pulumi_aws` → region, profile, …), taken from
    its generated `config/vars.py` (every `__config__.get*('<key>')` call), so the list follows the
    installed SDK version instead of a copy here. Empty (no check) where the SDK is not installed: the
    lab reads the stack's serving settings on a GPU host without the Pulumi SDKs."""
    try:
        spec = importlib.util.find_spec(f"{package}.config.vars")
    except ModuleNotFoundError:
        return frozenset()
    if spec is None or spec.origin is None:
        return frozenset()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return frozenset(
        node.args[0].value for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "__config__"
        and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))


# Provider namespaces whose keys are checked against their SDK's own list.
CHECKED_PROVIDER_NAMESPACES = {"aws": "pulumi_aws"}
# The namespaces besides the project's that something in this program reads: its providers'
# (aws, eks, kubernetes) and the engine's own (pulumi:tags, …). A key in any other goes unread.
READ_NAMESPACES = frozenset({"aws", "eks", "kubernetes", "pulumi"})


def _parse(key: DeclaredKey, text: str) -> Any:
    if key.type == "integer":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(key.name, text, "a whole number") from None
    if key.type == "boolean":
        if text.lower() not in ("true", "false"):
            raise ConfigError(key.name, text, "true or false")
        return text.lower() == "true"
    if key.type == "array":
        try:
            items = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            items = None
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ConfigError(key.name, text, 'a JSON array of strings, e.g. ["a", "b"]')
        return tuple(items)
    return text


# Settings this project no longer reads, with why: a stack file that still sets one is told, not
# given a long list of every key.
RETIRED_KEYS = {
    **dict.fromkeys(
        ("prefillEngineId", "decodeEngineId"),
        "Ray Serve LLM now names each NIXL engine at its start, so decode hand-shakes with a restarted prefill "
        "engine instead of reusing its stale peer (serve_app/config.py); delete it from the stack file"),
    "keepEarlierIamRoles": "delete it from the stack file: the stack keeps the IAM roles its deployed EKS cluster "
                           "has (docs/DELIVERY.md, Updating from the previous release)",
}


def _normalized(raw: Mapping[str, str], project: str) -> dict[str, str]:
    """Bare names for the project's keys, and only the keys this program reads."""
    known = declared_keys()
    values: dict[str, str] = {}
    for name, text in raw.items():
        namespace, _, bare = name.rpartition(":")
        if namespace and namespace != project:
            if namespace not in READ_NAMESPACES:
                # `eks-pd-lm:gpuNodeCount`: no provider reads it, so the stack would deploy the default.
                readers = sorted({project, *READ_NAMESPACES})
                raise unknown_setting(name, text, [f"{ns}:{bare}" for ns in readers], what="namespace in")
            if namespace in CHECKED_PROVIDER_NAMESPACES:
                _known_provider_key(namespace, bare, text)
            if name in known:
                values[name] = text
            continue  # other providers' settings (aws:profile, …) are theirs to use
        if bare in RETIRED_KEYS:
            raise ConfigError(bare, text, "nothing: the setting was removed", RETIRED_KEYS[bare])
        if bare not in known:
            # `eks-pd-llm:region` means the provider's `aws:region`: no spelling of the project's keys is it.
            provider_keys = [key for key in known if ":" in key and key.rpartition(":")[2] == bare]
            raise unknown_setting(bare, text, provider_keys or sorted(k for k in known if ":" not in k))
        values[bare] = text
    return values


def _known_provider_key(namespace: str, key: str, text: str) -> None:
    """Refuse `aws:regoin`: the provider would ignore a key it does not read, and the stack would
    deploy with the default it meant to change."""
    keys = provider_config_keys(CHECKED_PROVIDER_NAMESPACES[namespace])
    if keys and key not in keys:
        raise unknown_setting(f"{namespace}:{key}", text, sorted(f"{namespace}:{k}" for k in keys))


def read_config(raw: Mapping[str, str], *, project: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(typed values, texts) by stack key: `raw` over Pulumi.yaml's defaults, each value parsed by its
    declared type; the texts are what the user wrote, for error messages."""
    known = declared_keys()
    texts = {name: key.default for name, key in known.items() if key.default is not None}
    texts.update(_normalized(raw, project))
    missing = sorted(name for name in known if name not in texts)
    if missing:
        raise ConfigError(missing[0], None, "a value", "required and has no default")
    return {name: _parse(known[name], text) for name, text in texts.items()}, texts
