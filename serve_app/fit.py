"""Whether each phase fits its GPUs: the model's weights, the engine's reserve and a KV cache within
`gpuMemoryUtilization` (serve_app/capacity.py sizes them), a hybrid engine's blocks for the sequences
CUDA graphs capture, a fixed KV cache's first start. `check_capacity` refuses what would not start,
naming the setting to change, and returns each phase's capacity report."""

from __future__ import annotations

import math
from typing import NoReturn

from facts.models import ModelArchitecture
from serve_app.capacity import CapacityReport, capacity_report
from serve_app.config import PHASES, EngineSettings, PDAppConfig, Phase
from serve_app.errors import ConfigError
from serve_app.settings import ServeAppSettings, engine_setting
from serve_app.targets import DeploymentTarget


def kv_cache_dtype(app: PDAppConfig, phase: Phase) -> str:
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
        kv_cache_dtype=kv_cache_dtype(app, phase),
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
    # A raised gpuMemoryUtilization is what pushes the fixed KV cache over: name it, not kvCacheFromPlan
    # (on by default, so rarely what the user wrote).
    utilization = engine_setting(app, phase, "gpu_memory_utilization")
    raise ConfigError(
        utilization, report.gpu_memory_utilization,
        f"at most {most:.2f}, or {engine_setting(app, phase, 'kv_cache_from_plan')} false",
        f"{phase}'s first start would need {peak / 2**20:,.0f} of the {report.gpu_model}'s {memory / 2**20:,.0f} MiB")


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


def check_capacity(app: PDAppConfig, target: DeploymentTarget,
                    model: ModelArchitecture) -> tuple[dict[str, CapacityReport], tuple[str, ...]]:
    reports: dict[str, CapacityReport] = {}
    warnings: tuple[str, ...] = ()
    for phase in PHASES:
        engine = app.engine_for(phase)
        if model.num_attention_heads % engine.tensor_parallel_size:
            # vLLM refuses it at start ("must be divisible by tensor parallel size"), after the GPUs are paid for.
            raise ConfigError(engine_setting(app, phase, "tensor_parallel_size"), engine.tensor_parallel_size,
                              f"a divisor of {model.num_attention_heads} ({model.hf_id}'s attention heads)",
                              "vLLM splits a layer's attention heads evenly over a replica's GPUs")
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
