"""Preview-time checks of the PD app against the GPU nodes it will run on. Pure; no ray/vllm import.

`check_app(app, target)` raises `ConfigError` (naming the stack config key) on the first thing that
would fail on the cluster, or silently crawl, and otherwise returns the `CheckedApp`: the app with
its serveConfigV2 rendered once and the capacity report of each phase, which the RayService and the
plan both take from here. It runs before any resource is registered, so a wrong serve config costs
nothing.

The lists below are what Ray 2.60.0 and vLLM 0.29.0 accept, read from their sources (paths given);
the real-validator tier (tests that import ray and vllm) keeps them honest.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from facts.images import RAY_SERVE_CONFIG_FEATURES, VLLM_ENGINE_FEATURES, version_tuple
from facts.instances import COMPUTE_CAPABILITY, InstanceType
from facts.models import ModelArchitecture, known_model
from facts.vllm_engine_args import engine_arg_names
from facts.vllm_engine_args import versions as engine_args_versions
from serve_app.capacity import SIZED_KV_CACHE_DTYPES, UCX_ON_EFA_BYTES_PER_SECOND, CapacityReport, capacity_report
from serve_app.config import (
    EFA_KV_BACKEND,
    HA_PROXY_FRONT,
    KV_BACKENDS,
    PHASES,
    ROLES_FOR_PHASE,
    EngineSettings,
    HttpFront,
    PDAppConfig,
    Phase,
)
from serve_app.errors import ConfigError
from serve_app.render import DIRECT_STREAMING_ENV, HA_PROXY_ENV, serve_config_v2
from serve_app.settings import ServeAppSettings, engine_setting
from serve_app.stack_keys import StackField

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


@dataclass(frozen=True)
class NodeGroupSettings:
    """The settings that set one GPU node group's type and bounds (the configuration layer reads them
    and hands them here): named in refusals, not read here."""

    instance_type: StackField
    count: StackField
    max_count: StackField


@dataclass(frozen=True)
class RuntimeSettings:
    """The settings that say which Ray the image carries and what answers HTTP in front of the app
    (the configuration layer reads them and hands them here): named in refusals, not read here."""

    ray_version: StackField
    http_front: StackField


@dataclass(frozen=True)
class NodeGroupTarget:
    """One GPU node group: `node_count` nodes of `instance`, growing to `node_max_count` (None:
    fixed) under the node autoscaler; `efa`: whether its nodes carry EFA interfaces."""

    instance: InstanceType
    node_count: int
    efa: bool
    settings: NodeGroupSettings  # the settings naming its type and bounds
    node_max_count: int | None = None
    own_phase: Phase | None = None  # the phase whose own group this is; None: gpuNodeType's, shared

    @property
    def gpus_per_node(self) -> int:
        return self.instance.gpus

    @property
    def max_nodes(self) -> int:
        return self.node_max_count or self.node_count

    @property
    def most_nodes_setting(self) -> StackField:
        """The setting bounding the group at its most: its maximum where it autoscales, else its count."""
        return self.settings.max_count if self.node_max_count else self.settings.count


@dataclass(frozen=True)
class DeploymentTarget:
    """The GPU node group the app will run on: `gpu_node_count` nodes, growing to
    `gpu_node_max_count` (None: fixed) under the node autoscaler; a phase named in
    `phase_node_groups` runs on a group of its own instead (same AZ and placement group)."""

    gpu_instance: InstanceType
    gpu_node_count: int
    efa: bool
    gpu_node_settings: NodeGroupSettings  # the settings of gpuNodeType's group (the shared one)
    runtime_settings: RuntimeSettings  # the settings of ray_version and http_front
    accept_ucx_on_efa: bool = False
    # The serving stack inside the Ray image: Ray always known, vLLM when the image is one
    # this project has facts for. None = not checked (tests of other checks).
    ray_version: str | None = None
    vllm_version: str | None = None
    # What answers HTTP in front of the app: Serve's proxy actor or HAProxy.
    http_front: HttpFront = "serve-proxy"
    gpu_node_max_count: int | None = None
    phase_node_groups: Mapping[str, NodeGroupTarget] = field(default_factory=dict)

    @property
    def shared_node_group(self) -> NodeGroupTarget:
        return NodeGroupTarget(self.gpu_instance, self.gpu_node_count, self.efa, self.gpu_node_settings,
                               self.gpu_node_max_count)

    def node_group(self, phase: Phase) -> NodeGroupTarget:
        """The node group `phase`'s worker pods run on."""
        return self.phase_node_groups.get(phase) or self.shared_node_group

    def node_groups(self) -> tuple[tuple[NodeGroupTarget, tuple[Phase, ...]], ...]:
        """Each node group with the phases it holds: the shared one (unless no phase is left on it),
        then each phase's own."""
        shared = tuple(phase for phase in PHASES if phase not in self.phase_node_groups)
        own = tuple((self.phase_node_groups[phase], (phase,)) for phase in PHASES if phase in self.phase_node_groups)
        return ((self.shared_node_group, shared), *own) if shared else own


