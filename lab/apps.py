"""What the lab deploys, as data: the generated models it serves, its Serve applications (a PD app and a
colocated baseline per model and variant, built from the stack's rendered args and the single-host
overlay), the stages they run in, the engines they put on each GPU, the workload it times and the
environment its Ray workers get. Pure: no Ray, no GPU (`lab/runner.py` runs them).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from lab import compare
from lab.models import SPECIAL_TOKENS
from lab.overlay import GiB, LabOverlay, apply_lab_overlay, colocated_config, overlay_values
from lab.probe import L4_KERNEL_KWARGS
from lab.variants import STACK, Variant, apply_variant, variant_values
from serve_app.errors import ConfigError
from serve_app.render import HYBRID_WORKER_ENV, PHASE_RESOURCE

# Units of each phase resource the lab host advertises: more than any number of engines it can hold.
LAB_PHASE_RESOURCE_UNITS = 1000


def phase_resources() -> dict[str, float]:
    """The phases' Ray resources, which the stack's worker groups advertise and every engine bundle asks
    for (serve_app/render.py PHASE_RESOURCE): the lab's one host plays both groups. GPUs still bound
    the engines."""
    return dict.fromkeys(PHASE_RESOURCE.values(), LAB_PHASE_RESOURCE_UNITS)

Mode = Literal["pd", "colocated"]
HTTP_PORT = 8000
# Process environment for every Ray worker (set before ray.init, which they inherit):
# - VLLM_RAY_PER_WORKER_GPUS: the engine's GPU slice. Ray Serve LLM derives it from the
#   placement group only for vLLM's worker actors; vLLM 0.26 also reads it in the engine process.
# - HYBRID_WORKER_ENV: the stack's worker environment for a hybrid model (serve_app.render, which the
#   RayService's workers get too); other models ignore it.
# - HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: there is no hub; fail fast instead of retrying.
# - RAY_memory_monitor_refresh_ms=0: the lab VM's RAM grows on demand (MemTotal starts low), which
#   Ray's OOM killer would read as memory pressure and kill engine workers.
STATIC_ENV = {**HYBRID_WORKER_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
              "RAY_memory_monitor_refresh_ms": "0"}
# Several GPUs of one lent host: NVLink multicast stays off (the host's GPUs are shared; KINDS.md).
MULTI_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class LabModel:
    key: str  # names the apps and the results: "tiny", "llama3-8b-shape"
    path: str
    dummy_weights: bool  # vLLM's load_format dummy (config + tokenizer only on disk)
    compare_outputs: bool  # peaked logits: the greedy PD-vs-colocated comparison means something
    prompt_token_range: tuple[int, int]  # ids the tokenizer was trained on, for prompts
    card: dict[str, Any] = field(default_factory=dict)
    timed: bool = True  # False: the model only proves the path (endpoints, NIXL, greedy comparison)
    hybrid: bool = False  # Gated-DeltaNet layers: the L4's kernel path is asked for (lab/probe.py)


@dataclass(frozen=True)
class LabApp:
    name: str
    model: LabModel
    mode: Mode
    route_prefix: str
    args: dict[str, Any]  # the builder's argument dict
    overlays: dict[str, dict[str, Any]]  # config role → {key path: lab value}
    variant: Variant = STACK  # the serving knobs this app changes (STACK: none)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{HTTP_PORT}{self.route_prefix}"

    @property
    def model_id(self) -> str:
        configs = self.args["llm_configs"] if self.mode == "colocated" else [self.args["decode_config"]]
        return configs[0]["model_loading_config"]["model_id"]


@dataclass(frozen=True)
class Interference:
    """Short requests decoding while a stream of long prompts arrives (what PD exists to remove).

    Measured twice per app: the short requests alone ("quiet"), then with the long prompts arriving
    open-loop from `long_start_after_s`, one every `long_interval_s`.
    """

    short_requests: int = 8
    short_prompt_tokens: int = 64
    short_output_tokens: int = 256
    long_requests: int = 6
    long_prompt_tokens_min: int = 2048
    long_prompt_tokens_max: int = 4000
    long_output_tokens: int = 16
    long_start_after_s: float = 0.5
    long_interval_s: float = 0.5


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int = 512
    output_tokens: int = 128
    concurrencies: tuple[int, ...] = (1, 8)
    requests_per_concurrency_slot: int = 4  # requests = clamp(slot × concurrency, min, max)
    min_requests: int = 8
    max_requests: int | None = None
    interference: Interference | None = None
    warmup_requests: int = 4
    compare_prompts: int = 24
    compare_prompt_tokens: int = 48
    compare_output_tokens: int = 48
    clear_margin: float = compare.DEFAULT_CLEAR_MARGIN
    min_clear_positions: int = 100
    seed: int = 0
    repeats: int = 1  # timed passes over every app and concurrency (app-interleaved: pass 1 of all, then 2, …)
    # PD apps, first pass: Ray's metrics exposition just before and after this concurrency's timing (the
    # engines' own TTFT/prefill/KV-transfer histograms over those requests only); None: not captured.
    metrics_window_concurrency: int | None = None
    side_by_side: bool = False  # also `pdctl bench` beside `vllm bench serve` on each timed PD app
    rates: tuple[float, ...] = ()  # open-loop Poisson arrivals per second, after the closed-loop passes
    requests_per_rate: int = 48
    open_loop_modes: tuple[Mode, ...] = ("pd",)  # the apps the open-loop rates run on (the PD app: what deploys)

    def requests_at(self, concurrency: int) -> int:
        count = max(self.min_requests, self.requests_per_concurrency_slot * concurrency)
        return count if self.max_requests is None else min(count, self.max_requests)


def variants_or_stack(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    return variants or (STACK,)


def most_replicas(llm_config: dict[str, Any]) -> int:
    """The most replicas one rendered LLMConfig runs at once: its autoscaling max, else its fixed count."""
    deployment = llm_config.get("deployment_config", {})
    autoscaling = deployment.get("autoscaling_config")
    return int(autoscaling["max_replicas"]) if autoscaling else int(deployment.get("num_replicas", 1))


# Engines per app without autoscaling: prefill + decode; one colocated engine.
ENGINES_PER_APP: Mapping[str, int] = MappingProxyType({"pd": 2, "colocated": 1})


def engines_per_app(rendered_args: dict[str, Any]) -> dict[str, int]:
    """Engines each kind of app may run at once: a PD app prefill's and decode's most replicas, the
    colocated baseline (made from decode's config) decode's."""
    decode = most_replicas(rendered_args["decode_config"])
    return {"pd": most_replicas(rendered_args["prefill_config"]) + decode, "colocated": decode}


def engines_on_host(models: list[LabModel], variants: tuple[Variant, ...] = (),
                    per_app: Mapping[str, int] = ENGINES_PER_APP) -> int:
    """Every replica each app may run, for every model and variant: a replica Serve's autoscaling
    adds later needs its share of the GPU too."""
    per_model = sum(per_app["pd"] * ("pd" in v.modes) + per_app["colocated"] * ("colocated" in v.modes)
                    for v in variants_or_stack(variants))
    return per_model * len(models)


def engines_on_gpu(models: list[LabModel], gpus: int = 1, variants: tuple[Variant, ...] = (),
                   per_app: Mapping[str, int] = ENGINES_PER_APP) -> int:
    """One GPU: every engine shares it. Several: a whole GPU per engine (apps run in stages)."""
    return engines_on_host(models, variants, per_app) if gpus == 1 else 1


def _check_gpus(gpus: int) -> None:
    if gpus < 1:
        raise ConfigError("gpus", gpus, "1 (engines share the GPU) or 2 or more (a whole GPU per engine)")


def lab_apps(rendered_args: dict[str, Any], models: list[LabModel], *,
             kv_cache_memory_bytes: int | None = 4 * GiB, seed: int = 0, gpus: int = 1,
             variants: tuple[Variant, ...] = (), budget_utilization: float | None = None) -> list[LabApp]:
    """The lab's Serve applications for the rendered PD serving args (pure).

    Every engine of the run gets its own port windows (slots are numbered over the whole host),
    also across stages, so a port still held by a torn-down engine cannot clash. With variants,
    each model gets one app per variant and mode, named `<model>-<mode>-<variant>`; the variant's
    keys are set before the overlay (which they may not touch).
    """
    _check_gpus(gpus)
    per_app = engines_per_app(rendered_args)
    if gpus > 1 and per_app != ENGINES_PER_APP:
        raise ConfigError("gpus", gpus, "1 when a phase may run more than one replica",
                          "the staged multi-GPU lab gives a PD app exactly two GPUs")
    per_gpu, per_host = engines_on_gpu(models, gpus, variants, per_app), engines_on_host(models, variants, per_app)
    slots = itertools.count()

    def overlay_for(model: LabModel, replicas: int) -> LabOverlay:
        return LabOverlay(model_path=model.path, engines_on_gpu=per_gpu, engine_slot=next(slots),
                          kv_cache_memory_bytes=kv_cache_memory_bytes, seed=seed,
                          dummy_weights=model.dummy_weights, engines_on_host=per_host, replicas=replicas,
                          budget_utilization=budget_utilization,
                          kernel_kwargs=tuple(L4_KERNEL_KWARGS.items()) if model.hybrid else ())

    apps: list[LabApp] = []
    for model in models:
        for variant in variants_or_stack(variants):
            if "pd" in variant.modes:
                apps.append(_pd_app(rendered_args, model, variant, overlay_for))
            if "colocated" in variant.modes:
                apps.append(_colocated_app(rendered_args, model, variant, overlay_for))
    return apps


def _app_name_and_route(model: LabModel, mode: Mode, variant: Variant) -> tuple[str, str]:
    """`<model>-<mode>[-<variant>]` served at `/<model>/<mode>[/<variant>]`."""
    suffix = f"-{variant.name}" if variant.name else ""
    route = f"/{variant.name}" if variant.name else ""
    return f"{model.key}-{mode}{suffix}", f"/{model.key}/{mode}{route}"


def _pd_app(rendered_args: dict[str, Any], model: LabModel, variant: Variant,
            overlay_for: Callable[[LabModel, int], LabOverlay]) -> LabApp:
    """The PD app: the variant's keys, then the overlay, on each phase's rendered config."""
    pd_args = copy.deepcopy(rendered_args)
    overlays = {}
    for role in ("prefill_config", "decode_config"):
        overlay = overlay_for(model, most_replicas(rendered_args[role]))
        phase = apply_variant(rendered_args[role], variant)
        overlays[role] = {**variant_values(variant), **overlay_values(phase, overlay)}
        pd_args[role] = apply_lab_overlay(phase, overlay)
    name, route_prefix = _app_name_and_route(model, "pd", variant)
    return LabApp(name, model, "pd", route_prefix, pd_args, overlays, variant)


def _colocated_app(rendered_args: dict[str, Any], model: LabModel, variant: Variant,
                   overlay_for: Callable[[LabModel, int], LabOverlay]) -> LabApp:
    """The colocated baseline, made from decode's config: the variant's keys, then the overlay."""
    baseline = apply_variant(colocated_config(rendered_args["decode_config"]), variant)
    overlay = overlay_for(model, most_replicas(baseline))
    colocated_args: dict[str, Any] = {"llm_configs": [apply_lab_overlay(baseline, overlay)]}
    if "ingress_deployment_config" in rendered_args:
        colocated_args["ingress_deployment_config"] = copy.deepcopy(rendered_args["ingress_deployment_config"])
    name, route_prefix = _app_name_and_route(model, "colocated", variant)
    return LabApp(name, model, "colocated", route_prefix, colocated_args,
                  {"llm_configs[0]": {**variant_values(variant), **overlay_values(baseline, overlay)}}, variant)


def cpus_wanted(apps: list[LabApp]) -> int:
    """Ray CPUs a set of lab apps asks for: each engine's bundle CPUs plus one for its replica actor
    (Ray Serve LLM 2.58 folds it into the first bundle: {CPU: 2, GPU: f} was seen on the H200), plus
    one per app for its OpenAiIngress replica. More than the host has: an ingress is never scheduled
    (seen: a fifth app on 16 CPUs stayed DEPLOYING)."""
    total = 0
    for app in apps:
        configs = app.args["llm_configs"] if app.mode == "colocated" else [app.args["prefill_config"],
                                                                           app.args["decode_config"]]
        for config in configs:
            bundle = config.get("placement_group_config", {}).get("bundle_per_worker", {})
            # One GPU worker per engine in the lab (tp = pp = 1), per replica the phase may run.
            total += (int(bundle.get("CPU", 0)) + 1) * most_replicas(config)
        total += 1
    return total


def lab_stages(apps: list[LabApp], gpus: int = 1) -> list[list[LabApp]]:
    """Which apps run together, in order (pure).

    One GPU: all at once (they share it). Several GPUs, a whole GPU per engine: a PD app takes two
    GPUs and a colocated app one, so PD apps run `gpus // 2` at a time and colocated apps `gpus` at a
    time. Order: the first PD stage, then the colocated stages, then the other PD stages, so the
    first model's PD-vs-colocated timing is complete earliest and a run cut short loses later PD
    stages only.
    """
    _check_gpus(gpus)
    if gpus == 1:
        return [list(apps)]
    pd = [a for a in apps if a.mode == "pd"]
    colocated = [a for a in apps if a.mode == "colocated"]
    per_pd_stage = gpus // 2
    pd_stages = [pd[i:i + per_pd_stage] for i in range(0, len(pd), per_pd_stage)]
    colocated_stages = [colocated[i:i + gpus] for i in range(0, len(colocated), gpus)]
    return pd_stages[:1] + colocated_stages + pd_stages[1:]


def lab_environment(models: list[LabModel], gpus: int = 1, variants: tuple[Variant, ...] = (),
                    per_app: Mapping[str, int] = ENGINES_PER_APP) -> dict[str, str]:
    if gpus > 1:  # whole GPUs: Ray Serve LLM's own per-worker GPU share (1) is right
        return {**STATIC_ENV, **MULTI_GPU_ENV}
    overlay = LabOverlay(model_path="", engines_on_gpu=engines_on_gpu(models, variants=variants, per_app=per_app),
                         engine_slot=0)
    return {**STATIC_ENV, "VLLM_RAY_PER_WORKER_GPUS": str(overlay.gpu_share)}


def prompt_range(card: dict[str, Any]) -> tuple[int, int]:
    """Prompt ids: the trained (non-special, non-filler) part of the generated tokenizer."""
    return len(SPECIAL_TOKENS), int(card["trained_tokens"])
