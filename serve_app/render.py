"""`PDAppConfig` → the exact data Ray Serve receives. Plain dicts; YAML only via yaml.safe_dump.

- `pd_serving_args(app)`: the `args` of `ray.serve.llm:build_pd_openai_app` (Ray's PDServingArgs:
  prefill_config, decode_config, and the ingress options when set).
- `serve_config_v2(app)`: the whole RayService `spec.serveConfigV2` document.
- `deployment_names(app)`: the Serve deployment names Ray derives from the config, for status
  checks and dashboards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from serve_app.config import S3_LOAD_FORMAT, EngineSettings, PDAppConfig, Phase

PD_BUILDER_IMPORT_PATH = "ray.serve.llm:build_pd_openai_app"

# Where Ray Serve's HTTP proxy listens. KubeRay's `<rayservice>-serve-svc` targets the pods' `serve`
# container port, which components/manifests/ray_service.py sets from this constant, and the proxy must listen on
# all pod interfaces for that Service to reach it. These equal ServeDeploySchema's defaults
# (ray/serve/schema.py HTTPOptionsSchema); rendering them pins the contract instead of relying on a
# default that Serve cannot change once started.
SERVE_HTTP_PORT = 8000
SERVE_HTTP_HOST = "0.0.0.0"

# Environment switches Ray reads once, at import (docs/SOURCES.md#direct-streaming). HAProxy mode goes in
# every Ray container's environment (components/manifests/ray_service.py); direct streaming in the
# application's runtime_env, which the controller's build task and every replica of the app get.
HA_PROXY_ENV = "RAY_SERVE_ENABLE_HA_PROXY"
DIRECT_STREAMING_ENV = "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"
# Every worker of a hybrid (Mamba / Gated-DeltaNet) model: vLLM's NIXL connector moves the conv state
# only in this layout (vLLM 0.26 kv_connector/v1/nixl/base_worker.py asserts it).
HYBRID_WORKER_ENV = {"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}

INGRESS_DEPLOYMENT_NAME = "OpenAiIngress"
# Ray Serve LLM's ingress with API keys, per-key limits and accounting (front_door/ingress.py); the
# Ray pods import it from the ConfigMap the stack mounts (components/front_door.py). Serve would name
# the deployment after the class; it keeps the usual name, which dashboards and `pdctl status` read.
KEYED_INGRESS_CLASS = "front_door.ingress:KeyedOpenAiIngress"
# The engine Ray Serve LLM builds for every LLM replica when this names it (core/server/llm_server.py
# `_get_default_engine_class`; build_pd_openai_app gives its prefill and decode servers no engine class of
# their own): the single-process start, from the same ConfigMap.
ENGINE_CLASS_ENV = "RAYLLM_VLLM_ENGINE_CLS"
SINGLE_PROCESS_ENGINE_CLASS = "front_door.engine:SingleProcessVLLMEngine"
# Ray Serve LLM names each phase's deployment `<Prefill|Decode>:<model id>`.
PHASE_DEPLOYMENT_PREFIX = {"prefill": "Prefill:", "decode": "Decode:"}


def cuda_graph_capture_sizes(engine: EngineSettings) -> list[int]:
    """Batch sizes vLLM captures as CUDA graphs: 1, 2, 4, 8, then every 8 to 32, then every 16, up to
    cuda_graph_max_batch_size (and no more than max_num_seqs: a larger batch never runs). Up to 64 this
    is the list measured on the H200 (9 graphs, 1–2 s of capture); vLLM's own default (51 sizes to 512)
    took 6 s for batches this stack rarely reaches."""
    most = min(engine.cuda_graph_max_batch_size, engine.max_num_seqs)
    sizes = [1, 2, 4, 8, *range(16, 33, 8), *range(48, most + 1, 16)]
    return sorted({size for size in sizes if size <= most} | {most})


def engine_kwargs(app: PDAppConfig, phase: Phase, kv_cache_memory_bytes: int | None = None) -> dict[str, Any]:
    """vLLM engine arguments of one phase, kv_transfer_config included; `kv_cache_memory_bytes`: the
    phase's fixed KV cache, as serve_app/checks.py sized it (None: vLLM's memory profiling sizes it)."""
    engine: EngineSettings = app.engine_for(phase)
    settings = app.phase(phase)
    kwargs: dict[str, Any] = {
        "max_model_len": engine.max_model_len,
        "dtype": engine.dtype,
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "enforce_eager": engine.enforce_eager,
        "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": engine.max_num_batched_tokens,
    }
    if kv_cache_memory_bytes is not None:
        # vLLM then skips its memory profiling's KV sizing (and its fit check): the first start on a new
        # node, whose profiling would count the compile caches' build, holds a restart's KV blocks.
        kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
    if engine.quantization:
        kwargs["quantization"] = engine.quantization
    if not engine.vision_inputs:
        kwargs["language_model_only"] = True
    # Parallel sizes are rendered only when they leave vLLM's default of 1, so the default render is
    # the reference deployment's engine_kwargs key for key.
    if engine.tensor_parallel_size != 1:
        kwargs["tensor_parallel_size"] = engine.tensor_parallel_size
    if engine.pipeline_parallel_size != 1:
        kwargs["pipeline_parallel_size"] = engine.pipeline_parallel_size
    if not engine.enforce_eager:
        kwargs["compilation_config"] = {"cudagraph_capture_sizes": cuda_graph_capture_sizes(engine)}
    if app.model.s3_mirror is not None:
        # vLLM streams the safetensors from S3 straight to the GPU (docs/SOURCES.md#runai-streamer);
        # extra_engine_kwargs may pick the sharded variant (checked by ServeAppSettings).
        kwargs["load_format"] = S3_LOAD_FORMAT
    kwargs.update(engine.extra_engine_kwargs)
    kwargs["kv_transfer_config"] = {
        "kv_connector": app.kv_transfer.connector,
        "kv_role": settings.kv_role,
        "kv_connector_extra_config": {"backends": list(app.kv_transfer.backends)},
    }
    return kwargs


# The Ray custom resource each phase's worker group advertises (one unit per GPU) and each of the
# phase's placement group bundles asks for: a replica of one phase can only be placed on a pod of its
# own group, so Serve scaling decode up makes the Ray autoscaler add a decode pod, never take a
# prefill one. components/manifests/ray_service.py puts the same names on the worker groups.
PHASE_RESOURCE: dict[str, str] = {"prefill": "pd-prefill", "decode": "pd-decode"}
# Ray Serve LLM's own bundle for each GPU worker of an engine (engines/vllm/vllm_models.py
# placement_bundles → core/configs/accelerators.py GPU default_bundles, Ray 2.60.0; the replica
# actor's CPU is merged into the first bundle) and its default strategy.
ENGINE_BUNDLE = {"GPU": 1}
ENGINE_PLACEMENT_STRATEGY = "PACK"


def deployment_config(app: PDAppConfig, phase: Phase) -> dict[str, Any]:
    replicas = app.phase(phase).replicas
    if not replicas.autoscaling:
        return {"num_replicas": replicas.min_replicas}
    return {"autoscaling_config": {
        "min_replicas": replicas.min_replicas,
        "max_replicas": replicas.max_replicas,
        "target_ongoing_requests": replicas.target_ongoing_requests,
        "upscale_delay_s": replicas.upscale_delay_s,
        "downscale_delay_s": replicas.downscale_delay_s,
    }}


def placement_group_config(phase: Phase) -> dict[str, Any]:
    """LLMConfig.placement_group_config: Ray Serve LLM's default bundle per GPU worker (tp × pp of
    them) plus one unit of the phase's custom resource, so the engine lands on its phase's pods."""
    return {"bundle_per_worker": {**ENGINE_BUNDLE, PHASE_RESOURCE[phase]: 1}, "strategy": ENGINE_PLACEMENT_STRATEGY}


def llm_config(app: PDAppConfig, phase: Phase, kv_cache_memory_bytes: int | None = None) -> dict[str, Any]:
    """One phase's Ray Serve LLM `LLMConfig`, as a dict."""
    model_loading: dict[str, Any] = {"model_id": app.model.model_id, "model_source": app.model.model_source}
    if app.model.tokenizer_source is not None:
        model_loading["tokenizer_source"] = app.model.tokenizer_source
    config: dict[str, Any] = {
        "model_loading_config": model_loading,
        "engine_kwargs": engine_kwargs(app, phase, kv_cache_memory_bytes),
        "deployment_config": deployment_config(app, phase),
        "placement_group_config": placement_group_config(phase),
    }
    if app.accelerator_type is not None:
        config["accelerator_type"] = app.accelerator_type
    config["experimental_configs"] = {"stream_batching_interval_ms": app.stream_batching_interval_ms}
    return config


