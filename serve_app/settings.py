"""The serving keys of a stack file, typed: `ServeAppSettings` → `PDAppConfig`.

Each field's alias is the stack config key (`Pulumi.yaml` declares it, with its default) and each
field's description says what is allowed, so a bad value is refused naming the key the user wrote.
`ServeAppSettings.app()` is the typed application the checks and the renderer take. Checks that need
the GPU nodes (UCX on EFA, fit, parallelism) run later, in `serve_app.checks`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from serve_app.config import (
    DEFAULT_KV_ROLE,
    KV_BACKENDS,
    OWNED_ENGINE_KWARGS,
    REFUSED_ENGINE_KWARGS,
    S3_SCHEME,
    STREAMER_LOAD_FORMATS,
    Dtype,
    KeyedIngress,
    PDAppConfig,
    Phase,
    Quantization,
    s3_location,
    served_name_of,
    valid_model_id,
)
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackField, StackKeyModel

# Engine arguments that change how many GPUs a replica takes, which the GPU-fit checks do not model.
UNMODELLED_ENGINE_KWARGS = ("data_parallel_size", "data_parallel_size_local", "prefill_context_parallel_size",
                            "decode_context_parallel_size")
# Owned engine arguments whose setting is not the field of the same name.
_OWNED_BY_OTHER_KEYS = {
    "compilation_config": "enforceEager/cudaGraphMaxBatchSize",
    "kv_transfer_config": "kvBackends", "model": "modelSource", "language_model_only": "visionInputs",
    "tokenizer": "tokenizerSource", "served_model_name": "modelId", "kv_cache_memory_bytes": "kvCacheFromPlan",
}
_MODEL_LOCATION_ALLOWED = ("a Hugging Face model id (org/name), s3://<bucket>/<prefix> (a mirror: `pdctl "
                           "mirror-model`) or a path inside the image, without spaces")


def _model_location(setting: StackField, value: str) -> str:
    if any(c.isspace() for c in value):
        raise ValueError("contains spaces")
    if value.startswith(S3_SCHEME):
        # The Ray pods get a role that may read exactly this bucket and prefix (components/model_access.py).
        try:
            s3_location(value)
        except ValueError as error:
            raise setting.refuse(value, _MODEL_LOCATION_ALLOWED, str(error)) from None
    return value


class ServeAppSettings(StackKeyModel):
    """What a stack file says about the PD application: model, engines, KV transfer, replicas."""

    model_id: str = Field(alias="modelId", description='"" (named after modelSource) or printable text without '
                                                       "spaces or '#'")
    model_source: str = Field(alias="modelSource", min_length=1, description=_MODEL_LOCATION_ALLOWED)
    tokenizer_source: str | None = Field(alias="tokenizerSource", description=f'"" or {_MODEL_LOCATION_ALLOWED}')
    max_model_len: int = Field(alias="maxModelLen", ge=1, description="a whole number ≥ 1")
    dtype: Dtype = Field(alias="dtype", description=f"one of {list(Dtype.__args__)}")  # type: ignore[attr-defined]
    quantization: Quantization = Field(alias="quantization", description='"" or "fp8"')
    gpu_memory_utilization: float = Field(
        alias="gpuMemoryUtilization", gt=0, le=1, description='a number in (0, 1], e.g. "0.90"')
    enforce_eager: bool = Field(alias="enforceEager", description="true or false")
    cuda_graph_max_batch_size: int = Field(
        alias="cudaGraphMaxBatchSize", ge=1, le=512, description="a whole number from 1 to 512")
    max_num_seqs: int = Field(alias="maxNumSeqs", ge=1, le=1024, description="a whole number from 1 to 1024")
    max_num_batched_tokens: int = Field(alias="maxNumBatchedTokens", ge=16, description="a whole number ≥ 16")
    vision_inputs: bool = Field(alias="visionInputs", description="true or false")
    kv_cache_from_plan: bool = Field(alias="kvCacheFromPlan", description="true or false")
    stream_batching_interval_ms: int = Field(
        alias="streamBatchingIntervalMs", ge=0, le=1000, description="a whole number of milliseconds from 0 to 1000")
    pd_direct_streaming: bool = Field(alias="pdDirectStreaming", description="true or false")
    single_process_engine: bool = Field(alias="singleProcessEngine", description="true or false")
    tensor_parallel_size: int = Field(alias="tensorParallelSize", ge=1, description="a whole number ≥ 1")
    pipeline_parallel_size: int = Field(alias="pipelineParallelSize", ge=1, description="a whole number ≥ 1")
    prefill_replicas: int = Field(alias="prefillReplicas", ge=1, description="a whole number ≥ 1")
    prefill_max_replicas: int = Field(
        alias="prefillMaxReplicas", ge=0,
        description="0 (fixed at prefillReplicas) or a whole number ≥ prefillReplicas")
    decode_replicas: int = Field(alias="decodeReplicas", ge=1, description="a whole number ≥ 1")
    decode_max_replicas: int = Field(
        alias="decodeMaxReplicas", ge=0, description="0 (fixed at decodeReplicas) or a whole number ≥ decodeReplicas")
    prefill_target_ongoing_requests: int = Field(
        alias="prefillTargetOngoingRequests", ge=1, le=1024, description="a whole number from 1 to 1024")
    decode_target_ongoing_requests: int = Field(
        alias="decodeTargetOngoingRequests", ge=1, le=1024, description="a whole number from 1 to 1024")
    prefill_upscale_delay_s: int = Field(
        alias="prefillUpscaleDelaySeconds", ge=0, le=3600, description="whole seconds from 0 to 3600")
    decode_upscale_delay_s: int = Field(
        alias="decodeUpscaleDelaySeconds", ge=0, le=3600, description="whole seconds from 0 to 3600")
    prefill_downscale_delay_s: int = Field(
        alias="prefillDownscaleDelaySeconds", ge=0, le=3600, description="whole seconds from 0 to 3600")
    decode_downscale_delay_s: int = Field(
        alias="decodeDownscaleDelaySeconds", ge=0, le=3600, description="whole seconds from 0 to 3600")
    kv_backends: tuple[str, ...] = Field(
        alias="kvBackends", description=f"a non-empty list of distinct names from {list(KV_BACKENDS)}")
    accept_ucx_on_efa: bool = Field(alias="acceptUcxOnEfaKvTransferIs100xSlower", description="true or false")
    extra_engine_kwargs: Mapping[str, Any] = Field(
        alias="extraEngineKwargs", description='JSON text of an object, e.g. {"max_num_seqs": 16}')

    @model_validator(mode="before")
    @classmethod
    def _model_id_follows_the_model(cls, data: Any) -> Any:
        # A new modelSource must not keep serving under the old model's name: "" names it after the model.
        if isinstance(data, dict) and data.get(cls.key("model_id")) == "" and isinstance(
                data.get(cls.key("model_source")), str):
            return {**data, cls.key("model_id"): served_name_of(data[cls.key("model_source")])}
        return data

    @field_validator("model_id")
    @classmethod
    def _model_id_names_a_deployment(cls, value: str) -> str:
        if not value:
            raise ValueError("empty")
        return valid_model_id(value)

    @field_validator("model_source")
    @classmethod
    def _model_source(cls, value: str) -> str:
        return _model_location(cls.field("model_source"), value)

    @field_validator("tokenizer_source", mode="before")
    @classmethod
    def _tokenizer_source(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None  # "" = the model's own tokenizer
        return _model_location(cls.field("tokenizer_source"), value) if isinstance(value, str) else value

    @field_validator("gpu_memory_utilization", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        number = float(value) if isinstance(value, (str, int, float)) else value
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError("not a finite number")
        return value

    @field_validator("kv_backends")
    @classmethod
    def _known_distinct_backends(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refuse_unknown_backends(value)
        return value

    @field_validator("extra_engine_kwargs", mode="before")
    @classmethod
    def _engine_kwargs_json(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key, allowed = cls.key("extra_engine_kwargs"), cls.model_fields["extra_engine_kwargs"].description or ""
        try:
            parsed = json.loads(value or "{}")
        except json.JSONDecodeError as error:
            raise ConfigError(key, value, allowed, f"not JSON: {error.msg}") from None
        except RecursionError:
            raise ConfigError(key, value[:80], allowed, "nested too deeply") from None
        if not isinstance(parsed, dict):
            raise ConfigError(key, value, allowed)
        return parsed

    @field_validator("extra_engine_kwargs")
    @classmethod
    def _engine_kwargs_not_owned(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        key = cls.key("extra_engine_kwargs")
        for name in value:
            if name in OWNED_ENGINE_KWARGS:
                owner = _OWNED_BY_OTHER_KEYS.get(name) or cls.key(name)
                raise ConfigError(key, {name: value[name]}, "vLLM engine arguments not set by another key",
                                  f"set {name} with {owner}")
            if name in REFUSED_ENGINE_KWARGS:
                raise ConfigError(key, {name: value[name]}, "vLLM engine arguments Ray Serve LLM accepts",
                                  REFUSED_ENGINE_KWARGS[name])
            if name in UNMODELLED_ENGINE_KWARGS and value[name] not in (1, None):
                raise ConfigError(key, {name: value[name]}, f"{name} 1 (or unset)",
                                  "the GPU-fit checks model tensor and pipeline parallelism only")
        return value

    @model_validator(mode="after")
    def _s3_mirror_consistent(self) -> ServeAppSettings:
        model_on_s3 = self.model_source.startswith(S3_SCHEME)
        tokenizer = self.tokenizer_source
        if tokenizer is not None and tokenizer.startswith(S3_SCHEME) and not (
                model_on_s3 and tokenizer.rstrip("/").startswith(self.model_source.rstrip("/"))):
            raise ConfigError(self.key("tokenizer_source"), tokenizer,
                              f'"" or a path under {self.key("model_source")} when that is an s3:// mirror',
                              "the Ray pods' role may read the model's bucket and prefix only")
        load_format = self.extra_engine_kwargs.get("load_format")
        if model_on_s3 and load_format is not None and load_format not in STREAMER_LOAD_FORMATS:
            raise ConfigError(self.key("extra_engine_kwargs"), {"load_format": load_format},
                              f"load_format unset or one of {list(STREAMER_LOAD_FORMATS)}",
                              f"{self.key('model_source')} is an S3 mirror, which vLLM reads only by streaming")
        return self

    @model_validator(mode="after")
    def _replica_bounds_ordered(self) -> ServeAppSettings:
        for phase in ("prefill", "decode"):
            fixed, most = getattr(self, f"{phase}_replicas"), getattr(self, f"{phase}_max_replicas")
            if most and most < fixed:
                raise ConfigError(self.key(f"{phase}_max_replicas"), most,
                                  f"0 (fixed) or ≥ {self.key(f'{phase}_replicas')} ({fixed})")
        return self

    @model_validator(mode="after")
    def _engine_limits_agree(self) -> ServeAppSettings:
        seqs = f"{self.key('max_num_seqs')} ({self.max_num_seqs})"
        # vLLM's SchedulerConfig refuses it at the engine's start: a step holds a token of each running sequence.
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ConfigError(self.key("max_num_batched_tokens"), self.max_num_batched_tokens, f"at least {seqs}",
                              "vLLM refuses to start with fewer tokens per step than sequences")
        return self

    def refuse_unused_cuda_graphs(self, default_cuda_graph_max_batch_size: str | None) -> None:
        """A cudaGraphMaxBatchSize raised above maxNumSeqs would be silently ignored (the render captures
        graphs up to maxNumSeqs only). At its default (Pulumi.yaml's, the caller's to read) it follows a
        lowered maxNumSeqs down: a user who lowered maxNumSeqs is not told about a setting never written."""
        if (self.enforce_eager or self.cuda_graph_max_batch_size <= self.max_num_seqs
                or str(self.cuda_graph_max_batch_size) == default_cuda_graph_max_batch_size):
            return
        seqs = f"{self.key('max_num_seqs')} ({self.max_num_seqs})"
        raise ConfigError(self.key("cuda_graph_max_batch_size"), self.cuda_graph_max_batch_size,
                          f"at most {seqs}, or a higher {self.key('max_num_seqs')}",
                          "no batch is larger, so a larger CUDA graph would never run")

    def _phase(self, phase: Phase) -> dict[str, Any]:
        most = getattr(self, f"{phase}_max_replicas")
        return {
            "kv_role": DEFAULT_KV_ROLE[phase],
            "replicas": {
                "min_replicas": getattr(self, f"{phase}_replicas"), "max_replicas": most or None,
                "target_ongoing_requests": getattr(self, f"{phase}_target_ongoing_requests"),
                "upscale_delay_s": getattr(self, f"{phase}_upscale_delay_s"),
                "downscale_delay_s": getattr(self, f"{phase}_downscale_delay_s"),
            },
        }

    def app(self, api_keys: KeyedIngress | None = None) -> PDAppConfig:
        """The typed PD application these settings describe; `api_keys`: its ingress checks keys."""
        model = {"model_id": self.model_id, "model_source": self.model_source}
        if self.tokenizer_source is not None:
            model["tokenizer_source"] = self.tokenizer_source
        return PDAppConfig.model_validate({
            "model": model,
            "engine": {
                "max_model_len": self.max_model_len, "dtype": self.dtype, "quantization": self.quantization,
                "gpu_memory_utilization": self.gpu_memory_utilization, "enforce_eager": self.enforce_eager,
                "cuda_graph_max_batch_size": self.cuda_graph_max_batch_size,
                "max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
                "vision_inputs": self.vision_inputs, "kv_cache_from_plan": self.kv_cache_from_plan,
                "tensor_parallel_size": self.tensor_parallel_size,
                "pipeline_parallel_size": self.pipeline_parallel_size,
                "extra_engine_kwargs": dict(self.extra_engine_kwargs),
            },
            "kv_transfer": {"backends": self.kv_backends},
            "stream_batching_interval_ms": self.stream_batching_interval_ms,
            "direct_streaming": self.pd_direct_streaming,
            "single_process_engine": self.single_process_engine,
            "prefill": self._phase("prefill"),
            "decode": self._phase("decode"),
            "ingress": {"api_keys": api_keys},
        })


def refuse_unknown_backends(backends: tuple[str, ...] | list[str]) -> None:
    """kvBackends names NIXL backends, each once: checked where the stack file is read and again where
    an app built otherwise (the lab's overlays) is checked."""
    unknown = [b for b in backends if b not in KV_BACKENDS]
    if not backends or unknown or len(set(backends)) != len(backends):
        raise ConfigError(ServeAppSettings.key("kv_backends"), list(backends),
                          ServeAppSettings.model_fields["kv_backends"].description or "",
                          f"unknown NIXL backend {unknown[0]!r}" if unknown else None)


def engine_setting(app: PDAppConfig, phase: Phase, field: str) -> str:
    """The setting that decides engine `field` for `phase`: the per-phase override's path when the
    app sets one (not a stack key), else the shared stack key."""
    if getattr(app.phase(phase).engine, field) not in (None, {}):
        return f"{phase}.engine.{field}"
    return ServeAppSettings.key(field)
