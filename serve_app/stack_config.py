"""Pulumi stack config (raw strings) → `PDAppConfig`, and the Ray image it runs in.

`get(key)` returns what the Pulumi SDK returns for a key: a string, or None when unset (then the
`PDAppConfig` default, i.e. the reference deployment, applies). Arrays and `extraEngineKwargs` arrive
as JSON text. Every bad value raises `ConfigError` naming the key; no pydantic error escapes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from pydantic import ValidationError

from facts.images import ResolvedRayImage, check_ray_image, default_ray_image
from serve_app.checks import ACCEPT_UCX_ON_EFA_KEY, check_kv_backends
from serve_app.config import (
    DTYPES, EFA_KV_BACKEND, OWNED_ENGINE_KWARGS, PHASES, REFUSED_ENGINE_KWARGS, PDAppConfig, Replicas, setting_name,
)
from serve_app.errors import ConfigError

Getter = Callable[[str], "str | None"]

_ENGINE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# Engine arguments that change how many GPUs a replica takes, which the GPU-fit checks do not model.
_UNMODELLED_ENGINE_KWARGS = ("data_parallel_size", "data_parallel_size_local", "prefill_context_parallel_size",
                             "decode_context_parallel_size")


def _present(get: Getter, key: str) -> str | None:
    """The raw value, or None when unset or empty ("" means "use the default")."""
    value = get(key)
    if value is None:
        return None
    value = value.strip()
    return value or None


def _int(get: Getter, key: str, *, minimum: int) -> int | None:
    raw = _present(get, key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(key, raw, f"a whole number ≥ {minimum}") from None
    if value < minimum:
        raise ConfigError(key, raw, f"a whole number ≥ {minimum}")
    return value


def _bool(get: Getter, key: str) -> bool | None:
    raw = _present(get, key)
    if raw is None:
        return None
    if raw.lower() not in ("true", "false"):
        raise ConfigError(key, raw, "true or false")
    return raw.lower() == "true"


def _fraction(get: Getter, key: str) -> float | None:
    raw = _present(get, key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(key, raw, "a number in (0, 1], e.g. \"0.90\"") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise ConfigError(key, raw, "a number in (0, 1], e.g. \"0.90\"")
    return value


def _json(get: Getter, key: str, kind: type, example: str) -> Any:
    raw = _present(get, key)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigError(key, raw, f"JSON text of {example}", f"not JSON: {error.msg}") from None
    except RecursionError:
        raise ConfigError(key, raw[:80], f"JSON text of {example}", "nested too deeply") from None
    if not isinstance(value, kind):
        raise ConfigError(key, raw, f"JSON text of {example}")
    return value


def _text(get: Getter, key: str) -> str | None:
    raw = _present(get, key)
    if raw is not None and any(c.isspace() for c in raw):
        raise ConfigError(key, raw, "a value without spaces")
    return raw


def _model_location(get: Getter, key: str) -> str | None:
    """A model or tokenizer source the stack's Ray pods can read: a Hugging Face id or a path."""
    raw = _text(get, key)
    if raw is not None and raw.startswith("s3://"):
        # Ray Serve LLM reads s3:// itself, but only with AWS credentials: the Ray pods get no IAM
        # identity (no IRSA or Pod Identity) and the nodes' metadata is closed to pods, so the load
        # would fail on the cluster as DEPLOY_FAILED after the GPU nodes are up.
        raise ConfigError(key, raw, "a Hugging Face model id (org/name) or a path inside the image",
                          "s3:// needs an AWS identity for the Ray pods, which this stack does not create")
    return raw


def _replicas(get: Getter, phase: str) -> dict[str, int | None]:
    fixed_key = setting_name(f"{phase}.replicas.min_replicas")
    max_key = setting_name(f"{phase}.replicas.max_replicas")
    minimum = _int(get, fixed_key, minimum=1) or Replicas().min_replicas
    maximum = _int(get, max_key, minimum=0) or None  # 0 = fixed at prefillReplicas/decodeReplicas
    if maximum is not None and maximum < minimum:
        raise ConfigError(max_key, maximum, f"0 (fixed) or ≥ {fixed_key} ({minimum})")
    return {"min_replicas": minimum, "max_replicas": maximum}


