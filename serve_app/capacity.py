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
- A hybrid model is paged as vLLM 0.26 pages it (`HybridPaging`): the attention block grows until one
  attention page holds a layer's state (Qwen3.5: 528 tokens), every page has that size, the layers
  form groups of equal size sharing one pool, and a sequence takes one block per state group plus
  its attention blocks. vLLM's "GPU KV cache size" and "Maximum concurrency" lines follow from the block
  count, and CUDA graph capture needs one block per sequence (`max_num_seqs`). For such a model with a
  measured reserve (facts/engine_memory.py) the report gives the first start on a new node (compile
  caches empty: the smaller KV cache) and a restart; within 10% of vLLM's own lines for graphs and
  eager, vision on and off (docs/PROVEN.md#default-deployment).
- A fixed KV cache (`fixed_kv_cache`): vLLM's `kv_cache_memory_bytes` set to a restart's KV bytes less
  a small margin (`FIXED_KV_CACHE_MARGIN_BYTES`), so a new node's first start holds a restart's blocks
  instead of what the profiling left it. Only where a restart's reserve was measured for this model,
  GPU, vLLM version and engine limits: vLLM then does no fit check of its own, so the report predicts
  the first start's peak (weights, position table, first-start reserve, the fixed KV cache), which the
  checks hold to the GPU's memory.
- vLLM's rotary position table counts with the weights it loads (`ModelArchitecture.position_table_bytes`:
  Qwen3.5's M-RoPE keeps 4 × its 262,144 positions, 128 MiB); a measured reserve excludes it.
- FP8 weights (`quantization` "fp8", vLLM's online quantization of a 16-bit checkpoint): the linear
  layers' weights at one byte, embeddings, lm_head and norms at the checkpoint's dtype
  (`ModelArchitecture.fp8_weight_bytes`); the KV cache keeps its own dtype and the reserve is the one
  measured for the model. On an L4's budget within 2% of vLLM's blocks (docs/SIZING.md#fp8-weights).
- Transfer time is bytes / bandwidth at the node's nominal network rate: a lower bound that ignores
  NIXL handshakes and per-request overhead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from facts.engine_memory import EngineReserve, measured_reserve
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

# What a fixed KV cache leaves under a restart's KV bytes. vLLM suggests 150 MiB less than its profiling
# found, in case "memory profiling may slightly underestimate the memory consumption"
# (docs/SOURCES.md#vllm-kv-cache-memory). With the size fixed, what that guards is the first start's
# peak against the GPU, and it was measured (docs/PROVEN.md#first-start): a fixed first start on empty
# caches running fifteen 4,096-token sequences peaked at 21,166 MiB, 1,722 MiB under the L4's 22,888;
# an independent check at 2,903,630,644 B (a restart's 167 blocks) peaked at 21,264 MiB, where this
# module predicts 22,344. The peak needs no margin of its own. What is left to cover is the plan's error
# on the restart's bytes: its reserve derives from vLLM's log lines, rounded to 0.01 GiB (±5 MiB each).
# 64 MiB (under 4 blocks of Qwen3.5-9B's 16.5 MiB) covers that several times and leaves a new node's
# first start 163 of a restart's 167 blocks (98 %; 150 MiB would leave 158, under the 95 % to keep).
FIXED_KV_CACHE_MARGIN_BYTES = 64 * MIB

# The plan's KV blocks against vLLM's where the reserve was measured for the model, GPU and engine limits:
# with the published rotary settings every measured start (bf16 and FP8 weights, first start and restart)
# is within 1 % and none above vLLM's (the FP8 restart: 567 planned, 571 held; docs/PROVEN.md#first-start).
# A start the lab has not run may miss by more: 2 %. Where the reserve is this project's estimate: 10 %.
MEASURED_KV_BLOCKS_ERROR = 0.02
ESTIMATED_KV_BLOCKS_ERROR = 0.10

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


# vLLM's smallest attention-kernel block and default block_size (FlashAttention and Triton: 16 tokens):
# a hybrid model's attention block is a multiple of it (vllm/platforms/interface.py, vLLM 0.26).
KERNEL_BLOCK_ALIGNMENT = 16


@dataclass(frozen=True)
class HybridPaging:
    """vLLM 0.26's KV pages for a model of attention and linear-attention layers (no prefix caching)."""

    block_size: int  # tokens per attention block: its page holds one layer's state
    page_bytes: int  # one layer's page, attention or state
    layers_per_group: int  # layers sharing one block table; one pool tensor per position in a group
    attention_groups: int
    state_groups: int

    def blocks(self, kv_bytes: int) -> int:
        return max(kv_bytes, 0) // (self.page_bytes * self.layers_per_group)

    def blocks_per_sequence(self, tokens: int) -> int:
        return self.attention_groups * -(-tokens // self.block_size) + self.state_groups

    def kv_tokens(self, blocks: int, max_model_len: int) -> int:
        """vLLM's "GPU KV cache size": max_model_len × the sequences of that length the blocks hold."""
        return int(blocks / self.blocks_per_sequence(max_model_len) * max_model_len)


def hybrid_paging(model: ModelArchitecture, kv_dtype_bytes: int, model_dtype_bytes: int) -> HybridPaging | None:
    if model.linear_attention is None or not model.full_attention_layers:
        return None
    per_token = 2 * model.num_kv_heads * model.head_dim * kv_dtype_bytes  # one attention layer
    state = model.linear_attention.bytes_per_layer(model_dtype_bytes)
    block = KERNEL_BLOCK_ALIGNMENT * -(-state // (KERNEL_BLOCK_ALIGNMENT * per_token))
    group = min(model.full_attention_layers, model.linear_attention_layers)
    return HybridPaging(block_size=block, page_bytes=block * per_token, layers_per_group=group,
                        attention_groups=-(-model.full_attention_layers // group),
                        state_groups=-(-model.linear_attention_layers // group))


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
    vision_inputs: bool = False
    reserve_source: str = "estimate"
    quantization: str = ""  # "fp8": vLLM's online FP8 weights; "": the checkpoint's dtype
    position_table_bytes: int = 0  # per GPU: vLLM's rotary cos/sin table (ModelArchitecture.position_table_bytes)
    # Hybrid models, paged as vLLM pages them (None otherwise). Figures above are the first start on a new
    # node; the restart's are below. `num_blocks` is also the most sequences CUDA graphs can capture.
    block_size: int | None = None
    num_blocks: int | None = None
    blocks_per_sequence: int | None = None
    kv_budget_bytes_restart: int | None = None
    num_blocks_restart: int | None = None
    kv_tokens_restart: int | None = None
    # A fixed KV cache (vLLM's kv_cache_memory_bytes; None: vLLM's profiling sizes it), the first start's
    # predicted peak with it, and what the profiling alone would leave a first start.
    kv_cache_memory_bytes: int | None = None
    first_start_peak_bytes: int | None = None
    num_blocks_profiled_first_start: int | None = None
    fixed_kv_cache_off: str | None = None  # why a fixed KV cache was asked for and not set
    paging: HybridPaging | None = field(default=None, repr=False)  # how the block figures follow

    @property
    def weights_fit(self) -> bool:
        """Room for a KV cache at all: on a restart where one is measured (the first start may have less)."""
        budget = self.kv_budget_bytes if self.kv_budget_bytes_restart is None else self.kv_budget_bytes_restart
        return budget > 0

    @property
    def kv_blocks_error(self) -> float:
        """The share of the planned KV blocks a start may hold fewer of: none with a fixed KV cache (vLLM
        takes the bytes as given), else the measured or the estimated reserve's error."""
        if self.kv_cache_memory_bytes is not None:
            return 0.0
        return ESTIMATED_KV_BLOCKS_ERROR if self.reserve_source.startswith("estimate") else MEASURED_KV_BLOCKS_ERROR

    @property
    def sequences_that_can_start(self) -> int:
        """maxModelLen sequences the KV cache holds on a restart (the first start's where none is measured)."""
        if self.num_blocks_restart is None or not self.blocks_per_sequence:
            return self.max_concurrent_sequences
        return self.num_blocks_restart // self.blocks_per_sequence

    @property
    def max_concurrency(self) -> float | None:
        """vLLM's "Maximum concurrency for max_model_len tokens per request" (hybrid models)."""
        if self.num_blocks is None or not self.blocks_per_sequence:
            return None
        return self.num_blocks / self.blocks_per_sequence

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["paging"]  # its figures are the block fields
        data["weights_fit"] = self.weights_fit
        data["max_concurrency"] = self.max_concurrency
        return data

    def _facts_source(self) -> str:
        """Where the model facts come from, short enough for one line (the shipped facts cite their own)."""
        if len(self.model_facts_source) <= 100:
            return self.model_facts_source
        return f"facts/models.py, {self.model} (each figure's source there)"

    def _paging_lines(self) -> list[str]:
        if self.num_blocks is None:
            return []
        lines = [f"Paged as vLLM pages a hybrid model: {self.block_size}-token attention blocks, "
                 f"{self.blocks_per_sequence} blocks per {self.max_model_len}-token sequence; "
                 f"first start on a new node: {self.num_blocks} blocks "
                 f"({self.max_concurrency:.2f}× {self.max_model_len} tokens)"]
        if self.kv_cache_memory_bytes is not None and self.first_start_peak_bytes is not None:
            lines.append(f"KV cache fixed (kv_cache_memory_bytes {self.kv_cache_memory_bytes:,} B: a restart's KV "
                         f"less a {FIXED_KV_CACHE_MARGIN_BYTES // MIB} MiB margin): first start and restart "
                         f"{self.num_blocks} blocks (vLLM's profiling alone: {self.num_blocks_profiled_first_start} "
                         f"on a first start); first start's peak {self.first_start_peak_bytes / MIB:,.0f} MiB of "
                         f"{self.gpu_memory_bytes / MIB:,.0f} MiB (estimate)")
            return lines
        if self.num_blocks_restart is not None and self.kv_budget_bytes_restart is not None:
            lines.append(f"Restart (compile caches warm): KV budget {self.kv_budget_bytes_restart / MIB:,.0f} MiB, "
                         f"{self.num_blocks_restart} blocks, {self.kv_tokens_restart:,} KV tokens")
        return lines

    def _efa_transfer_text(self) -> str:
        if self.network_bytes_per_second <= 0:
            return "time unknown over LIBFABRIC/EFA (no network bandwidth on record for the node)"
        gbps = self.network_bytes_per_second * 8 / 1e9
        return f"{self.transfer_seconds * 1000:,.0f} ms at {gbps:g} Gbps (LIBFABRIC/EFA)"

    def render_text(self) -> str:
        graphs = " and CUDA graphs"
        lines = [
            f"Model {self.model} ({'hybrid: attention + linear attention' if self.hybrid else 'attention only'}),"
            f" {self.dtype}, max_model_len {self.max_model_len}",
            f"GPU: {self.gpus_per_replica} × {self.gpu_model} on {self.instance_type},"
            f" {self.gpu_memory_bytes / MIB:,.0f} MiB each, gpu_memory_utilization {self.gpu_memory_utilization:.2f}"
            f" → {self.usable_bytes / MIB:,.1f} MiB usable per GPU",
            f"Weights{' in FP8 (linear layers)' if self.quantization == 'fp8' else ''}:"
            f" {self.weight_bytes / GIB:,.2f} GiB ({self.weight_bytes_per_gpu / MIB:,.1f} MiB per GPU"
            f"{'' if not self.hybrid else ', vision encoder loaded' if self.vision_inputs else ', text only'});"
            f" rotary position table: {self.position_table_bytes / MIB:,.0f} MiB per GPU;"
            f" reserve for activations{'' if self.reserve_bytes_per_gpu == ACTIVATION_RESERVE_MIB * MIB else graphs}:"
            f" {self.reserve_bytes_per_gpu / MIB:,.0f} MiB per GPU ({self.reserve_source})",
            f"KV cache budget: {self.kv_budget_bytes / MIB:,.1f} MiB per replica",
            f"KV per token: {self.kv_bytes_per_token:,} B (full-attention layers only)"
            + (f"; fixed linear-attention state per sequence: {self.state_bytes_per_sequence / MIB:,.2f} MiB"
               if self.hybrid else ""),
            f"KV tokens that fit: {self.kv_tokens:,}; concurrent {self.max_model_len}-token sequences:"
            f" {self.max_concurrent_sequences}",
            *self._paging_lines(),
            *([f"KV cache not fixed: {self.fixed_kv_cache_off}"] if self.fixed_kv_cache_off else []),
            f"One {self.max_model_len}-token prompt moves {self.transfer_bytes_per_max_prompt / MIB:,.1f} MiB"
            f" prefill→decode: {self._efa_transfer_text()}, {self.transfer_seconds_ucx_on_efa * 1000:,.0f} ms at"
            f" {UCX_ON_EFA_BYTES_PER_SECOND / 1e9:g} GB/s (UCX on EFA)",
            f"vLLM's 'GPU KV cache size' log line wins over this. Model facts: {self._facts_source()}",
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
    vision_inputs: bool = False,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    fixed_kv_cache: bool = False,
    vllm_version: str | None = None,
    quantization: str = "",
) -> CapacityReport:
    """`network_bytes_per_second`: what the KV transfer runs at (default: `instance`'s network; when
    prefill and decode run on different types, the slower of the two). `vision_inputs`: a multimodal
    model's encoder is loaded. `max_num_seqs`/`max_num_batched_tokens`: the engine's limits, which
    decide whether a measured reserve applies (facts/engine_memory.py). `fixed_kv_cache`: size the KV
    cache as a restart's (vLLM's kv_cache_memory_bytes) where the reserve was measured for this model,
    `instance`'s GPU, `vllm_version` (the image's) and these limits; else `fixed_kv_cache_off` says why.
    `quantization` "fp8": the weights as vLLM's online FP8 quantization loads them."""
    serving_dtype = model.checkpoint_dtype if dtype == "auto" else dtype
    dtype_bytes = DTYPE_BYTES[serving_dtype]
    gpus = tensor_parallel_size * pipeline_parallel_size
    gpu_memory_bytes = instance.gpu_memory_mib_usable * MIB
    usable = int(gpu_memory_bytes * gpu_memory_utilization)
    weights = (model.fp8_weight_bytes(serving_dtype, vision_inputs=vision_inputs) if quantization == "fp8"
               else model.loaded_weight_bytes(serving_dtype, vision_inputs=vision_inputs))
    weights_per_gpu = -(-weights // gpus)
    reserve, restart_reserve, source = _reserve(model, gpus, cuda_graphs=not enforce_eager, vision=vision_inputs,
                                                max_num_seqs=max_num_seqs,
                                                max_num_batched_tokens=max_num_batched_tokens)
    # vLLM counts the rotary position table with the weights it loads: 128 MiB for Qwen3.5's M-RoPE.
    position_table = model.position_table_bytes(dtype_bytes)
    kv_budget = gpus * (usable - weights_per_gpu - position_table - reserve)
    kv_dtype_bytes = kv_cache_dtype_bytes(kv_cache_dtype, dtype_bytes)
    per_token = kv_bytes_per_token(model, kv_dtype_bytes)
    per_sequence_state = state_bytes_per_sequence(model, dtype_bytes)
    per_sequence = max_model_len * per_token + per_sequence_state
    paging = hybrid_paging(model, kv_dtype_bytes, dtype_bytes) if gpus == 1 else None
    restart_budget = None if restart_reserve is None else usable - weights_per_gpu - position_table - restart_reserve
    fixed: dict = {}
    if fixed_kv_cache:
        off = _why_not_fixed(model, instance, gpus, vllm_version, max_num_seqs, max_num_batched_tokens, quantization)
        if off is None and restart_budget is not None and restart_budget <= FIXED_KV_CACHE_MARGIN_BYTES:
            off = "a restart leaves no KV cache beyond vLLM's margin"
        if off is None and restart_budget is not None and paging is not None:
            kv_bytes = restart_budget - FIXED_KV_CACHE_MARGIN_BYTES
            fixed = {"kv_cache_memory_bytes": kv_bytes,
                     "first_start_peak_bytes": weights_per_gpu + position_table + reserve + kv_bytes,
                     "num_blocks_profiled_first_start": paging.blocks(kv_budget)}
            kv_budget = restart_budget = kv_bytes
        else:
            fixed = {"fixed_kv_cache_off": off or "no measured restart reserve to size it from"}
    kv_tokens, sequences, paged = _kv_capacity(max(kv_budget, 0), per_token, per_sequence, max_model_len, paging,
                                               restart_budget=restart_budget)
    network = instance.network_bytes_per_second if network_bytes_per_second is None else network_bytes_per_second
    return CapacityReport(
        model=model.hf_id, model_facts_source=model.source, hybrid=model.hybrid, instance_type=instance.name,
        gpu_model=instance.gpu_model or "none", gpus_per_replica=gpus, gpu_memory_bytes=gpu_memory_bytes,
        gpu_memory_utilization=gpu_memory_utilization, dtype=serving_dtype, max_model_len=max_model_len,
        usable_bytes=usable, weight_bytes=weights, weight_bytes_per_gpu=weights_per_gpu, reserve_bytes_per_gpu=reserve,
        kv_budget_bytes=kv_budget, kv_bytes_per_token=per_token, state_bytes_per_sequence=per_sequence_state,
        kv_tokens=kv_tokens, max_concurrent_sequences=sequences, transfer_bytes_per_max_prompt=per_sequence,
        network_bytes_per_second=network, transfer_seconds=per_sequence / network if network else float("inf"),
        transfer_seconds_ucx_on_efa=per_sequence / UCX_ON_EFA_BYTES_PER_SECOND, vision_inputs=vision_inputs,
        reserve_source=source, quantization=quantization, position_table_bytes=position_table, **paged, **fixed)


def _why_not_fixed(model: ModelArchitecture, instance: InstanceType, gpus: int, vllm_version: str | None,
                   max_num_seqs: int | None, max_num_batched_tokens: int | None, quantization: str) -> str | None:
    """Why a restart's KV bytes are not known for this engine (None: they are, as measured)."""
    measured = measured_reserve(model.hf_id)
    if measured is None:
        return f"no restart measured for {model.hf_id} (facts/engine_memory.py)"
    # FP8's restart was measured (docs/PROVEN.md#first-start), but no first start at a fixed size under a full
    # load: its planned peak is the arithmetic's alone, so vLLM's profiling sizes the first start instead.
    if quantization == "fp8":
        return "no first start with FP8 weights at a fixed KV cache measured; vLLM's profiling sizes it"
    if gpus != 1:
        return "measured for one GPU per replica only"
    if instance.gpu_model != measured.gpu_model:
        return f"measured on {measured.gpu_model} memory, the node's GPU is {instance.gpu_model or 'none'}"
    if vllm_version != measured.vllm_version:
        return f"measured on vLLM {measured.vllm_version}, the image runs vLLM {vllm_version or '(unknown)'}"
    if not _as_measured(measured, max_num_seqs, max_num_batched_tokens):
        return (f"measured at maxNumSeqs {measured.max_num_seqs} and maxNumBatchedTokens "
                f"{measured.max_num_batched_tokens} only")
    return None


def _reserve(model: ModelArchitecture, gpus: int, *, cuda_graphs: bool, vision: bool, max_num_seqs: int | None,
             max_num_batched_tokens: int | None) -> tuple[int, int | None, str]:
    """What the engine keeps per GPU besides weights and KV cache: (first start, restart where
    measured, where the figure comes from). Measured for single-GPU replicas of a few models only."""
    measured = measured_reserve(model.hf_id) if gpus == 1 else None
    if measured is None:
        return (ACTIVATION_RESERVE_MIB + (CUDA_GRAPH_RESERVE_MIB if cuda_graphs else 0)) * MIB, None, "estimate"
    source = measured.source
    if not _as_measured(measured, max_num_seqs, max_num_batched_tokens):
        source = (f"estimate from the reserve measured at maxNumSeqs {measured.max_num_seqs}, maxNumBatchedTokens "
                  f"{measured.max_num_batched_tokens} (larger limits raise vLLM's profile peak)")
    return (measured.bytes(cuda_graphs=cuda_graphs, vision=vision, first_start=True),
            measured.bytes(cuda_graphs=cuda_graphs, vision=vision, first_start=False), source)


def _kv_capacity(budget: int, per_token: int, per_sequence: int, max_model_len: int, paging: HybridPaging | None,
                 *, restart_budget: int | None) -> tuple[int, int, dict]:
    """KV tokens and max_model_len sequences the replica's `budget` holds, and a hybrid model's paged
    figures (CapacityReport's block fields; the restart's where `restart_budget` is measured)."""
    kv_tokens, sequences = budget // per_token, budget // per_sequence
    if paging is None:
        return kv_tokens, sequences, {}
    blocks = paging.blocks(budget)
    paged: dict = {"paging": paging, "block_size": paging.block_size, "num_blocks": blocks,
                   "blocks_per_sequence": paging.blocks_per_sequence(max_model_len)}
    if restart_budget is not None:
        restart_blocks = paging.blocks(restart_budget)
        paged.update(kv_budget_bytes_restart=restart_budget, num_blocks_restart=restart_blocks,
                     kv_tokens_restart=paging.kv_tokens(restart_blocks, max_model_len))
    return paging.kv_tokens(blocks, max_model_len), blocks // paging.blocks_per_sequence(max_model_len), paged


def _as_measured(reserve: EngineReserve, max_num_seqs: int | None, max_num_batched_tokens: int | None) -> bool:
    """The engine runs with the limits the reserve was measured at (an unset limit counts as those)."""
    seqs = reserve.max_num_seqs if max_num_seqs is None else max_num_seqs
    tokens = reserve.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    return reserve.applies_to(seqs, tokens)