@dataclass(frozen=True)
class PhaseNodes:
    """The GPU nodes one phase's worker group takes at its fewest and most replicas. Each phase has
    its own worker group whose pods own a whole node, so a node never mixes the two phases."""

    replicas_per_node: int
    min_nodes: int
    max_nodes: int


def phase_nodes(app: PDAppConfig, phase: Phase, gpus_per_node: int) -> PhaseNodes:
    """Nodes for `phase` at min and max replicas: as many replicas share a node as its GPUs hold."""
    per_node = gpus_per_node // app.engine_for(phase).gpus_per_replica
    replicas = app.phase(phase).replicas
    return PhaseNodes(per_node, -(-replicas.min_replicas // per_node), -(-replicas.most // per_node))


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
    allowed = f"a non-empty list of distinct names from {list(KV_BACKENDS)}"
    unknown = [b for b in backends if b not in KV_BACKENDS]
    if not backends or unknown or len(set(backends)) != len(backends):
        raise ConfigError(key, list(backends), allowed,
                          f"unknown NIXL backend {unknown[0]!r}" if unknown else None)
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


def _kv_cache_dtype(app: PDAppConfig, phase: Phase) -> str:
    return str(app.engine_for(phase).extra_engine_kwargs.get("kv_cache_dtype", "auto"))


def phase_capacity(app: PDAppConfig, phase: Phase, target: DeploymentTarget, model: ModelArchitecture, *,
                   vision_inputs: bool | None = None) -> CapacityReport:
    """`phase`'s capacity on its node group; `vision_inputs` overrides the engine's (None: as set)."""
    engine = app.engine_for(phase)
    # The KV leaves prefill's node and enters decode's: the slower network of the two bounds it.
    network = min(target.node_group(p).instance.network_bytes_per_second for p in PHASES)
    return capacity_report(
        model, target.node_group(phase).instance, network_bytes_per_second=network,
        dtype=engine.dtype, max_model_len=engine.max_model_len,
        gpu_memory_utilization=engine.gpu_memory_utilization, enforce_eager=engine.enforce_eager,
        tensor_parallel_size=engine.tensor_parallel_size, pipeline_parallel_size=engine.pipeline_parallel_size,
        kv_cache_dtype=_kv_cache_dtype(app, phase),
        vision_inputs=engine.vision_inputs if vision_inputs is None else vision_inputs,
        max_num_seqs=engine.max_num_seqs, max_num_batched_tokens=engine.max_num_batched_tokens,
        fixed_kv_cache=engine.kv_cache_from_plan, vllm_version=target.vllm_version, quantization=engine.quantization,
    )


FULL_PRECISION_DTYPES = ("float32", "float")
# The highest gpuMemoryUtilization worth suggesting: above it CUDA graphs and the sampler run out.
MOST_GPU_MEMORY_UTILIZATION = 0.95


def _check_paged_start(app: PDAppConfig, phase: Phase, report: CapacityReport,
                       text_only: CapacityReport | None = None) -> tuple[str, ...]:
    """A hybrid engine vLLM would refuse to start: fewer blocks than CUDA graphs capture sequences
    (vLLM 0.26 compilation.py: one Mamba cache block per decoding sequence), or than one maxModelLen
    sequence takes. Refused when even a restart (warm compile caches, the larger KV cache) cannot start;
    a warning when only the first start on a new node (the smaller one) cannot. `text_only`: the same
    engine without its vision encoder, whose blocks say whether turning it off is a way out."""
    engine = app.engine_for(phase)
    if report.num_blocks is None or report.blocks_per_sequence is None:
        return ()
    per_sequence = report.blocks_per_sequence
    warm = report.num_blocks_restart if report.num_blocks_restart is not None else report.num_blocks
    where = f"{phase} on {report.instance_type}'s {report.gpu_model}"
    # What a restart of the same engine without the encoder holds (None: the encoder is off).
    without_vision_blocks = None if text_only is None else (
        text_only.num_blocks_restart if text_only.num_blocks_restart is not None else text_only.num_blocks)

    def or_without_vision(blocks_needed: int) -> str:
        # The encoder takes most of the blocks on an L4 (17 left of a restart's 173, measured with the default
        # rotary settings): a user who
        # just turned it on reads that turning it off is a way out, where the text-only engine has the blocks.
        if without_vision_blocks is None or without_vision_blocks < blocks_needed:
            return ""
        return f", or {engine_setting(app, phase, 'vision_inputs')} false (the vision encoder's memory)"

    if not engine.enforce_eager and warm < engine.max_num_seqs:
        raise ConfigError(
            engine_setting(app, phase, "max_num_seqs"), engine.max_num_seqs,
            f"at most {warm} ({where} holds {warm} KV blocks), or enforceEager true"
            f"{or_without_vision(engine.max_num_seqs)}",
            "vLLM captures CUDA graphs only with one Mamba cache block per sequence "
            f"(\"max_num_seqs ({engine.max_num_seqs}) exceeds available Mamba cache blocks ({warm})\")")
    if warm < per_sequence:
        raise ConfigError(
            engine_setting(app, phase, "max_model_len"), engine.max_model_len,
            f"a length whose blocks fit: {warm} blocks of {report.block_size} tokens on {where}"
            f"{or_without_vision(per_sequence)}",
            f"one {engine.max_model_len}-token sequence takes {per_sequence} blocks; "
            "lower maxModelLen or raise gpuMemoryUtilization")
    first, error = report.num_blocks, report.kv_blocks_error
    needed = max(engine.max_num_seqs if not engine.enforce_eager else 0, per_sequence)
    if first < needed:
        return (f"{where}: the first start on a new node (compile caches empty) leaves {first} KV blocks, "
                f"fewer than {needed} it needs; vLLM would refuse to start until a restart (estimate: "
                f"{report.reserve_source}). Lower maxNumSeqs or maxModelLen, or set enforceEager true",)
    # Not at the exact boundary: a start within the plan's own error of it may hold too few.
    if first * (1 - error) < needed:
        return (f"{where}: the first start on a new node (compile caches empty) leaves {first} KV blocks by the "
                f"plan, within its {error:.0%} error of the {needed} it needs: vLLM may refuse to start (estimate: "
                f"{report.reserve_source}). Lower maxNumSeqs or maxModelLen, or set enforceEager true",)
    return ()


def _check_fixed_kv_cache_fits(app: PDAppConfig, phase: Phase, report: CapacityReport) -> None:
    """With kv_cache_memory_bytes vLLM does no fit check of its own: refuse a fixed KV cache whose first
    start (weights, the first start's reserve, the fixed KV cache) would not fit the GPU's memory."""
    peak, memory = report.first_start_peak_bytes, report.gpu_memory_bytes
    if peak is None or peak <= memory:
        return
    # The fixed size follows gpuMemoryUtilization byte for byte, and so does the peak.
    most = math.floor((memory - (peak - report.usable_bytes)) / memory * 100) / 100
    raise ConfigError(
        engine_setting(app, phase, "kv_cache_from_plan"), True,
        f"false, or {engine_setting(app, phase, 'gpu_memory_utilization')} at most {most:.2f}",
        f"{phase}: kv_cache_memory_bytes {report.kv_cache_memory_bytes:,} B puts a new node's first start at "
        f"{peak / 2**20:,.0f} MiB, over the {report.gpu_model}'s {memory / 2**20:,.0f} MiB, and vLLM does no fit "
        "check of its own with it set")


def _refuse_weights_that_do_not_fit(app: PDAppConfig, phase: Phase, engine: EngineSettings,
                                    report: CapacityReport) -> NoReturn:
    """Refuse a phase whose weights leave no room for a KV cache, naming the setting to change."""
    # A 32-bit dtype doubles a 16-bit checkpoint: then the user's dtype is what to change.
    if engine.dtype in FULL_PRECISION_DTYPES:
        raise ConfigError(
            engine_setting(app, phase, "dtype"), engine.dtype, "bfloat16, float16 or auto",
            f"{phase}: in {engine.dtype} the weights take {report.weight_bytes_per_gpu / 2**20:,.0f} MiB per "
            f"GPU of {report.usable_bytes / 2**20:,.0f} MiB usable")
    # What the engine keeps besides on a restart, where measured (the KV check's own figure).
    reserve = report.reserve_bytes_per_gpu if report.kv_budget_bytes_restart is None else (
        report.usable_bytes - report.weight_bytes_per_gpu - report.kv_budget_bytes_restart)
    needed = (report.weight_bytes_per_gpu + reserve) / report.gpu_memory_bytes
    if engine.gpu_memory_utilization < needed <= MOST_GPU_MEMORY_UTILIZATION:
        # The model fits at a utilization the user lowered: that is the setting to change.
        raise ConfigError(
            engine_setting(app, phase, "gpu_memory_utilization"), engine.gpu_memory_utilization,
            f"more than {needed:.2f} for {app.model.model_source} on {report.gpu_model}",
            f"{phase}: weights {report.weight_bytes_per_gpu / 2**20:,.0f} MiB per GPU + "
            f"{reserve / 2**20:,.0f} MiB reserve leave no KV cache")
    raise ConfigError(
        ServeAppSettings.key("model_source"), app.model.model_source,
        f"a model whose weights fit {report.gpus_per_replica} × {report.usable_bytes / 2**20:,.0f} MiB "
        f"(gpuMemoryUtilization × GPU memory), with room for the KV cache",
        f"{phase}: weights {report.weight_bytes_per_gpu / 2**20:,.0f} MiB per GPU + "
        f"{reserve / 2**20:,.0f} MiB reserve leave no KV cache; raise "
        "tensorParallelSize on a bigger GPU node, or pick a smaller model")


def _check_capacity(app: PDAppConfig, target: DeploymentTarget,
                    model: ModelArchitecture) -> tuple[dict[str, CapacityReport], tuple[str, ...]]:
    reports: dict[str, CapacityReport] = {}
    warnings: tuple[str, ...] = ()
    for phase in PHASES:
        engine = app.engine_for(phase)
        if model.max_position_embeddings and engine.max_model_len > model.max_position_embeddings:
            raise ConfigError(engine_setting(app, phase, "max_model_len"), engine.max_model_len,
                              f"≤ {model.max_position_embeddings} ({model.hf_id} max_position_embeddings)",
                              "vLLM refuses a longer max_model_len")
        report = phase_capacity(app, phase, target, model)
        if phase in target.phase_node_groups and report.sequences_that_can_start < 1:
            # The type was picked for this phase: a replica it cannot hold is the type's to change.
            raise target.phase_node_groups[phase].settings.instance_type.refuse(
                report.instance_type,
                f"a type whose {report.gpus_per_replica} GPU(s) per {phase} replica hold the weights and one "
                f"{engine.max_model_len}-token sequence of KV cache",
                f"{phase}: {report.usable_bytes / 2**20:,.0f} MiB usable per {report.gpu_model} GPU leave a KV budget "
                f"of {report.kv_budget_bytes / 2**20:,.0f} MiB; one sequence needs "
                f"{report.transfer_bytes_per_max_prompt / 2**20:,.0f} MiB")
        if not report.weights_fit:
            _refuse_weights_that_do_not_fit(app, phase, engine, report)
        _check_fixed_kv_cache_fits(app, phase, report)
        text_only = phase_capacity(app, phase, target, model, vision_inputs=False) if engine.vision_inputs else None
        warnings += _check_paged_start(app, phase, report, text_only)
        if report.sequences_that_can_start < 1:
            raise ConfigError(
                engine_setting(app, phase, "max_model_len"), engine.max_model_len,
                f"a length whose KV cache fits: {report.kv_tokens:,} tokens fit in {phase}'s KV budget",
                f"one {engine.max_model_len}-token sequence needs "
                f"{report.transfer_bytes_per_max_prompt / 2**20:,.0f} MiB "
                f"of KV{' + state' if report.hybrid else ''}, the budget is {report.kv_budget_bytes / 2**20:,.0f} MiB; "
                "lower maxModelLen or raise gpuMemoryUtilization")
        reports[phase] = report
    return reports, warnings


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
             *quantization_warnings)
    checked = replace(checked, nodes=nodes, notes=notes, warnings=(*checked.warnings, *quantization_warnings))
    if checked.model is None:
        return replace(checked, notes=(*checked.notes,
            f"capacity not checked: no architecture facts for {app.model.model_source!r} "
            "(add it to facts/models.py or pass a local config.json)"))
    unsized = sorted({_kv_cache_dtype(app, phase) for phase in PHASES} - set(SIZED_KV_CACHE_DTYPES))
    if unsized:
        return replace(checked, notes=(*checked.notes,
            f"capacity not checked: kv_cache_dtype {unsized[0]!r} is not sized by serve_app/capacity.py "
            f"(sized: {list(SIZED_KV_CACHE_DTYPES)})"))
    capacity, warnings = _check_capacity(app, target, checked.model)
    fixed = {phase: report.kv_cache_memory_bytes for phase, report in capacity.items()
             if report.kv_cache_memory_bytes is not None}
    # The render again, now with each phase's fixed KV cache, which only the capacity check can size.
    return replace(checked, serve_config_v2=serve_config_v2(app, fixed) if fixed else checked.serve_config_v2,
                   capacity=capacity, notes=(*checked.notes, *warnings), warnings=(*checked.warnings, *warnings))
