"""Lab variants: named changes to the stack's serving knobs, measured side by side in one run.

A variant changes only what it declares, on every engine of its apps (both PD phases and the
colocated baseline), before the single-host overlay is applied:

| variant field          | key path per LLMConfig                 | example                                   |
|------------------------|----------------------------------------|-------------------------------------------|
| engine_kwargs          | engine_kwargs.<key>                    | {"enforce_eager": false}                  |
| experimental_configs   | experimental_configs.<key>             | {"stream_batching_interval_ms": 5}        |
| env                    | runtime_env.env_vars.<key>             | {"UCX_PROTO_INFO": "y"}                   |
| direct_streaming       | runtime_env.env_vars.RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING = "1" | true |

A variant's `rates` (requests per second, `[]` for none) replace the run's `--rates` for its apps'
open-loop passes: an expensive variant can be measured at one load only.

`direct_streaming` also builds the app with Ray Serve LLM's direct-streaming flag on (see
`direct_streaming_flag`): Ray 2.58 reads `RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING` once, at import,
and its app builders branch on it; the lab's apps are built in the driver, so the flag is switched
there for that app's build only, and the env var goes to the app's replicas as well.

A variant may not touch a key the overlay owns (ports, memory, seed, weights, KV backend): the
lab's numbers would then not be the stack's config under the overlay.

The matrix is JSON (a list of objects, or a path to a file holding one), e.g.
    [{"name": "eager"}, {"name": "graphs", "engine_kwargs": {"enforce_eager": false}, "modes": ["colocated"]}]
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.overlay import NIXL_PORT_BASE_KEY
from serve_app.errors import ConfigError
from serve_app.render import DIRECT_STREAMING_ENV

MODES = ("pd", "colocated")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# Keys the single-host overlay owns (lab.overlay): a variant may not set them.
OVERLAY_ENGINE_KEYS = frozenset({"gpu_memory_utilization", "kv_cache_memory_bytes", "seed", "load_format",
                                 "kv_transfer_config", "tensor_parallel_size", "pipeline_parallel_size"})
OVERLAY_ENV_KEYS = frozenset({"VLLM_DP_MASTER_PORT", "VLLM_NIXL_SIDE_CHANNEL_PORT"})
OVERLAY_EXPERIMENTAL_KEYS = frozenset({NIXL_PORT_BASE_KEY})
# Modules of Ray Serve LLM (2.58) that hold the import-time direct-streaming constant.
DIRECT_STREAMING_MODULES = (
    "ray.llm._internal.serve.constants",
    "ray.llm._internal.serve.serving_patterns.prefill_decode.builder",
    "ray.llm._internal.serve.serving_patterns.data_parallel.builder",
    "ray.llm._internal.serve.core.ingress.builder",
    "ray.llm._internal.serve.core.server.llm_server",
)


@dataclass(frozen=True)
class Variant:
    name: str = ""  # "" = the stack's render as is (apps keep their plain names)
    modes: tuple[str, ...] = MODES
    engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    experimental_configs: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    direct_streaming: bool = False
    rates: tuple[float, ...] | None = None  # its apps' open-loop rates per second (None: the run's --rates)

    def __post_init__(self) -> None:
        if self.name and not NAME.match(self.name):
            raise ConfigError("variant.name", self.name, "lowercase letters, digits and '-', at most 40 chars")
        if not self.modes or not set(self.modes) <= set(MODES) or len(set(self.modes)) != len(self.modes):
            raise ConfigError(f"variant {self.name!r} modes", self.modes, "a non-empty subset of pd, colocated")
        for label, value in (("engine_kwargs", self.engine_kwargs), ("experimental_configs", self.experimental_configs),
                             ("env", self.env)):
            if not isinstance(value, Mapping):
                raise ConfigError(f"variant {self.name!r} {label}", value, "a JSON object")
        clash = sorted(OVERLAY_ENGINE_KEYS & set(self.engine_kwargs))
        if clash:
            raise ConfigError(f"variant {self.name!r} engine_kwargs", clash, "keys the lab overlay does not own",
                              "the overlay sets these for the single host")
        experimental_clash = sorted(OVERLAY_EXPERIMENTAL_KEYS & set(self.experimental_configs))
        if experimental_clash:
            raise ConfigError(f"variant {self.name!r} experimental_configs", experimental_clash,
                              "keys the lab overlay does not own", "ports are the overlay's")
        env_clash = sorted((OVERLAY_ENV_KEYS | {DIRECT_STREAMING_ENV}) & set(self.env))
        if env_clash:
            raise ConfigError(f"variant {self.name!r} env", env_clash, "keys the lab does not own",
                              "ports are the overlay's; use direct_streaming for the streaming flag")
        if self.rates is not None and not all(isinstance(r, (int, float)) and r > 0 for r in self.rates):
            raise ConfigError(f"variant {self.name!r} rates", self.rates, "a list of positive requests per second")
        bad = {k: v for k, v in self.env.items() if not isinstance(v, str)}
        if bad:
            raise ConfigError(f"variant {self.name!r} env", bad, "string values (environment variables)")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "modes": list(self.modes), "engine_kwargs": dict(self.engine_kwargs),
                "experimental_configs": dict(self.experimental_configs), "env": dict(self.env),
                "direct_streaming": self.direct_streaming,
                **({} if self.rates is None else {"rates": list(self.rates)})}


STACK = Variant()


def variant_values(variant: Variant) -> dict[str, Any]:
    """{dotted key path: value} for every key the variant sets on an engine's LLMConfig."""
    values: dict[str, Any] = {}
    for key, value in variant.engine_kwargs.items():
        values[f"engine_kwargs.{key}"] = value
    for key, value in variant.experimental_configs.items():
        values[f"experimental_configs.{key}"] = value
    for key, value in variant.env.items():
        values[f"runtime_env.env_vars.{key}"] = value
    if variant.direct_streaming:
        values[f"runtime_env.env_vars.{DIRECT_STREAMING_ENV}"] = "1"
    return values