def pd_serving_args(app: PDAppConfig, kv_cache_memory_bytes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The `args` dict of `ray.serve.llm:build_pd_openai_app` (Ray's PDServingArgs);
    `kv_cache_memory_bytes`: each phase's fixed KV cache, where one is sized."""
    fixed = kv_cache_memory_bytes or {}
    args: dict[str, Any] = {
        "prefill_config": llm_config(app, "prefill", fixed.get("prefill")),
        "decode_config": llm_config(app, "decode", fixed.get("decode")),
    }
    keyed = app.ingress.api_keys
    if app.ingress.deployment_config or keyed is not None:
        args["ingress_deployment_config"] = {
            **({"name": INGRESS_DEPLOYMENT_NAME} if keyed is not None else {}), **app.ingress.deployment_config}
    if keyed is not None:
        args["ingress_cls_config"] = {"ingress_cls": KEYED_INGRESS_CLASS, "ingress_extra_kwargs": {
            "keys_file": keyed.keys_file, "ingress_replicas": app.ingress.replicas,
            "code_version": keyed.code_version}}
    return args


def serve_config_v2(app: PDAppConfig, kv_cache_memory_bytes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The RayService `spec.serveConfigV2` document (Ray Serve's ServeDeploySchema)."""
    application: dict[str, Any] = {
        "name": app.name,
        "route_prefix": app.route_prefix,
        "import_path": PD_BUILDER_IMPORT_PATH,
        "args": pd_serving_args(app, kv_cache_memory_bytes),
    }
    env_vars = {**({DIRECT_STREAMING_ENV: "1"} if app.direct_streaming else {}),
                **({ENGINE_CLASS_ENV: SINGLE_PROCESS_ENGINE_CLASS} if app.single_process_engine else {})}
    if env_vars:
        application["runtime_env"] = {"env_vars": env_vars}
    return {
        "http_options": {"host": SERVE_HTTP_HOST, "port": SERVE_HTTP_PORT},
        "applications": [application],
    }


def serve_config_v2_yaml(app: PDAppConfig) -> str:
    """serveConfigV2 as the YAML string KubeRay's CRD field takes."""
    return yaml.safe_dump(serve_config_v2(app), sort_keys=False, default_flow_style=False)


def serve_deployment_id(model_id: str) -> str:
    """Ray Serve LLM's deployment-name form of a model id ('/' → '--', '.' → '_')."""
    return model_id.replace("/", "--").replace(".", "_")


def deployment_names(app: PDAppConfig) -> dict[str, str]:
    """Serve deployment names of the app: {'prefill': 'Prefill:<id>', 'decode': 'Decode:<id>', 'ingress': ...}."""
    deployment_id = serve_deployment_id(app.model.model_id)
    return {
        "prefill": f"{PHASE_DEPLOYMENT_PREFIX['prefill']}{deployment_id}",
        "decode": f"{PHASE_DEPLOYMENT_PREFIX['decode']}{deployment_id}",
        "ingress": INGRESS_DEPLOYMENT_NAME,
    }