def _engine_id(get: Getter, phase: str) -> str | None:
    key = setting_name(f"{phase}.engine_id")
    raw = _present(get, key)
    if raw is not None and not _ENGINE_ID.match(raw):
        raise ConfigError(key, raw, "1–63 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return raw


def _extra_engine_kwargs(get: Getter) -> dict[str, Any]:
    key = setting_name("engine.extra_engine_kwargs")
    kwargs = _json(get, key, dict, 'an object, e.g. {"max_num_seqs": 16}') or {}
    for name in kwargs:
        if name in OWNED_ENGINE_KWARGS:
            raise ConfigError(key, {name: kwargs[name]}, "vLLM engine arguments not set by another key",
                              f"set {name} with {OWNED_ENGINE_KWARGS[name]}")
        if name in REFUSED_ENGINE_KWARGS:
            raise ConfigError(key, {name: kwargs[name]}, "vLLM engine arguments Ray Serve LLM accepts",
                              REFUSED_ENGINE_KWARGS[name])
        if name in _UNMODELLED_ENGINE_KWARGS and kwargs[name] not in (1, None):
            raise ConfigError(key, {name: kwargs[name]}, f"{name} 1 (or unset)",
                              "the GPU-fit checks model tensor and pipeline parallelism only")
    return kwargs


def _kv_backends(get: Getter, *, efa: bool) -> tuple[str, ...]:
    key = setting_name("kv_transfer.backends")
    backends = _json(get, key, list, '["LIBFABRIC"]')
    if backends is None:
        return (EFA_KV_BACKEND,) if efa else ("UCX",)
    if not all(isinstance(b, str) for b in backends):
        raise ConfigError(key, backends, 'a JSON array of backend names, e.g. ["LIBFABRIC"]')
    return tuple(backends)


def _drop_none(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def pd_app_from_config(get: Getter, *, efa: bool = True, network_gbps: float | None = None) -> PDAppConfig:
    """Read the serving keys of docs/ARCHITECTURE.md into a checked `PDAppConfig`.

    `efa`: whether the GPU nodes have EFA. It picks the default kvBackends (LIBFABRIC with EFA, UCX
    without) and refuses UCX on EFA unless acceptUcxOnEfaKvTransferIs100xSlower is true.
    """
    dtype = _present(get, setting_name("engine.dtype"))
    if dtype is not None and dtype not in DTYPES:
        raise ConfigError(setting_name("engine.dtype"), dtype, f"one of {list(DTYPES)}")
    backends = _kv_backends(get, efa=efa)
    check_kv_backends(backends, efa=efa, accept_ucx_on_efa=bool(_bool(get, ACCEPT_UCX_ON_EFA_KEY)),
                      network_gbps=network_gbps)
    defaults = PDAppConfig()
    data = {
        "model": _drop_none(
            model_id=_text(get, setting_name("model.model_id")),
            model_source=_model_location(get, setting_name("model.model_source")),
            tokenizer_source=_model_location(get, setting_name("model.tokenizer_source")),
        ),
        "engine": _drop_none(
            max_model_len=_int(get, setting_name("engine.max_model_len"), minimum=1),
            dtype=dtype,
            gpu_memory_utilization=_fraction(get, setting_name("engine.gpu_memory_utilization")),
            enforce_eager=_bool(get, setting_name("engine.enforce_eager")),
            tensor_parallel_size=_int(get, setting_name("engine.tensor_parallel_size"), minimum=1),
            pipeline_parallel_size=_int(get, setting_name("engine.pipeline_parallel_size"), minimum=1),
            extra_engine_kwargs=_extra_engine_kwargs(get),
        ),
        "kv_transfer": {"backends": backends},
        **{phase: {"engine_id": _engine_id(get, phase) or defaults.phase(phase).engine_id,
                   "kv_role": defaults.phase(phase).kv_role,
                   "replicas": _replicas(get, phase)}
           for phase in PHASES},
    }
    try:
        return PDAppConfig.model_validate(data)
    except ValidationError as error:  # field rules the parsers above leave to the model (e.g. modelId)
        first = error.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise ConfigError(setting_name(path), first.get("input"), first["msg"].removeprefix("Value error, ")) from None


def ray_image_from_config(get: Getter, *, region: str) -> ResolvedRayImage:
    """`rayImage` ("" = the Ray LLM DLC image for `region`) and `rayVersion`, checked together."""
    image = _present(get, "rayImage") or default_ray_image(region)
    return check_ray_image(image, _present(get, "rayVersion"))
