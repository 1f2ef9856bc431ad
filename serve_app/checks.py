"""Preview-time checks of the PD app against the GPU nodes it will run on. Pure; no ray/vllm import.

`check_app(app, target)` (the target: serve_app/targets.py) raises `ConfigError` (naming the stack
config key) on the first thing that would fail on the cluster, or silently crawl, and otherwise
returns the `CheckedApp`: the app with its serveConfigV2 rendered once and the capacity report of
each phase (serve_app/fit.py), which the RayService and the plan both take from here. It runs
before any resource is registered, so a wrong serve config costs nothing.

The lists below are what Ray 2.60.0 and vLLM 0.29.0 accept, read from their sources (paths given);
the real-validator tier (tests that import ray and vllm) keeps them honest.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from facts.images import RAY_SERVE_CONFIG_FEATURES, VLLM_ENGINE_FEATURES, version_tuple
from facts.instances import COMPUTE_CAPABILITY
from facts.models import ModelArchitecture, known_model
from facts.vllm_engine_args import engine_arg_names
from facts.vllm_engine_args import versions as engine_args_versions
from serve_app.capacity import SIZED_KV_CACHE_DTYPES, UCX_ON_EFA_BYTES_PER_SECOND, CapacityReport
from serve_app.config import (
    EFA_KV_BACKEND,
    HA_PROXY_FRONT,
    PHASES,
    ROLES_FOR_PHASE,
    PDAppConfig,
    Phase,
)
from serve_app.errors import ConfigError
from serve_app.fit import check_capacity, kv_cache_dtype
from serve_app.render import DIRECT_STREAMING_ENV, HA_PROXY_ENV, serve_config_v2
from serve_app.settings import ServeAppSettings, engine_setting, refuse_unknown_backends
from serve_app.targets import DeploymentTarget, NodeGroupTarget, PhaseNodes, phase_nodes

# ray/llm/_internal/serve/serving_patterns/prefill_decode/builder.py PDServingArgs (extra=forbid).
PD_SERVING_ARGS_KEYS = ("prefill_config", "decode_config", "ingress_cls_config", "ingress_deployment_config")
# Accepted by Ray ≤ 2.59, refused by 2.60's PDServingArgs.
REMOVED_PD_SERVING_ARGS_KEYS = ("proxy_cls_config", "proxy_deployment_config")
# ray/llm/_internal/serve/core/configs/llm_config.py LLMConfig fields (extra=forbid).
LLM_CONFIG_KEYS = (
    "runtime_env", "model_loading_config", "llm_engine", "engine_kwargs", "accelerator_type",
    "accelerator_config", "placement_group_config", "lora_config", "deployment_config", "server_cls",
    "experimental_configs", "log_engine_metrics", "callback_config",
)

ACCEPT_UCX_ON_EFA = ServeAppSettings.field("accept_ucx_on_efa")
DIRECT_STREAMING = ServeAppSettings.field("pd_direct_streaming")
SINGLE_PROCESS_ENGINE = ServeAppSettings.field("single_process_engine")


@dataclass(frozen=True)
class CheckedApp:
    """The app as it will deploy: checked against its GPU nodes, its serveConfigV2 rendered once."""

    config: PDAppConfig
    serve_config_v2: Mapping[str, Any]
    model: ModelArchitecture | None  # the architecture sized; None when no facts were found
    capacity: Mapping[str, CapacityReport] = field(default_factory=dict)  # phase → report
    nodes: Mapping[str, PhaseNodes] = field(default_factory=dict)  # phase → its worker group's nodes
    notes: tuple[str, ...] = ()  # what was not checked, and why
    # The notes a preview warns about (pulumi.log.warn) and `pdctl plan --strict` fails on: facts
    # the checks needed could not be read at all.
    warnings: tuple[str, ...] = ()

    @property
    def pd_serving_args(self) -> Mapping[str, Any]:
        """The `args` of ray.serve.llm:build_pd_openai_app, as rendered."""
        return self.serve_config_v2["applications"][0]["args"]


def check_kv_backends(backends: tuple[str, ...] | list[str], *, efa: bool, accept_ucx_on_efa: bool,
                      network_gbps: float | None = None) -> None:
    """EFA ⇒ LIBFABRIC; UCX on EFA only when the user accepts a much slower KV transfer.

    `network_gbps`: the GPU node's EFA bandwidth, to say how much slower on this node (about 10× on
    a 25 Gbps g6.8xlarge, far more on 3,200 Gbps p5); reports put UCX over EFA at ~0.3 GB/s.
    """
    key = ServeAppSettings.key("kv_backends")
    refuse_unknown_backends(backends)
    if efa:
        if "UCX" in backends and not accept_ucx_on_efa:
            on_this_node = ""
            if network_gbps:
                ratio = network_gbps * 1e9 / 8 / UCX_ON_EFA_BYTES_PER_SECOND
                on_this_node = f", about {ratio:,.0f}x slower than this node's {network_gbps:g} Gbps EFA"
            raise ConfigError(
                key, list(backends), f'["{EFA_KV_BACKEND}"] on EFA nodes',
                f"UCX over EFA moves KV at TCP-like speed (~{UCX_ON_EFA_BYTES_PER_SECOND / 1e9:g} GB/s"
                f"{on_this_node}; reported: ~98 s vs ~1 s TTFT for an 8k prompt) and fails silently; "
                f"set {ACCEPT_UCX_ON_EFA.key}: true only if you accept that")
    elif EFA_KV_BACKEND in backends:
        raise ConfigError(key, list(backends), '["UCX"] on nodes without EFA',
                          "LIBFABRIC needs EFA: the Ray LLM image sets FI_PROVIDER=efa")


def check_pd_serving_args(args: Mapping[str, Any]) -> None:
    """Refuse PD args Ray 2.60's build_pd_openai_app would reject by key, and a P/D model mismatch."""
    for key in args:
        if key in REMOVED_PD_SERVING_ARGS_KEYS:
            raise ConfigError(f"args.{key}", args[key], f"keys {list(PD_SERVING_ARGS_KEYS)}",
                              "removed in Ray 2.60 (PDServingArgs forbids it)")
        if key not in PD_SERVING_ARGS_KEYS:
            raise ConfigError(f"args.{key}", args[key], f"keys {list(PD_SERVING_ARGS_KEYS)}")
    for phase in PHASES:
        config = args.get(f"{phase}_config")
        if not isinstance(config, Mapping):
            raise ConfigError(f"args.{phase}_config", config, "an LLMConfig mapping")
        for key in config:
            if key not in LLM_CONFIG_KEYS:
                raise ConfigError(f"args.{phase}_config.{key}", config[key], f"LLMConfig keys {list(LLM_CONFIG_KEYS)}")
        if "kv_transfer_config" not in config.get("engine_kwargs", {}):
            raise ConfigError(f"args.{phase}_config.engine_kwargs.kv_transfer_config", None,
                              "a kv_transfer_config", "P/D needs it on both phases")
    model_ids = {phase: args[f"{phase}_config"]["model_loading_config"]["model_id"] for phase in PHASES}
    if model_ids["prefill"] != model_ids["decode"]:
        raise ConfigError(ServeAppSettings.key("model_id"), model_ids, "the same model id on both phases",
                          "decode can only continue a prompt prefilled by the same model")


