"""The prefill/decode (PD) serving application as typed, frozen data.

`PDAppConfig` is everything the RayService's serveConfigV2 says about the LLM: which model, how
both vLLM engines run, how KV moves from prefill to decode, how many replicas of each phase, and
where the app is mounted. `render.py` turns it into the exact dict Ray Serve receives;
`checks.py` refuses a config that would fail or crawl on the GPU nodes.

Every default reproduces the reference deployment (docs/SOURCES.md#reference-serve-config): model
`Qwen/Qwen3.5-9B` served as `qwen3.5-9b`, max_model_len 4096, bfloat16, gpu_memory_utilization
0.90, NixlConnector over LIBFABRIC, one replica per phase. Two departures: the KV role, explained
in `KV_ROLE_DECISION` below, and CUDA graphs instead of the reference's enforce_eager, decided from
measurements (EngineSettings.enforce_eager).

Engine settings are shared by both phases (`engine`) and can be overridden per phase
(`prefill.engine`, `decode.engine`): the two phases must agree on the model, but not on, say,
gpu_memory_utilization. `PDAppConfig.engine_for(phase)` gives the effective settings.

No ray or vllm import here: the Pulumi program imports this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Phase = Literal["prefill", "decode"]
PHASES: tuple[Phase, Phase] = ("prefill", "decode")

# vLLM's `--dtype` choices (vllm/config/model.py ModelDType, 0.26 and 0.29 alike).
Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
DTYPES: tuple[str, ...] = Dtype.__args__  # type: ignore[attr-defined]
# Weight quantization: "" serves the checkpoint's dtype, "fp8" vLLM's online FP8 quantization of it.
Quantization = Literal["", "fp8"]

# vLLM's KVTransferConfig.kv_role (vllm/config/kv_transfer.py KVRole, 0.26 and 0.29 alike).
KvRole = Literal["kv_producer", "kv_consumer", "kv_both"]
KV_ROLES: tuple[str, ...] = KvRole.__args__  # type: ignore[attr-defined]

KV_ROLE_DECISION = """\
Render per-phase roles: prefill `kv_producer`, decode `kv_consumer` (not the reference's kv_both).

Why (read from the installed sources: Ray 2.60.0, vLLM 0.29.0):
- vllm/config/kv_transfer.py: KVRole = Literal[kv_producer, kv_consumer, kv_both]; any other value,
  or no kv_role when kv_connector is set, raises in KVTransferConfig.__post_init__. The same three
  values exist in vLLM 0.26.0 (the image), so both renders parse on both versions.
- vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py (NixlBaseConnector.__init__) logs
  "Using kv_role='kv_both' with NixlConnector is deprecated and will be removed in a future
  release. Please set kv_role='kv_producer' for prefill instances and kv_role='kv_consumer' for
  decode instances." vLLM 0.26 in the image logs the same deprecation (as the team reports from
  running it); a render that keeps kv_both would break on the first vLLM that removes it.
- NixlConnector is pull-based: decode READs prefill's blocks. What an engine does per request is
  set by kv_transfer_params (do_remote_decode on prefill, do_remote_prefill on decode), which Ray
  Serve LLM's PD orchestrator fills in; the role only gates side behaviours: a producer counts as
  "requires_kv_delivery" (a preempted request is recomputed rather than handing off freed blocks)
  and a consumer defers block frees under async scheduling (v1/core/sched/scheduler.py). Those
  are exactly right for prefill and decode respectively.
- Ray 2.60 (ray/llm/_internal/serve/serving_patterns/prefill_decode/builder.py PDServingArgs and
  engines/vllm/kv_transfer/nixl.py) never reads kv_role: it requires kv_transfer_config on both
  sides and sets engine_id to `<engine_id or 6 random characters>-<host>-<port>`. The render leaves
  engine_id out: decode's NixlConnector caches a peer's NIXL metadata by engine id, so a fixed id
  makes a restarted prefill engine (same host, same port) look like the one that died, and decode
  keeps reading from its stale registration (measured on the H200: `transfer_setup_failed` on every
  request until decode restarted; docs/OPERATE.md, what survives what). A random part
  per engine start makes decode hand-shake with the new engine.
