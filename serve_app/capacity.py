"""How much of the GPU the model's weights take, how many tokens of KV cache fit, and what one
prompt's KV costs to move from prefill to decode. Pure arithmetic over facts; no ray/vllm import.

What the estimate covers, and what it does not:
- Memory vLLM may use per GPU is `gpu_memory_mib_usable × gpu_memory_utilization` (vLLM's
  `requested_memory`). From it go the weights (the checkpoint's bytes at the serving dtype, split
  evenly over the replica's TP × PP GPUs) and a fixed reserve for the profile-run activation peak,
  sampler logits, cuBLAS/NCCL workspaces and, unless `enforce_eager`, CUDA graphs
  (`ACTIVATION_RESERVE_MIB`, `CUDA_GRAPH_RESERVE_MIB`: this project's estimates, not measurements).
  What is left is the KV cache.
- KV bytes per token count only layers that keep a growing attention cache: 2 (K and V) × KV heads
  × head dim × KV-cache dtype bytes × full-attention layers. For a hybrid model (Qwen3.5:
  Gated-DeltaNet linear attention + full attention) the linear-attention layers instead hold a
  fixed recurrent + conv state per sequence, whatever its length; that state is added per sequence
  when counting concurrent sequences, and it travels to decode with the KV blocks.
- vLLM rounds all of this into blocks (and, for hybrid models, pads attention pages to the size of
  a state page), so its own figure ("GPU KV cache size: N tokens" in the engine log) differs by a
  few percent. That log line wins over this estimate.
- Transfer time is bytes / bandwidth at the node's nominal network rate: a lower bound that ignores
  NIXL handshakes and per-request overhead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from facts.instances import InstanceType
from facts.models import DTYPE_BYTES, ModelArchitecture

MIB = 1024 * 1024
GIB = 1024 * MIB

# Profile-run activation peak + sampler logits + library workspaces, per GPU. Estimate: an 8–10B
# model at vLLM's default batch sizes peaks at a few hundred MiB of activations, plus ~250 MiB of
# float32 logits for 256 sequences of a 250k vocabulary, plus workspaces.
ACTIVATION_RESERVE_MIB = 1024
# Extra memory captured CUDA graphs hold when enforce_eager is false. Estimate.
CUDA_GRAPH_RESERVE_MIB = 512

# UCX over EFA measured at about 0.3 GB/s (docs/SOURCES.md#kv-transfer-libfabric: ray#62339, nixl#909, nixl#1021).
UCX_ON_EFA_BYTES_PER_SECOND = 0.3e9

# vLLM `kv_cache_dtype` values that store one byte per element; "auto" means the model dtype.
_ONE_BYTE_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
# The vLLM 0.29 `kv_cache_dtype` values (vllm/config/cache.py CacheDType) this estimate sizes. The
# others (turboquant_*, *_per_token_head, nvfp4*) pack sub-byte values with scales: not sized here.
SIZED_KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", *_ONE_BYTE_KV_DTYPES)


def kv_cache_dtype_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    if kv_cache_dtype not in SIZED_KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype {kv_cache_dtype!r} is not sized here (sized: {list(SIZED_KV_CACHE_DTYPES)})")
    if kv_cache_dtype == "auto":
        return model_dtype_bytes
    if kv_cache_dtype in _ONE_BYTE_KV_DTYPES:
        return 1
    return DTYPE_BYTES[kv_cache_dtype]


def kv_bytes_per_token(model: ModelArchitecture, kv_dtype_bytes: int) -> int:
    """KV bytes one token adds across the whole model (full-attention layers only)."""
    return 2 * model.num_kv_heads * model.head_dim * kv_dtype_bytes * model.full_attention_layers


def state_bytes_per_sequence(model: ModelArchitecture, model_dtype_bytes: int) -> int:
    """Fixed linear-attention state one sequence holds across the whole model (0 if not hybrid)."""
    if model.linear_attention is None:
        return 0
    return model.linear_attention_layers * model.linear_attention.bytes_per_layer(model_dtype_bytes)


@dataclass(frozen=True)
class CapacityReport:
    """Memory and transfer figures for one phase's replica. Bytes unless the name says otherwise."""

    model: str
    model_facts_source: str
    hybrid: bool
    instance_type: str
    gpu_model: str
    gpus_per_replica: int
    gpu_memory_bytes: int  # per GPU, as CUDA reports it
    gpu_memory_utilization: float
    dtype: str
    max_model_len: int
    usable_bytes: int  # per GPU: gpu_memory_bytes × gpu_memory_utilization
    weight_bytes: int  # whole model
    weight_bytes_per_gpu: int
    reserve_bytes_per_gpu: int
    kv_budget_bytes: int  # whole replica (may be negative when the weights do not fit)
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    kv_tokens: int  # tokens of KV that fit in the budget, ignoring per-sequence state
    max_concurrent_sequences: int  # max_model_len sequences, KV + state each
    transfer_bytes_per_max_prompt: int  # KV (+ state) one max_model_len prompt moves to decode
    network_bytes_per_second: float
    transfer_seconds: float
    transfer_seconds_ucx_on_efa: float

    @property
    def weights_fit(self) -> bool:
        return self.kv_budget_bytes > 0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["weights_fit"] = self.weights_fit
        return data

    def render_text(self) -> str:
        graphs = " and CUDA graphs"
        lines = [
            f"Model {self.model} ({'hybrid: attention + linear attention' if self.hybrid else 'attention only'}),"
            f" {self.dtype}, max_model_len {self.max_model_len}",
            f"GPU: {self.gpus_per_replica} × {self.gpu_model} on {self.instance_type},"
            f" {self.gpu_memory_bytes / MIB:,.0f} MiB each, gpu_memory_utilization {self.gpu_memory_utilization:.2f}"
            f" → {self.usable_bytes / MIB:,.1f} MiB usable per GPU",
            f"Weights: {self.weight_bytes / GIB:,.2f} GiB ({self.weight_bytes_per_gpu / MIB:,.1f} MiB per GPU);"
            f" reserve for activations{'' if self.reserve_bytes_per_gpu == ACTIVATION_RESERVE_MIB * MIB else graphs}:"
            f" {self.reserve_bytes_per_gpu / MIB:,.0f} MiB per GPU",
            f"KV cache budget: {self.kv_budget_bytes / MIB:,.1f} MiB per replica",
            f"KV per token: {self.kv_bytes_per_token:,} B (full-attention layers only)"
            + (f"; fixed linear-attention state per sequence: {self.state_bytes_per_sequence / MIB:,.2f} MiB"
               if self.hybrid else ""),
            f"KV tokens that fit: {self.kv_tokens:,}; concurrent {self.max_model_len}-token sequences:"
            f" {self.max_concurrent_sequences}",
            f"One {self.max_model_len}-token prompt moves {self.transfer_bytes_per_max_prompt / MIB:,.1f} MiB"
            f" prefill→decode: {self.transfer_seconds * 1000:,.0f} ms"
            f" at {self.network_bytes_per_second * 8 / 1e9:g} Gbps"
            f" (LIBFABRIC/EFA), {self.transfer_seconds_ucx_on_efa * 1000:,.0f} ms at"
            f" {UCX_ON_EFA_BYTES_PER_SECOND / 1e9:g} GB/s (UCX on EFA)",
            f"Estimate; vLLM's 'GPU KV cache size' log line wins. Model facts: {self.model_facts_source}",
        ]
        if not self.weights_fit:
            lines.insert(3, "WEIGHTS DO NOT FIT: no memory left for the KV cache")
        return "\n".join(lines)