def _check_kv_roles(app: PDAppConfig) -> None:
    for phase in PHASES:
        role = app.phase(phase).kv_role
        if role not in ROLES_FOR_PHASE[phase]:
            raise ConfigError(f"{phase}.kv_role", role, f"one of {list(ROLES_FOR_PHASE[phase])}",
                              f"the {phase} engine must {'produce' if phase == 'prefill' else 'consume'} KV")


def _check_parallelism_and_replicas(app: PDAppConfig, target: DeploymentTarget) -> dict[str, PhaseNodes]:
    """Each replica fits one node of its phase's group; each group holds its phases' worker groups at
    their fewest replicas (else the minimum is never reached) and at their most (else a scale-up
    stays Pending)."""
    for phase in PHASES:
        engine, group = app.engine_for(phase), target.node_group(phase)
        if engine.gpus_per_replica <= group.gpus_per_node:
            continue
        if phase in target.phase_node_groups:  # the type was picked for this phase: it is what to change
            raise group.settings.instance_type.refuse(
                group.instance.name, f"a type with at least {engine.gpus_per_replica} GPUs per node",
                f"one {phase} replica needs {engine.gpus_per_replica} GPUs (tensorParallelSize × "
                f"pipelineParallelSize) on one node; {group.instance.name} has {group.gpus_per_node}")
        field_name = ("tensor_parallel_size" if engine.tensor_parallel_size > group.gpus_per_node
                      else "pipeline_parallel_size")
        raise ConfigError(
            engine_setting(app, phase, field_name), getattr(engine, field_name),
            f"tensorParallelSize × pipelineParallelSize ≤ {group.gpus_per_node} "
            f"(GPUs per {group.instance.name} node)",
            f"one {phase} replica needs {engine.gpus_per_replica} GPUs on one node")
    nodes: dict[str, PhaseNodes] = {
        phase: phase_nodes(app, phase, target.node_group(phase).gpus_per_node) for phase in PHASES}
    for group, phases in target.node_groups():
        _check_node_group_bounds(app, nodes, group, phases)
    return nodes


