"""How long one replica of a phase takes to prefill a prompt, to take one decode step, and to hand the KV
over: first principles over the vendor peaks (facts/gpus.py), scaled by measured efficiencies
(facts/slo_calibration.py). Pure arithmetic; no ray/vllm import.

Prefill is compute-bound. FLOPs for a P-token prompt:
    2 · N · P                                  (every parameter multiplies and adds once per token)
  + 2 · L_attn · H · d · P²                    (QKᵀ and AV over the causal half of P², 2 FLOPs each)
  + 4 · L_lin · H_v · d_k · d_v · P            (a Gated-DeltaNet layer's state update and read-out)
  time = FLOPs / (GPUs × dense bf16 peak × prefill efficiency).
N counts every checkpoint parameter (for Qwen3.5-9B that includes the vision encoder: an upper bound).

Decode is memory-bound. One step of a batch of B sequences, each at context c, reads
    weights + B · (c · KV bytes per token + 2 · state bytes per sequence)
(the hybrid layers' recurrent state is read and written back every step), and computes
B · (2 · N + 4 · L_attn · H · d · c) FLOPs; its time is the larger of bytes / (GPUs × bandwidth ×
decode efficiency) and FLOPs / (GPUs × peak × prefill efficiency). Tensor parallelism is taken to
scale both peaks linearly (its all-reduces are not modelled).

The engine bounds a decode batch: at most `maxNumSeqs` sequences, and no more than its KV cache holds
(blocks on a first start, the smaller of the two starts, for a paged hybrid model). A batch runs as
the next CUDA graph captured at or above it (vLLM pads it: docs/SOURCES.md#cuda-graph-padding); above
the largest one it runs eager, a measured fixed time per step more (facts/slo_calibration.py).

The KV hand-over moves P · KV bytes per token + the state over the network the capacity report names
(serve_app/capacity.py): a lower bound that ignores NIXL's per-request overhead. The decode engine
takes each hand-over in between its steps, stalling them for a calibrated share of its time on the
link (`ingest_seconds`).

`datasheet=True` gives the same times at 100 % of the peaks with no fixed overhead: floors no
engine can beat, which is what a preview may refuse a target on.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from facts.gpus import GpuSpec
from facts.models import ModelArchitecture
from facts.slo_calibration import CALIBRATION, EAGER_STEP_OVERHEAD_SECONDS, Calibration
from serve_app.capacity import CapacityReport, HybridPaging
from serve_app.config import EngineSettings, PDAppConfig
from serve_app.render import cuda_graph_capture_sizes

DEFAULT_STREAM_TICK_SECONDS = PDAppConfig.model_fields["stream_batching_interval_ms"].default / 1000


@dataclass(frozen=True)
class ReplicaModel:
    """One replica of one phase on one GPU type, with what timing it needs."""

    model: ModelArchitecture
    gpu: GpuSpec
    gpus_per_replica: int
    weight_bytes: int
    kv_bytes_per_token: int
    state_bytes_per_sequence: int
    kv_budget_bytes: int  # the replica's KV cache (capacity report)
    network_bytes_per_second: float  # what the KV hand-over runs at
    calibration: Calibration = CALIBRATION
    # The engine's limits (None: not modelled, a bare replica): its sequence cap, the decode batches it
    # captures as CUDA graphs (() with enforceEager), and a paged KV cache's blocks on its smaller start.
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None  # a step's token budget: how a colocated prefill is chunked
    cuda_graph_sizes: tuple[int, ...] | None = None
    kv_blocks: int | None = None
    paging: HybridPaging | None = None
    # How often Ray Serve LLM flushes a stream to its client (streamBatchingIntervalMs): a first token
    # waits for the next flush (serve_app/colocated_engine.py).
    stream_tick_seconds: float = DEFAULT_STREAM_TICK_SECONDS

    @classmethod
    def from_capacity(cls, report: CapacityReport, model: ModelArchitecture, gpu: GpuSpec,
                      calibration: Calibration = CALIBRATION, engine: EngineSettings | None = None,
                      stream_tick_seconds: float = DEFAULT_STREAM_TICK_SECONDS) -> ReplicaModel:
        """The replica `report` describes; `engine`, the settings it runs with, bounds its decode batch;
        `stream_tick_seconds`: the app's streamBatchingIntervalMs in seconds."""
        blocks = report.num_blocks if report.num_blocks_restart is None or report.num_blocks is None \
            else min(report.num_blocks, report.num_blocks_restart)
        graphs = None if engine is None else () if engine.enforce_eager else tuple(cuda_graph_capture_sizes(engine))
        return cls(model=model, gpu=gpu, gpus_per_replica=report.gpus_per_replica, weight_bytes=report.weight_bytes,
                   kv_bytes_per_token=report.kv_bytes_per_token,
                   state_bytes_per_sequence=report.state_bytes_per_sequence,
                   kv_budget_bytes=max(report.kv_budget_bytes, 0),
                   network_bytes_per_second=report.network_bytes_per_second, calibration=calibration,
                   max_num_seqs=None if engine is None else engine.max_num_seqs,
                   max_num_batched_tokens=None if engine is None else engine.max_num_batched_tokens,
                   cuda_graph_sizes=graphs,
                   kv_blocks=blocks, paging=report.paging, stream_tick_seconds=stream_tick_seconds)

    # ── FLOPs and bytes ─────────────────────────────────────────────────────────────────────
    def _attention_flops_per_token_and_context(self) -> float:
        model = self.model
        return 4.0 * model.full_attention_layers * model.num_attention_heads * model.head_dim

    def _linear_attention_flops_per_token(self) -> float:
        state = self.model.linear_attention
        if state is None:
            return 0.0
        return 4.0 * self.model.linear_attention_layers * state.num_value_heads * state.key_head_dim \
            * state.value_head_dim

    def prefill_flops(self, tokens: int) -> float:
        dense = 2.0 * self.model.parameter_count * tokens
        # Σ over positions t < P of 4·L·H·d·t = 2·L·H·d·P² (to leading order).
        attention = self._attention_flops_per_token_and_context() * tokens * tokens / 2
        return dense + attention + self._linear_attention_flops_per_token() * tokens

    def decode_step_bytes(self, batch: float, context_tokens: float) -> float:
        per_sequence = context_tokens * self.kv_bytes_per_token + 2 * self.state_bytes_per_sequence
        return self.weight_bytes + batch * per_sequence

    def decode_step_flops(self, batch: float, context_tokens: float) -> float:
        per_sequence = (2.0 * self.model.parameter_count + self._linear_attention_flops_per_token()
                        + self._attention_flops_per_token_and_context() * context_tokens)
        return batch * per_sequence

    # ── Times ───────────────────────────────────────────────────────────────────────────────
    def _flops_per_second(self, datasheet: bool) -> float:
        efficiency = 1.0 if datasheet else self.calibration.prefill_compute_efficiency
        return self.gpus_per_replica * self.gpu.bf16_dense_flops * efficiency

    def _bytes_per_second(self, datasheet: bool) -> float:
        efficiency = 1.0 if datasheet else self.calibration.decode_bandwidth_efficiency
        return self.gpus_per_replica * self.gpu.memory_bytes_per_second * efficiency

    def prefill_seconds(self, tokens: int, *, datasheet: bool = False) -> float:
        return self.prefill_flops(tokens) / self._flops_per_second(datasheet)

    def decode_step_terms(self, context_tokens: float, *, datasheet: bool = False) -> tuple[float, float, float]:
        """A decode step's time as max(fixed + B · per_sequence_memory, B · per_sequence_compute):
        (fixed, per_sequence_memory, per_sequence_compute) seconds, for sequences at `context_tokens`."""
        bandwidth, flops = self._bytes_per_second(datasheet), self._flops_per_second(datasheet)
        per_sequence_bytes = self.decode_step_bytes(1, context_tokens) - self.weight_bytes
        return (self.weight_bytes / bandwidth, per_sequence_bytes / bandwidth,
                self.decode_step_flops(1, context_tokens) / flops)

    def decode_step_seconds(self, batch: float, context_tokens: float, *, datasheet: bool = False) -> float:
        """One step of `batch` sequences as the engine runs it: padded to the CUDA graph captured at or
        above it, or eager (a fixed time more) above the largest; `datasheet`: the batch itself, no overhead."""
        fixed, memory, compute = self.decode_step_terms(context_tokens, datasheet=datasheet)
        graphs = self.cuda_graph_sizes
        run, eager = batch, False
        if not datasheet and graphs is not None:
            at = bisect.bisect_left(graphs, batch)
            run, eager = (graphs[at], False) if at < len(graphs) else (batch, True)
        return max(fixed + run * memory, run * compute) + (EAGER_STEP_OVERHEAD_SECONDS if eager else 0.0)

    def transfer_seconds(self, tokens: int) -> float:
        moved = tokens * self.kv_bytes_per_token + self.state_bytes_per_sequence
        return moved / self.network_bytes_per_second if self.network_bytes_per_second else float("inf")

    def ingest_seconds(self, tokens: int) -> float:
        """What taking in one `tokens`-token prompt's KV and state costs the decode engine between its
        steps: the calibrated share of the hand-over's time on the link."""
        return self.calibration.decode_ingest_share * self.transfer_seconds(tokens)

    def intake_seconds(self, tokens: int) -> float:
        """What a colocated engine's running sequences wait when a step takes one `tokens`-token prompt in:
        its prefill and the calibrated fixed time of such a step (vLLM's inter-token histogram)."""
        return self.prefill_seconds(tokens) + self.calibration.prompt_intake_fixed_seconds

    def sequences_that_fit(self, tokens: int) -> int:
        """Sequences of `tokens` tokens whose KV (+ state) the replica's KV cache holds at once: in
        blocks where paged (a sequence takes whole blocks), else in bytes."""
        if self.paging is not None and self.kv_blocks is not None:
            return self.kv_blocks // self.paging.blocks_per_sequence(tokens)
        return int(self.kv_budget_bytes // (tokens * self.kv_bytes_per_token + self.state_bytes_per_sequence))

    def batch_cap(self, tokens: int) -> int:
        """Most sequences of `tokens` tokens the engine decodes at once: its maxNumSeqs and its KV cache."""
        fit = self.sequences_that_fit(tokens)
        return fit if self.max_num_seqs is None else min(self.max_num_seqs, fit)

    @property
    def request_overhead_seconds(self) -> float:
        return self.calibration.request_overhead_seconds