def apply_variant(config: Mapping[str, Any], variant: Variant) -> dict[str, Any]:
    """A copy of one engine's LLMConfig dict with the variant's keys set (input untouched)."""
    result = copy.deepcopy(dict(config))
    for path, value in variant_values(variant).items():
        *parents, leaf = path.split(".", 2) if path.startswith("runtime_env.") else path.split(".", 1)
        node = result
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(value)
    return result


def _variant_from(item: Any) -> Variant:
    if not isinstance(item, Mapping):
        raise ConfigError("--variants", item, "a list of JSON objects")
    unknown = set(item) - {"name", "modes", "engine_kwargs", "experimental_configs", "env", "direct_streaming",
                           "rates"}
    if unknown:
        raise ConfigError("--variants", sorted(unknown), "name, modes, engine_kwargs, experimental_configs, env, "
                          "direct_streaming, rates")
    if not item.get("name"):
        raise ConfigError("--variants", item, "a name for every variant")
    return Variant(name=item["name"], modes=tuple(item.get("modes", MODES)),
                   engine_kwargs=dict(item.get("engine_kwargs", {})),
                   experimental_configs=dict(item.get("experimental_configs", {})),
                   env=dict(item.get("env", {})), direct_streaming=bool(item.get("direct_streaming", False)),
                   rates=None if item.get("rates") is None else tuple(item["rates"]))


def parse_variants(text: str) -> tuple[Variant, ...]:
    """The variant matrix from JSON text or from a JSON file's path; "" = none (the stack as rendered)."""
    if not text.strip():
        return ()
    source = text
    if not text.lstrip().startswith("["):
        path = Path(text)
        if not path.is_file():
            raise ConfigError("--variants", text, "a JSON list of variants or the path of a file holding one")
        source = path.read_text()
    try:
        items = json.loads(source)
    except json.JSONDecodeError as error:
        raise ConfigError("--variants", text[:200], "valid JSON", str(error)) from None
    if not isinstance(items, list) or not items:
        raise ConfigError("--variants", text[:200], "a non-empty JSON list")
    variants = tuple(_variant_from(item) for item in items)
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ConfigError("--variants", names, "distinct names")
    return variants


@contextlib.contextmanager
def direct_streaming_flag(enabled: bool) -> Iterator[list[str]]:
    """Ray Serve LLM's direct-streaming flag switched on for the builds inside the block (driver only).

    Yields the modules whose constant was switched; refuses when the installed Ray has none.
    """
    if not enabled:
        yield []
        return
    import importlib

    # Imported before the variable is set: a module first imported inside the block would keep True.
    modules = []
    for name in DIRECT_STREAMING_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    saved = [(module, getattr(module, DIRECT_STREAMING_ENV)) for module in modules
             if hasattr(module, DIRECT_STREAMING_ENV)]
    if not saved:
        raise ConfigError("direct_streaming", True, "a Ray Serve LLM with RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING",
                          "the installed Ray has no direct-streaming mode")
    previous_env = os.environ.get(DIRECT_STREAMING_ENV)
    os.environ[DIRECT_STREAMING_ENV] = "1"
    try:
        for module, _ in saved:
            setattr(module, DIRECT_STREAMING_ENV, True)
        yield [module.__name__ for module, _ in saved]
    finally:
        for module, value in saved:
            setattr(module, DIRECT_STREAMING_ENV, value)
        if previous_env is None:
            os.environ.pop(DIRECT_STREAMING_ENV, None)
        else:
            os.environ[DIRECT_STREAMING_ENV] = previous_env