def _check_node_group_bounds(app: PDAppConfig, nodes: Mapping[str, PhaseNodes], group: NodeGroupTarget,
                             phases: tuple[Phase, ...]) -> None:
    most_nodes = group.most_nodes_setting
    most_nodes_key = most_nodes.key
    node_group = f"{group.max_nodes} × {group.instance.name} ({most_nodes_key})"
    # Name the phase that takes the most nodes (decode on a tie): that is the setting to lower.
    by_weight = tuple(phase for phase in ("decode", "prefill") if phase in phases)
    at_min = sum(nodes[p].min_nodes for p in phases)
    if at_min > group.max_nodes:
        busiest = max(by_weight, key=lambda p: nodes[p].min_nodes)
        if all(app.phase(p).replicas.min_replicas == 1 for p in phases):
            # One replica each cannot be lowered: the node group is what to change.
            raise most_nodes.refuse(
                group.max_nodes, f"at least {at_min}",
                f"{_breakdown(app, nodes, phases, 'min')} = {at_min} nodes")
        raise ConfigError(
            ServeAppSettings.key(f"{busiest}_replicas"), app.phase(busiest).replicas.min_replicas,
            f"minimum replicas whose worker pods fit {node_group}",
            f"the node group cannot reach the minimum: {_breakdown(app, nodes, phases, 'min')} = {at_min} nodes; "
            f"lower the replicas or raise {most_nodes_key}")
    at_max = sum(nodes[p].max_nodes for p in phases)
    if at_max > group.max_nodes:
        busiest = max(by_weight, key=lambda p: nodes[p].max_nodes)
        replicas = app.phase(busiest).replicas
        key = ServeAppSettings.key(f"{busiest}_max_replicas" if replicas.autoscaling else f"{busiest}_replicas")
        if all(app.phase(p).replicas.most == 1 for p in phases):
            raise most_nodes.refuse(
                group.max_nodes, f"at least {at_max}",
                f"{_breakdown(app, nodes, phases, 'max')} = {at_max} nodes")
        raise ConfigError(
            key, replicas.most, f"replicas whose worker pods fit {node_group}",
            f"{_breakdown(app, nodes, phases, 'max')} = {at_max} nodes at most replicas; lower the replicas or "
            f"raise {most_nodes_key}")


def _breakdown(app: PDAppConfig, nodes: Mapping[str, PhaseNodes], phases: tuple[Phase, ...], end: str) -> str:
    parts = []
    for phase in phases:
        replicas = app.phase(phase).replicas
        count = replicas.min_replicas if end == "min" else replicas.most
        gpus = app.engine_for(phase).gpus_per_replica
        parts.append(f"{count} {phase} × {gpus} GPU on {getattr(nodes[phase], f'{end}_nodes')} node(s)")
    return " + ".join(parts)


