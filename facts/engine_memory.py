"""What a vLLM engine keeps for itself beside weights and KV cache, measured per architecture.

vLLM sizes its KV cache as `gpu_memory_utilization` × the GPU's memory minus the weights, the profile
run's peak (activations, sampler, the vision encoder's dummy batch) and the memory outside torch, and
minus its CUDA graph estimate (vLLM 0.26 `gpu_worker.determine_available_memory`). Those last parts
cannot be derived from a config.json; they are measured here, for one engine at a time on the
deployment GPU's memory budget (`python -m lab probe-memory`, docs/PROVEN.md#default-deployment).

Each figure is the memory vLLM's own log lines leave for it: budget − "Model loading took X GiB" −
"Available KV cache memory: Y GiB". The first start on a new node pays more than a restart: with the
compile caches empty, Triton's autotuning and the torch.compile run inside vLLM's memory profiling, and
their buffers count in its peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GIB = 1024 ** 3


@dataclass(frozen=True)
class EngineReserve:
    """Bytes one engine keeps outside weights and KV cache, by what it runs."""

    eager_bytes: int  # profile peak + non-torch memory, warm compile caches, text only
    cuda_graphs_bytes: int  # added by capturing CUDA graphs
    vision_encoder_bytes: int  # added by loading the vision encoder (its profile batch)
    first_start_bytes: int  # added on the first start of a node (compile caches empty)
    vllm_version: str
    gpu_model: str  # the GPU whose memory budget the engine was held to
    max_num_seqs: int
    max_num_batched_tokens: int
    source: str

    def bytes(self, *, cuda_graphs: bool, vision: bool, first_start: bool) -> int:
        return (self.eager_bytes + self.cuda_graphs_bytes * cuda_graphs + self.vision_encoder_bytes * vision
                + self.first_start_bytes * first_start)

    def applies_to(self, max_num_seqs: int, max_num_batched_tokens: int) -> bool:
        """Measured at these engine limits; others move the profile peak (then: an estimate)."""
        return (max_num_seqs, max_num_batched_tokens) == (self.max_num_seqs, self.max_num_batched_tokens)


# Qwen3.5-9B's architecture, dummy weights, vLLM 0.26.0 (Ray LLM image), FlashInfer sampler, each engine
# held to 0.90 × 22,888 MiB (an L4 of g6.8xlarge) = 21,599,826,739 B on an H200, one engine at a time,
# maxNumSeqs 32, maxNumBatchedTokens 2048. vLLM's lines ("Available KV cache memory"):
# - 2026-12-03, the published rotary settings (M-RoPE: a 128 MiB position table; docs/PROVEN.md#first-start):
#   CUDA graphs, warm: 2.70 GiB    CUDA graphs, first start: 1.00 GiB
# - 2026-12-02, transformers' default rotary settings (a 32 MiB table; docs/PROVEN.md#default-deployment):
#   eager, warm: 2.93 GiB    CUDA graphs, warm: 2.80 GiB    CUDA graphs, first start: 1.09 GiB
#   vision encoder, eager, warm: 0.40 GiB (CUDA graphs: 0.29 GiB, refused: 17 blocks < 32 sequences)
# Each reserve is the budget less the weights facts/models.py says the engine loads and their rotary
# position table (vLLM logs 16.80 GiB against 16.68 + 0.125 there; 16.71 against 16.68 + 0.031 with the
# default table) less that KV memory: the position table is the model's (`position_table_bytes`), so
# the reserve holds what neither config decides. The CUDA graph and first-start figures come from the
# published settings' starts; eager and the vision encoder from their difference with the graphs'
# restart on 2026-12-02 (the same table on both sides).
_BUDGET = 21_599_826_739
_TEXT_WEIGHTS = 17_907_606_528  # Qwen3.5-9B language model + lm_head, bf16 (facts/models.py)
_VISION_WEIGHTS = _TEXT_WEIGHTS + 912_020_960
_MROPE_POSITION_TABLE = 262_144 * 4 * 64 * 2  # Qwen3.5-9B's, as published (facts/models.py position_table_bytes)
_GRAPHS_RESTART = _BUDGET - _TEXT_WEIGHTS - _MROPE_POSITION_TABLE - round(2.70 * GIB)
_EAGER = _GRAPHS_RESTART - round((2.93 - 2.80) * GIB)
QWEN35_RESERVE = EngineReserve(
    eager_bytes=_EAGER,
    cuda_graphs_bytes=_GRAPHS_RESTART - _EAGER,
    vision_encoder_bytes=_TEXT_WEIGHTS - _VISION_WEIGHTS + round((2.93 - 0.40) * GIB),
    first_start_bytes=round((2.70 - 1.00) * GIB),
    vllm_version="0.26.0", gpu_model="L4", max_num_seqs=32, max_num_batched_tokens=2048,
    source="measured for this model on vLLM 0.26.0 (docs/PROVEN.md#default-deployment, #first-start)",
)

MEASURED_RESERVES: Mapping[str, EngineReserve] = {"Qwen/Qwen3.5-9B": QWEN35_RESERVE}


def measured_reserve(hf_id: str) -> EngineReserve | None:
    wanted = hf_id.lower()
    return next((r for key, r in MEASURED_RESERVES.items() if key.lower() == wanted), None)