def capacity_report(
    model: ModelArchitecture,
    instance: InstanceType,
    *,
    dtype: str,
    max_model_len: int,
    gpu_memory_utilization: float,
    enforce_eager: bool,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    kv_cache_dtype: str = "auto",
    network_bytes_per_second: float | None = None,
) -> CapacityReport:
    """`network_bytes_per_second`: what the KV transfer runs at (default: `instance`'s network; when
    prefill and decode run on different types, the slower of the two)."""
    serving_dtype = model.checkpoint_dtype if dtype == "auto" else dtype
    dtype_bytes = DTYPE_BYTES[serving_dtype]
    gpus = tensor_parallel_size * pipeline_parallel_size
    gpu_memory_bytes = instance.gpu_memory_mib_usable * MIB
    usable = int(gpu_memory_bytes * gpu_memory_utilization)
    weights = model.weight_bytes(serving_dtype)
    weights_per_gpu = -(-weights // gpus)
    reserve = (ACTIVATION_RESERVE_MIB + (0 if enforce_eager else CUDA_GRAPH_RESERVE_MIB)) * MIB
    kv_budget = gpus * (usable - weights_per_gpu - reserve)
    per_token = kv_bytes_per_token(model, kv_cache_dtype_bytes(kv_cache_dtype, dtype_bytes))
    per_sequence_state = state_bytes_per_sequence(model, dtype_bytes)
    per_sequence = max_model_len * per_token + per_sequence_state
    budget = max(kv_budget, 0)
    network = instance.network_bytes_per_second if network_bytes_per_second is None else network_bytes_per_second
    return CapacityReport(
        model=model.hf_id,
        model_facts_source=model.source,
        hybrid=model.hybrid,
        instance_type=instance.name,
        gpu_model=instance.gpu_model or "none",
        gpus_per_replica=gpus,
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        dtype=serving_dtype,
        max_model_len=max_model_len,
        usable_bytes=usable,
        weight_bytes=weights,
        weight_bytes_per_gpu=weights_per_gpu,
        reserve_bytes_per_gpu=reserve,
        kv_budget_bytes=kv_budget,
        kv_bytes_per_token=per_token,
        state_bytes_per_sequence=per_sequence_state,
        kv_tokens=budget // per_token,
        max_concurrent_sequences=budget // per_sequence,
        transfer_bytes_per_max_prompt=per_sequence,
        network_bytes_per_second=network,
        transfer_seconds=per_sequence / network if network else float("inf"),
        transfer_seconds_ucx_on_efa=per_sequence / UCX_ON_EFA_BYTES_PER_SECOND,
    )