def _check_accelerator(app: PDAppConfig, target: DeploymentTarget) -> None:
    wanted = app.accelerator_type
    for phase in PHASES:
        instance = target.node_group(phase).instance
        if wanted is not None and wanted != instance.gpu_model:
            raise ConfigError("accelerator_type", wanted, f"{instance.gpu_model} (the GPU of {instance.name}) or unset",
                              "Ray would wait forever for a node with that accelerator")


# vLLM's FP8 on NVIDIA GPUs (docs/SOURCES.md#vllm-fp8): W8A8 kernels from compute capability 8.9; below,
# weight-only FP8 through Marlin kernels (bf16/fp16 activations), which on Turing take float16 only.
FP8_COMPUTE_CAPABILITY = (8, 9)
FP8_BFLOAT16_WEIGHT_ONLY_CAPABILITY = (8, 0)
FP8_WEIGHT_ONLY_CAPABILITY = (7, 5)
FLOAT16_DTYPES = ("float16", "half")


def _check_quantization(app: PDAppConfig, target: DeploymentTarget) -> tuple[str, ...]:
    """Refuse FP8 weights on a GPU vLLM cannot run them on; warn where it runs them weight-only."""
    warnings: list[str] = []
    for phase in PHASES:
        engine = app.engine_for(phase)
        if engine.quantization != "fp8":
            continue
        gpu = target.node_group(phase).instance.gpu_model or "none"
        capability = COMPUTE_CAPABILITY.get(gpu)
        setting = engine_setting(app, phase, "quantization")
        if capability is None:
            warnings.append(f"{phase}: {setting} fp8 on a {gpu}, whose compute capability is not on record: "
                            "vLLM needs 8.9 for FP8 kernels, 8.0 for weight-only FP8")
            continue
        needed = FP8_WEIGHT_ONLY_CAPABILITY if engine.dtype in FLOAT16_DTYPES else FP8_BFLOAT16_WEIGHT_ONLY_CAPABILITY
        if capability < needed:
            raise ConfigError(setting, "fp8", f'"" on the {gpu} (compute capability {capability[0]}.{capability[1]})',
                              f"{phase}: vLLM runs FP8 weights from compute capability {needed[0]}.{needed[1]} "
                              f"with dtype {engine.dtype}")
        if capability < FP8_COMPUTE_CAPABILITY:
            warnings.append(f"{phase}: {setting} fp8 on the {gpu} (compute capability {capability[0]}.{capability[1]}) "
                            "runs vLLM's weight-only FP8 kernels (Marlin): the weights' memory is saved, the "
                            "arithmetic stays 16-bit; FP8 kernels need 8.9 (L4, L40S, H100, H200)")
    return tuple(dict.fromkeys(warnings))


def _single_process_engine_notes(app: PDAppConfig, target: DeploymentTarget) -> tuple[str, ...]:
    """Where singleProcessEngine is on but a phase's engines start as Ray Serve LLM starts them: the
    subclass applies to one GPU per engine on a node of one GPU only (front_door/engine.py)."""
    if not app.single_process_engine:
        return ()
    notes = []
    for phase in PHASES:
        engine, instance = app.engine_for(phase), target.node_group(phase).instance
        why = (f"its engine takes {engine.gpus_per_replica} GPUs" if engine.gpus_per_replica != 1
               else f"its {instance.name} node has {instance.gpus} GPUs" if instance.gpus > 1 else None)
        if why:
            notes.append(f"{SINGLE_PROCESS_ENGINE.key}: {phase} starts as Ray Serve LLM starts it, in four "
                         f"processes: {why}; the single-process start needs one GPU per engine on a one-GPU node")
    return tuple(notes)