kv_both stays allowed per phase (PhaseSettings.kv_role) for a byte-for-byte copy of the AWS sample;
checks.py refuses only roles a phase cannot play (a kv_consumer prefill, a kv_producer decode).
"""

# The roles each phase may play: a prefill engine must be able to produce KV, a decode engine
# must be able to consume it. kv_both can do either.
ROLES_FOR_PHASE: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "prefill": ("kv_producer", "kv_both"),
    "decode": ("kv_consumer", "kv_both"),
})
DEFAULT_KV_ROLE: Mapping[str, KvRole] = MappingProxyType({"prefill": "kv_producer", "decode": "kv_consumer"})

# NIXL transfer backends vLLM's NixlConnector passes to the NIXL agent. LIBFABRIC is the one that
# uses EFA at full speed; UCX (vLLM's default) runs over EFA at TCP-like speed (docs/SOURCES.md#kv-transfer-libfabric).
KV_BACKENDS: tuple[str, ...] = ("LIBFABRIC", "UCX")
EFA_KV_BACKEND = "LIBFABRIC"


# What answers HTTP in front of the Serve app: Serve's own proxy actor, or HAProxy (Ray Serve's HAProxy
# mode, RAY_SERVE_ENABLE_HA_PROXY=1 in every Ray container; docs/SOURCES.md#direct-streaming).
HttpFront = Literal["serve-proxy", "haproxy"]
HTTP_FRONTS: tuple[str, ...] = HttpFront.__args__  # type: ignore[attr-defined]
HA_PROXY_FRONT: HttpFront = "haproxy"


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def valid_model_id(value: str) -> str:
    # Ray Serve names the deployments Prefill:<id>/Decode:<id> and refuses '#' in a deployment name
    # (ray/serve/deployment.py); spaces and control characters have no place in an API model name.
    if "#" in value or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("model_id must be printable, without spaces or '#'")
    return value


def served_name_of(model_source: str) -> str:
    """The name clients send for `model_source` when `modelId` is "": its last path part, lower case
    (Qwen/Qwen3.5-9B -> qwen3.5-9b, s3://bucket/models/Llama-3.1-8B -> llama-3.1-8b)."""
    last = model_source.rstrip("/").rsplit("/", 1)[-1]
    return "".join(c for c in last.lower() if c.isprintable() and not c.isspace() and c != "#") or "model"


S3_SCHEME = "s3://"
# S3 bucket names: 3–63 lowercase letters, digits, '.' and '-', starting and ending with a letter or
# digit (S3 user guide, "Bucket naming rules").
_S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# The Run:ai Model Streamer's load formats: vLLM loads weights from S3 itself only with one of them
# (Ray Serve LLM then downloads nothing: ray/llm/_internal/common/utils/download_utils.py
# STREAMING_LOAD_FORMATS); from local disk they are an opt-in.
S3_LOAD_FORMAT = "runai_streamer"
STREAMER_LOAD_FORMATS = ("runai_streamer", "runai_streamer_sharded")


def s3_location(uri: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; ValueError unless both are there. The prefix is
    required: the Ray pods' role may read that prefix and nothing else in the bucket."""
    bucket, _, prefix = uri.removeprefix(S3_SCHEME).partition("/")
    prefix = prefix.strip("/")
    if not uri.startswith(S3_SCHEME) or not _S3_BUCKET.match(bucket) or ".." in bucket:
        raise ValueError("not s3://<bucket>/<prefix> with a valid bucket name")
    if not prefix:
        raise ValueError("names a whole bucket; give the prefix the model was copied to")
    return bucket, prefix


class ModelSettings(FrozenModel):
    """The model both phases serve."""

    model_id: str = Field("qwen3.5-9b", min_length=1,
                          description="Name clients use in the OpenAI `model` field.")
    model_source: str = Field("Qwen/Qwen3.5-9B", min_length=1,
                              description="Hugging Face id, s3:// mirror or local path of the weights.")
    tokenizer_source: str | None = Field(None, description="Tokenizer location when it differs from model_source.")

    @field_validator("model_id")
    @classmethod
    def _model_id_names_a_deployment(cls, value: str) -> str:
        return valid_model_id(value)

    @property
    def s3_mirror(self) -> tuple[str, str] | None:
        """(bucket, prefix) when the weights come from an S3 mirror, else None."""
        return s3_location(self.model_source) if self.model_source.startswith(S3_SCHEME) else None

    @property
    def architecture_key(self) -> str:
        """What names the architecture: the Hugging Face id, or for a mirror made by `pdctl
        mirror-model` (`<prefix>/<org>/<name>`) the id its last two path parts spell."""
        if self.s3_mirror is None:
            return self.model_source
        return "/".join(self.s3_mirror[1].split("/")[-2:])


# Engine arguments extra_engine_kwargs may not carry: each has its own typed field, so one place
# decides each value and the capacity check sees what vLLM gets.
OWNED_ENGINE_KWARGS: tuple[str, ...] = (
    "max_model_len", "dtype", "gpu_memory_utilization", "enforce_eager", "compilation_config", "tensor_parallel_size",
    "pipeline_parallel_size", "kv_transfer_config", "model", "tokenizer", "served_model_name", "max_num_seqs",
    "max_num_batched_tokens", "language_model_only", "kv_cache_memory_bytes", "quantization",
)
# Engine arguments the Ray Serve LLM builder refuses outright (DEPLOY_FAILED on the cluster).
REFUSED_ENGINE_KWARGS: Mapping[str, str] = MappingProxyType({
    "disable_log_stats": "Ray Serve LLM 2.60's LLMConfig refuses it while log_engine_metrics is on (its default)",
})


def _no_owned_engine_kwargs(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    for name in kwargs:
        if name in OWNED_ENGINE_KWARGS:
            raise ValueError(f"extra_engine_kwargs may not set {name}: it has its own field")
        if name in REFUSED_ENGINE_KWARGS:
            raise ValueError(f"extra_engine_kwargs may not set {name}: {REFUSED_ENGINE_KWARGS[name]}")
    return kwargs


class EngineSettings(FrozenModel):
    """vLLM engine arguments both phases share (unless a phase overrides them)."""

    max_model_len: int = Field(4096, gt=0, description="Longest prompt + completion, in tokens.")
    dtype: Dtype = Field("bfloat16", description="Weight and activation dtype.")
    # FP8 weights: 10.39 GiB instead of 16.80 for the stack's model on an L4's budget, 462 KV blocks on a
    # first start instead of 62 (docs/PROVEN.md#first-start); sized by serve_app/capacity.py.
    quantization: Quantization = Field("", description='"" (the checkpoint\'s dtype) or "fp8" (FP8 weights).')
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1,
                                          description="Fraction of GPU memory vLLM may use (weights + KV cache).")
    # CUDA graphs by default: measured on an H200 with a stand-in model (docs/PROVEN.md#serving-defaults),
    # decode TPOT p50 4.4–4.6 ms with graphs against 17.5–24.5 ms eager at concurrency 1, 3–4× the output
    # tokens/s at 8 and 32, for 10–27 s more engine start-up; on the stack's own model on an L4's memory
    # they cost 0.13 GiB of KV cache (docs/PROVEN.md#default-deployment).
    enforce_eager: bool = Field(False, description="Skip CUDA graph capture: faster start, 3–4× slower decode.")
    cuda_graph_max_batch_size: int = Field(
        32, ge=1, le=512,
        description="Largest decode batch captured as a CUDA graph (without enforce_eager); larger batches run eager.")
    # Rendered, never left to vLLM: its defaults follow the GPU (256 sequences and 2048 batched tokens
    # under 70 GiB, 1024 and 8192 above), so an H200 and an L4 would run different engines. A hybrid
    # (Gated-DeltaNet) model also needs one Mamba cache block per sequence to capture CUDA graphs: on an
    # L4's memory 256 sequences do not start (docs/PROVEN.md#default-deployment).
    max_num_seqs: int = Field(32, ge=1, le=1024, description="Most sequences one engine runs at once.")
    max_num_batched_tokens: int = Field(
        2048, ge=16, description="Most tokens one engine step processes (chunked prefill splits longer prompts).")
    # Text-only serving by default: the vision encoder of a multimodal checkpoint stays unloaded (vLLM's
    # `language_model_only`; a text-only model ignores it), which leaves its weights' memory to the KV cache.
    vision_inputs: bool = Field(False, description="Load a multimodal model's vision encoder and accept images.")
    # On by default: with the compile caches empty, vLLM's memory profiling leaves a new node's first start
    # 62 KV blocks where a restart holds 167 (docs/PROVEN.md#first-start); a fixed size takes that
    # penalty away. Rendered only where serve_app/capacity.py knows a restart's KV bytes (checks.py).
    kv_cache_from_plan: bool = Field(
        True, description="Fix the KV cache (vLLM kv_cache_memory_bytes) at a restart's size, from the plan.")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one replica shards each layer across.")
    pipeline_parallel_size: int = Field(1, ge=1, description="GPUs one replica splits its layers across.")
    extra_engine_kwargs: Mapping[str, Any] = Field(
        default_factory=dict,
        description="Further vLLM engine arguments, passed through as given (names checked against the "
                    "image's vLLM EngineArgs by serve_app.checks).",
    )

    @field_validator("extra_engine_kwargs")
    @classmethod
    def _extra_kwargs_are_extra(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        return _no_owned_engine_kwargs(value)

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


class EngineOverrides(FrozenModel):
    """Per-phase departures from the shared `EngineSettings`; None keeps the shared value."""

    max_model_len: int | None = Field(None, gt=0)
    dtype: Dtype | None = None
    quantization: Quantization | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    enforce_eager: bool | None = None
    cuda_graph_max_batch_size: int | None = Field(None, ge=1, le=512)
    max_num_seqs: int | None = Field(None, ge=1, le=1024)
    max_num_batched_tokens: int | None = Field(None, ge=16)
    vision_inputs: bool | None = None
    kv_cache_from_plan: bool | None = None
    tensor_parallel_size: int | None = Field(None, ge=1)
    pipeline_parallel_size: int | None = Field(None, ge=1)
    extra_engine_kwargs: Mapping[str, Any] = Field(
        default_factory=dict, description="Merged over the shared extra_engine_kwargs, key by key.")

    @field_validator("extra_engine_kwargs")
    @classmethod
    def _extra_kwargs_are_extra(cls, value: Mapping[str, Any]) -> Mapping[str, Any]:
        return _no_owned_engine_kwargs(value)

    def apply_to(self, shared: EngineSettings) -> EngineSettings:
        update: dict[str, Any] = {
            name: value for name, value in self if value is not None and name != "extra_engine_kwargs"
        }
        update["extra_engine_kwargs"] = {**shared.extra_engine_kwargs, **self.extra_engine_kwargs}
        return shared.model_copy(update=update)


# Ray Serve's own AutoscalingConfig defaults (ray/serve/config.py, Ray 2.60.0): rendered explicitly
# so the serve config says what the phase does, and an upgrade that moves a default is a visible diff.
SERVE_TARGET_ONGOING_REQUESTS = 2
SERVE_UPSCALE_DELAY_S = 30
SERVE_DOWNSCALE_DELAY_S = 600


class Replicas(FrozenModel):
    """Fixed replica count (max_replicas None) or Ray Serve autoscaling bounds and pace."""

    min_replicas: int = Field(1, ge=1, description="Replicas always running (the fixed count when not autoscaling).")
    max_replicas: int | None = Field(None, ge=1, description="Upper autoscaling bound; None = fixed at min_replicas.")
    target_ongoing_requests: int = Field(
        SERVE_TARGET_ONGOING_REQUESTS, ge=1,
        description="Requests in flight per replica Serve scales to keep (autoscaling only).")
    upscale_delay_s: int = Field(
        SERVE_UPSCALE_DELAY_S, ge=0, description="Seconds of excess load before adding a replica.")
    downscale_delay_s: int = Field(
        SERVE_DOWNSCALE_DELAY_S, ge=0, description="Seconds of spare capacity before removing a replica.")

    @model_validator(mode="after")
    def _bounds_ordered(self) -> Replicas:
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas {self.max_replicas} < min_replicas {self.min_replicas}")
        return self

    @property
    def autoscaling(self) -> bool:
        return self.max_replicas is not None

    @property
    def most(self) -> int:
        return self.max_replicas if self.max_replicas is not None else self.min_replicas


class PhaseSettings(FrozenModel):
    """What differs between the prefill and the decode deployment."""

    kv_role: KvRole
    replicas: Replicas = Replicas()
    engine: EngineOverrides = EngineOverrides()


class KvTransferSettings(FrozenModel):
    """How KV blocks move from prefill to decode."""

    connector: Literal["NixlConnector"] = "NixlConnector"
    backends: tuple[str, ...] = Field((EFA_KV_BACKEND,), min_length=1,
                                      description="NIXL backends; LIBFABRIC is the one that uses EFA.")


class KeyedIngress(FrozenModel):
    """The ingress checks API keys (front_door/ingress.py, shipped to the Ray pods by the stack)."""

    keys_file: str = Field(min_length=1, description="Where the Ray pods mount the key table.")
    code_version: str = Field(min_length=1, description=(
        "A digest of the front door's code: a change restarts the app's deployments (Serve hashes the app's "
        "args into their code version), so the ingress imports the new code."))


class IngressSettings(FrozenModel):
    """The OpenAI ingress deployment in front of decode. Empty = Ray Serve LLM's defaults."""

    deployment_config: Mapping[str, Any] = Field(
        default_factory=dict, description="Ray @serve.deployment options for the ingress (e.g. num_replicas).")
    api_keys: KeyedIngress | None = Field(None, description="None: Ray Serve LLM's own ingress, which checks no key.")

    @property
    def replicas(self) -> int:
        """The most ingress replicas Serve runs (Ray Serve LLM's default: one)."""
        config = self.deployment_config
        return int(config.get("num_replicas") or (config.get("autoscaling_config") or {}).get("max_replicas") or 1)


class PDAppConfig(FrozenModel):
    """The whole PD application, as serveConfigV2 will carry it."""

    name: str = Field("llm", min_length=1, description="Serve application name.")
    route_prefix: str = Field("/", description="HTTP path the OpenAI API is mounted under.")
    model: ModelSettings = ModelSettings()
    engine: EngineSettings = EngineSettings()
    kv_transfer: KvTransferSettings = KvTransferSettings()
    prefill: PhaseSettings = PhaseSettings(kv_role=DEFAULT_KV_ROLE["prefill"])
    decode: PhaseSettings = PhaseSettings(kv_role=DEFAULT_KV_ROLE["decode"])
    accelerator_type: str | None = Field(
        None, description="Ray accelerator type both phases require (L4, A10G, H100, …); None = any GPU.")
    # Ray Serve LLM's own default, kept: measured on an H200, 5 ms (or 0) takes 20–26 ms off TTFT at
    # concurrency 1 but saturates the single OpenAI ingress replica at 32 (output tokens/s 3282 → 1882,
    # TPOT 7.0 → 14.2 ms; stand-in model, docs/PROVEN.md#serving-defaults).
    stream_batching_interval_ms: int = Field(
        50, ge=0, le=1000,
        description="How often Ray Serve LLM flushes streamed tokens to the client (0 = every token).")
    # Off by default: measured worthwhile on an H200, but not shown under KubeRay on EKS. It needs Ray
    # Serve's HAProxy mode (checks.py), and decode becomes the ingress (docs/SOURCES.md#direct-streaming).
    direct_streaming: bool = Field(
        False, description="Decode serves the OpenAI API itself (Ray Serve LLM direct streaming): one hop less.")
    # Off by default until a GPU times it (docs/PROVEN.md#serve-replica-start); the CPU shows the processes.
    single_process_engine: bool = Field(
        False, description="Engines start in the replica and its engine core only (front_door/engine.py).")
    ingress: IngressSettings = IngressSettings()

    @field_validator("route_prefix")
    @classmethod
    def _route_prefix_serve_accepts(cls, value: str) -> str:
        # Ray Serve's rules (ray/serve/schema.py _route_prefix_format).
        if not value.startswith("/") or (len(value) > 1 and value.endswith("/")) or "{" in value or "}" in value:
            raise ValueError("route_prefix must start with '/', not end with '/' (unless it is '/'), "
                             "and contain no '{' or '}'")
        return value

    @model_validator(mode="after")
    def _direct_streaming_has_no_ingress_deployment(self) -> PDAppConfig:
        # Ray Serve LLM refuses ingress_deployment_config under direct streaming: there is no ingress
        # deployment (ray/llm/_internal/serve/core/ingress/builder.py _validate_direct_streaming_ingress_config).
        if self.direct_streaming and (self.ingress.deployment_config or self.ingress.api_keys):
            raise ValueError("direct_streaming has no ingress deployment: configure decode's deployment instead "
                             "of ingress.deployment_config, and serve API keys without direct streaming")
        return self

    def phase(self, phase: Phase) -> PhaseSettings:
        return self.prefill if phase == "prefill" else self.decode

    @property
    def stream_tick_seconds(self) -> float:
        """How often a stream is flushed to its client, in seconds: a first token waits for the next flush."""
        return self.stream_batching_interval_ms / 1000

    def engine_for(self, phase: Phase) -> EngineSettings:
        return self.phase(phase).engine.apply_to(self.engine)


__all__ = [
    "DEFAULT_KV_ROLE",
    "DTYPES",
    "EFA_KV_BACKEND",
    "HA_PROXY_FRONT",
    "HTTP_FRONTS",
    "KV_BACKENDS",
    "KV_ROLES",
    "KV_ROLE_DECISION",
    "OWNED_ENGINE_KWARGS",
    "PHASES",
    "REFUSED_ENGINE_KWARGS",
    "ROLES_FOR_PHASE",
    "SERVE_DOWNSCALE_DELAY_S",
    "SERVE_TARGET_ONGOING_REQUESTS",
    "SERVE_UPSCALE_DELAY_S",
    "Dtype",
    "EngineOverrides",
    "EngineSettings",
    "HttpFront",
    "IngressSettings",
    "KeyedIngress",
    "KvRole",
    "KvTransferSettings",
    "ModelSettings",
    "PDAppConfig",
    "Phase",
    "PhaseSettings",
    "Quantization",
    "Replicas",
    "valid_model_id",
]