def _check_kv_transfer(app: PDAppConfig, target: DeploymentTarget) -> None:
    """The KV transfer crosses from prefill's nodes to decode's: both have EFA or neither (the
    backend is one for both), and it runs at the slower end's rate."""
    groups = {phase: target.node_group(phase) for phase in PHASES}
    if len({group.efa for group in groups.values()}) > 1:
        phase = next(p for p in PHASES if p in target.phase_node_groups)
        group = groups[phase]
        like = f"a type that {'supports' if target.efa else 'lacks'} EFA like {target.gpu_instance.name}"
        raise group.settings.instance_type.refuse(
            group.instance.name, like,
            "prefill and decode move the KV cache over one NIXL backend, EFA on both ends or on neither")
    check_kv_backends(app.kv_transfer.backends, efa=target.efa, accept_ucx_on_efa=target.accept_ucx_on_efa,
                      network_gbps=min(group.instance.network_gbps for group in groups.values()))


def _check_http_front(app: PDAppConfig, target: DeploymentTarget) -> None:
    """Direct streaming makes decode the ingress with LLMRouter as its ingress request router, and
    Ray Serve's build_app refuses that outside HAProxy mode: DEPLOY_FAILED on the cluster."""
    if app.direct_streaming and target.http_front != HA_PROXY_FRONT:
        http_front = target.runtime_settings.http_front.key
        raise DIRECT_STREAMING.refuse(
            True, f'false, or {http_front} "{HA_PROXY_FRONT}"',
            f"{http_front} is {target.http_front!r}, and Ray Serve builds direct streaming's ingress request router "
            "only under HAProxy (\"ingress_request_router requires HAProxy\")")


def _check_image_supports_the_render(app: PDAppConfig, target: DeploymentTarget) -> tuple[str, ...]:
    """Refuse a render the image's Ray or vLLM is not known to understand; notes for what cannot be
    checked (an image whose vLLM version this project does not know)."""
    if target.ray_version is not None:
        ray_version = target.runtime_settings.ray_version
        # Switches an older Ray ignores: the stack would deploy without what the settings asked for. Checked
        # first, so the refusal names each setting that needs the newer Ray.
        http_front = target.runtime_settings.http_front.key
        switches = ((http_front, target.http_front == HA_PROXY_FRONT, HA_PROXY_ENV, f'{http_front} "serve-proxy"'),
                    (DIRECT_STREAMING.key, app.direct_streaming, DIRECT_STREAMING_ENV, f"{DIRECT_STREAMING.key} false"))
        late = [(setting, feature, off) for setting, on, feature, off in switches
                if on and version_tuple(target.ray_version) < version_tuple(RAY_SERVE_CONFIG_FEATURES[feature])]
        if late:
            needed = max((RAY_SERVE_CONFIG_FEATURES[feature] for _, feature, _ in late), key=version_tuple)
            names = " and ".join(setting for setting, _, _ in late)
            raise ray_version.refuse(target.ray_version,
                                     f"Ray {needed} or newer, or {' and '.join(off for _, _, off in late)}",
                                     f"{names} set{'s' if len(late) == 1 else ''} "
                                     f"{', '.join(f'{feature}=1' for _, feature, _ in late)}, which older Ray "
                                     "releases are not known to read")
        needed = RAY_SERVE_CONFIG_FEATURES["LLMConfig.experimental_configs.stream_batching_interval_ms"]
        if version_tuple(target.ray_version) < version_tuple(needed):
            raise ray_version.refuse(target.ray_version, f"Ray {needed} or newer",
                                     "the serve config sets experimental_configs.stream_batching_interval_ms, which "
                                     "older Ray Serve LLM releases are not known to read")
    graphs = [phase for phase in PHASES if not app.engine_for(phase).enforce_eager]
    if not graphs:
        return ()
    needed = VLLM_ENGINE_FEATURES["compilation_config.cudagraph_capture_sizes"]
    if target.vllm_version is None:
        return (f"CUDA graph capture sizes not checked against the image's vLLM (unknown version; "
                f"known to work from vLLM {needed})",) if target.ray_version is not None else ()
    if version_tuple(target.vllm_version) < version_tuple(needed):
        raise ConfigError(engine_setting(app, graphs[0], "enforce_eager"), False,
                          f"true, or an image with vLLM {needed} or newer",
                          f"the image's vLLM {target.vllm_version} is not known to take "
                          "compilation_config.cudagraph_capture_sizes")
    return ()


def check_engine_kwargs(app: PDAppConfig, vllm_version: str | None) -> tuple[str, ...]:
    """Refuse an extra engine argument the image's vLLM does not have (its `EngineArgs` fields,
    facts/vllm_engine_args.json), naming the closest one; notes for what could not be checked."""
    known = engine_arg_names(vllm_version) if vllm_version else None
    if known is None:
        return (f"extraEngineKwargs not checked against vLLM's engine arguments: no list for the image's vLLM "
                f"({vllm_version or 'unknown image'}; lists: {list(engine_args_versions())})",)
    for phase in PHASES:
        kwargs = app.engine_for(phase).extra_engine_kwargs
        for name in kwargs:
            if name in known:
                continue
            elsewhere = [v for v in engine_args_versions() if name in (engine_arg_names(v) or ())]
            close = difflib.get_close_matches(name, sorted(known), n=1)
            why = f"unknown engine argument {name!r}"
            if close:
                why += f"; did you mean {close[0]}?"
            if elsewhere:
                why += f" (vLLM {', '.join(elsewhere)} has it; the image runs vLLM {vllm_version})"
            raise ConfigError(engine_setting(app, phase, "extra_engine_kwargs"), {name: kwargs[name]},
                              f"vLLM {vllm_version} engine arguments (EngineArgs fields)", why)
    return ()


def check_app(app: PDAppConfig, target: DeploymentTarget, *,
              model: ModelArchitecture | None = None) -> CheckedApp:
    """Refuse an app that would fail, or crawl, on `target`; return it checked and rendered.

    `model`: the architecture to size; default = the shipped facts for `app.model.model_source`.
    An unknown model skips the capacity check (said in `notes`), nothing else.
    """
    checked = CheckedApp(config=app, serve_config_v2=serve_config_v2(app),
                         model=model or known_model(app.model.architecture_key))
    check_pd_serving_args(checked.pd_serving_args)
    _check_kv_roles(app)
    _check_http_front(app, target)
    _check_kv_transfer(app, target)
    for group, _ in target.node_groups():
        if not group.instance.has_gpu:
            raise group.settings.instance_type.refuse(group.instance.name, "a GPU instance type")
    _check_accelerator(app, target)
    quantization_warnings = _check_quantization(app, target)
    nodes = _check_parallelism_and_replicas(app, target)
    notes = (*_check_image_supports_the_render(app, target), *check_engine_kwargs(app, target.vllm_version),
             *quantization_warnings, *_single_process_engine_notes(app, target))
    checked = replace(checked, nodes=nodes, notes=notes, warnings=(*checked.warnings, *quantization_warnings))
    if checked.model is None:
        return replace(checked, notes=(*checked.notes,
            f"capacity not checked: no architecture facts for {app.model.model_source!r} "
            "(add it to facts/models.py or pass a local config.json)"))
    unsized = sorted({kv_cache_dtype(app, phase) for phase in PHASES} - set(SIZED_KV_CACHE_DTYPES))
    if unsized:
        return replace(checked, notes=(*checked.notes,
            f"capacity not checked: kv_cache_dtype {unsized[0]!r} is not sized by serve_app/capacity.py "
            f"(sized: {list(SIZED_KV_CACHE_DTYPES)})"))
    capacity, warnings = check_capacity(app, target, checked.model)
    fixed = {phase: report.kv_cache_memory_bytes for phase, report in capacity.items()
             if report.kv_cache_memory_bytes is not None}
    # The render again, now with each phase's fixed KV cache, which only the capacity check can size.
    return replace(checked, serve_config_v2=serve_config_v2(app, fixed) if fixed else checked.serve_config_v2,
                   capacity=capacity, notes=(*checked.notes, *warnings), warnings=(*checked.warnings, *warnings))
