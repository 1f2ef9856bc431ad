"""Model architectures this project can size without downloading a checkpoint, as data.

What the capacity estimate needs from a model: how many bytes its weights take, and how many bytes
of attention KV cache one token adds (and, for hybrid models, how many bytes of fixed recurrent
state one sequence holds). Each entry names where its numbers come from; a number we could not
confirm from the model's own config.json or safetensors index is marked as such.

`architecture_from_hf_config` reads the same fields from a Hugging Face `config.json` (the preview
reads the model's own files: serve_app/model_facts.py), with the safetensors index's
`metadata.total_size` as the exact weight size: every expert of a mixture-of-experts model is in it.
`load_architecture(path)` does so for a local directory. The entries below are the offline fallback.

What is assumed about attention layers: every layer that is not linear attention keeps K and V for
the whole sequence, sliding-window layers included. vLLM allocates sliding-window layers only a
window's worth when its hybrid KV-cache manager is on, but it turns that manager off with some KV
connectors (this stack always sets NixlConnector), so the fit is checked for the case that holds
either way: a model that fits here fits there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE_BYTES: Mapping[str, int] = {
    "bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4,
}
# vLLM's M-RoPE position table holds 4 × max_position_embeddings positions (vLLM 0.26.0
# rotary_embedding/mrope.py: "We enlarge max_position_embeddings to 4 times").
MROPE_POSITION_TABLE_SCALE = 4


@dataclass(frozen=True)
class LinearAttentionState:
    """Per-layer recurrent state of a Gated-DeltaNet (linear attention) layer, per sequence.

    It has a fixed size whatever the sequence length: a causal-conv window of
    (conv_kernel - 1) × conv_dim values, conv_dim = 2 × key_heads × key_head_dim + value_heads ×
    value_head_dim, and a recurrent matrix of value_heads × key_head_dim × value_head_dim values.
    """

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    state_dtype: str  # config.json `mamba_ssm_dtype`; the conv window uses the model dtype

    def conv_elements(self) -> int:
        conv_dim = 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim
        return (self.conv_kernel - 1) * conv_dim

    def recurrent_elements(self) -> int:
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    def bytes_per_layer(self, model_dtype_bytes: int) -> int:
        return (self.conv_elements() * model_dtype_bytes
                + self.recurrent_elements() * DTYPE_BYTES[self.state_dtype])


@dataclass(frozen=True)
class ModelArchitecture:
    hf_id: str
    num_layers: int
    full_attention_layers: int  # layers that keep a KV cache growing with the sequence
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    parameter_count: int
    checkpoint_dtype: str
    max_position_embeddings: int
    source: str
    checkpoint_bytes: int | None = None  # safetensors index metadata.total_size, when known
    linear_attention: LinearAttentionState | None = None
    notes: str = ""
    # Parts of the checkpoint a text-only engine does not load (None: not known, counted as loaded).
    vision_encoder_bytes: int | None = None
    mtp_bytes: int | None = None  # multi-token-prediction layers: loaded only for speculative decoding
    gated: bool = False  # the Hub repository is gated: a download needs a token whose account accepted its terms
    tie_word_embeddings: bool = False  # lm_head shares the input embedding's weights (config.json)
    # Rotary positions (config.json rope_parameters): the share of each head rotated, and M-RoPE
    # (`mrope_section` present), for which vLLM keeps a position table 4× as long.
    partial_rotary_factor: float = 1.0
    mrope: bool = False

    @property
    def hybrid(self) -> bool:
        return self.linear_attention is not None

    @property
    def linear_attention_layers(self) -> int:
        return self.num_layers - self.full_attention_layers

    def position_table_bytes(self, dtype_bytes: int) -> int:
        """vLLM's rotary cos/sin table, one per engine (every attention layer shares it), in the model's
        dtype: max_position_embeddings (× 4 for M-RoPE) rows of the rotated dimensions. vLLM counts it in
        the memory it reports for loading the model (vLLM 0.26.0 `RotaryEmbeddingBase`, `MRotaryEmbedding`;
        docs/SOURCES.md#qwen35-rotary). Qwen3.5-9B: 262,144 × 4 × 64 × 2 B = 128 MiB."""
        positions = self.max_position_embeddings * (MROPE_POSITION_TABLE_SCALE if self.mrope else 1)
        return positions * int(self.head_dim * self.partial_rotary_factor) * dtype_bytes

    def weight_bytes(self, dtype: str) -> int:
        """Bytes the weights take on the GPU at `dtype` ("auto" = the checkpoint's dtype)."""
        dtype = self.checkpoint_dtype if dtype == "auto" else dtype
        if dtype in DTYPE_BYTES and DTYPE_BYTES[dtype] == DTYPE_BYTES[self.checkpoint_dtype] \
                and self.checkpoint_bytes is not None:
            return self.checkpoint_bytes
        return self.parameter_count * DTYPE_BYTES[dtype]

    def loaded_weight_bytes(self, dtype: str, *, vision_inputs: bool) -> int:
        """Bytes vLLM loads: the checkpoint without its MTP layers, and without the vision encoder
        when the engine serves text only (`language_model_only`)."""
        total = self.weight_bytes(dtype)
        scale = total / self.checkpoint_bytes if self.checkpoint_bytes else 1.0
        left_out = (self.mtp_bytes or 0) + (0 if vision_inputs else (self.vision_encoder_bytes or 0))
        return total - round(left_out * scale)

    def unquantized_language_parameters(self) -> int:
        """Language-model parameters outside linear layers: the input embedding, an untied lm_head and
        the RMSNorms (two per layer and a final one). The few others (q/k norms, the linear-attention
        conv kernels, decay and bias vectors: under 1 MiB for Qwen3.5-9B) are not counted."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return embeddings + (2 * self.num_layers + 1) * self.hidden_size

    def fp8_weight_bytes(self, dtype: str, *, vision_inputs: bool) -> int:
        """Bytes vLLM's online FP8 quantization (`quantization: fp8`) loads: every linear layer's weights
        at one byte; embeddings, lm_head and norms stay at `dtype` (docs/SOURCES.md#vllm-fp8). A loaded
        vision encoder is counted at `dtype` (its linear layers are not told apart here: the larger)."""
        loaded = self.loaded_weight_bytes(dtype, vision_inputs=vision_inputs)
        dtype_bytes = DTYPE_BYTES[self.checkpoint_dtype if dtype == "auto" else dtype]
        language = self.loaded_weight_bytes(dtype, vision_inputs=False) // dtype_bytes
        linear = language - self.unquantized_language_parameters()
        return loaded - linear * (dtype_bytes - 1)


KNOWN_MODELS: Mapping[str, ModelArchitecture] = {m.hf_id: m for m in (
    ModelArchitecture(
        hf_id="Qwen/Qwen3.5-9B",
        num_layers=32, full_attention_layers=8,
        num_attention_heads=16, num_kv_heads=4, head_dim=256,
        hidden_size=4096, vocab_size=248_320,
        parameter_count=9_653_108_208,  # checkpoint_bytes / 2 (bf16): not stated by Qwen; derived
        checkpoint_dtype="bfloat16", checkpoint_bytes=19_306_216_416,
        max_position_embeddings=262_144,
        # The published checkpoints' rope_parameters: partial rotary 0.25, interleaved M-RoPE
        # (docs/SOURCES.md#qwen35-rotary).
        partial_rotary_factor=0.25, mrope=True,
        linear_attention=LinearAttentionState(
            num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128,
            conv_kernel=4, state_dtype="float32"),
        source=(
            "Shapes: transformers 5.24.0 Qwen3_5TextConfig defaults, documented there as the 'Qwen3.5-9B style "
            "configuration' (vocab 248320, hidden 4096, intermediate 12288, 32 layers, full_attention_interval 4, "
            "16 heads, 4 KV heads, head_dim 256, linear attention 16 key / 32 value heads of dim 128, conv kernel 4); "
            "the same layer_types, head_dim and hidden size appear in huggingface.co/Qwen/Qwen3.5-9B config.json and "
            "model.safetensors.index.json metadata.total_size 19306216416, as quoted from the Hub in a public source "
            "(2026-05; not read from the Hub by this project). max_position_embeddings 262144 and mamba_ssm_dtype "
            "float32 (vLLM 0.29 "
            "Qwen3_5ForConditionalGenerationConfig copies it into mamba_ssm_cache_dtype) come from model cards and "
            "GGUF metadata only: unconfirmed. State shapes follow vLLM 0.29 "
            "MambaStateShapeCalculator.gated_delta_net_state_shape. Read 2026-11."
        ),
        # transformers 5.24's Qwen3_5ForConditionalGeneration of this config on the meta device: the vision
        # encoder has 456,010,480 parameters, language model + lm_head 8,953,803,264 (17,907,606,528 B;
        # vLLM logs "Model loading took 16.71 GiB" text only, 17.57 GiB with the encoder); the MTP layer is
        # the rest of the checkpoint. docs/PROVEN.md#default-deployment.
        vision_encoder_bytes=912_020_960,
        mtp_bytes=19_306_216_416 - 17_907_606_528 - 912_020_960,
        notes=(
            "Qwen3_5ForConditionalGeneration: the checkpoint includes the vision encoder and one MTP layer; "
            "a text-only engine loads neither. Needs VLLM_SSM_CONV_STATE_LAYOUT=DS on workers for NIXL (AWS sample)."
        ),
    ),
    ModelArchitecture(
        hf_id="meta-llama/Llama-3.1-8B-Instruct",
        num_layers=32, full_attention_layers=32,
        num_attention_heads=32, num_kv_heads=8, head_dim=128,
        hidden_size=4096, vocab_size=128_256,
        parameter_count=8_030_261_248,
        checkpoint_dtype="bfloat16", checkpoint_bytes=16_060_522_496,
        max_position_embeddings=131_072,
        source=("huggingface.co/meta-llama/Llama-3.1-8B-Instruct config.json and model.safetensors.index.json "
                "(total_size 16060522496 = 8030261248 params × 2 B). Read 2026-11. The repository is gated "
                "(its page asks to accept the Llama 3.1 Community License before the files can be read)."),
        gated=True,
    ),
    ModelArchitecture(
        hf_id="Qwen/Qwen3-8B",
        num_layers=36, full_attention_layers=36,
        num_attention_heads=32, num_kv_heads=8, head_dim=128,
        hidden_size=4096, vocab_size=151_936,
        parameter_count=8_190_735_360,
        checkpoint_dtype="bfloat16",
        max_position_embeddings=40_960,
        source=("huggingface.co/Qwen/Qwen3-8B config.json; parameter count 8190735360 from the Hub's "
                "safetensors metadata (BF16). Read 2026-11."),
    ),
    ModelArchitecture(
        hf_id="Qwen/Qwen2.5-7B-Instruct",
        num_layers=28, full_attention_layers=28,
        num_attention_heads=28, num_kv_heads=4, head_dim=128,
        hidden_size=3584, vocab_size=152_064,
        parameter_count=7_615_616_512,
        checkpoint_dtype="bfloat16",
        max_position_embeddings=32_768,
        source=("huggingface.co/Qwen/Qwen2.5-7B-Instruct config.json; parameter count 7615616512 from the "
                "Hub's safetensors metadata (BF16). Read 2026-11."),
    ),
)}


def known_model(model_source: str) -> ModelArchitecture | None:
    """The architecture of a Hugging Face id we ship facts for (case-insensitive), else None."""
    wanted = model_source.lower()
    return next((m for m in KNOWN_MODELS.values() if m.hf_id.lower() == wanted), None)


def _dense_parameter_estimate(text: Mapping[str, Any], tied: bool) -> int:
    hidden = text["hidden_size"]
    heads = text["num_attention_heads"]
    kv_heads = text.get("num_key_value_heads", heads)
    head_dim = text.get("head_dim") or hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * text["intermediate_size"]
    embeddings = text["vocab_size"] * hidden * (1 if tied else 2)
    return text["num_hidden_layers"] * (attention + mlp + 2 * hidden) + embeddings + hidden


# config.json `layer_types` values: layers that keep a KV cache (counted as full attention: see the
# module note on sliding windows), and Gated-DeltaNet linear attention (fixed state per sequence).
ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "attention", "chunked_attention"})
LINEAR_ATTENTION_LAYER_TYPES = frozenset({"linear_attention"})
# config.json keys that give a mixture-of-experts model's expert count.
_EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


def architecture_from_hf_config(config: Mapping[str, Any], *, hf_id: str, source: str,
                                checkpoint_bytes: int | None = None) -> ModelArchitecture:
    """Build a `ModelArchitecture` from a Hugging Face config.json (nested text_config allowed).

    Dense models get a parameter estimate from their shapes when the checkpoint size is unknown;
    hybrid (linear-attention) and mixture-of-experts models need the safetensors index, because their
    layer weights are not estimated here. Raises ValueError naming what is missing or not sized.
    """
    text = config.get("text_config") or config
    try:
        layers = text["num_hidden_layers"]
        heads = text["num_attention_heads"]
        hidden = text["hidden_size"]
        vocab = text["vocab_size"]
    except KeyError as missing:
        raise ValueError(f"config.json has no {missing.args[0]}") from None
    kv_heads = text.get("num_key_value_heads", heads)
    head_dim = text.get("head_dim") or hidden // heads
    if text.get("kv_lora_rank"):
        raise ValueError("multi-head latent attention (kv_lora_rank) is not sized here")
    layer_types = text.get("layer_types") or ["full_attention"] * layers
    unknown = sorted(set(layer_types) - ATTENTION_LAYER_TYPES - LINEAR_ATTENTION_LAYER_TYPES)
    if unknown:
        raise ValueError(f"config.json layer_types {unknown} are not sized here")
    full_layers = sum(1 for kind in layer_types if kind in ATTENTION_LAYER_TYPES)
    experts = max((int(text.get(key) or config.get(key) or 0) for key in _EXPERT_COUNT_KEYS), default=0)
    if experts and checkpoint_bytes is None:
        raise ValueError(f"mixture of {experts} experts: the weight size needs model.safetensors.index.json")
    dtype = str(text.get("dtype") or text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"config.json dtype {dtype!r} is not one of {sorted(DTYPE_BYTES)}")
    linear = None
    if full_layers < layers:
        linear = LinearAttentionState(
            num_key_heads=text["linear_num_key_heads"], num_value_heads=text["linear_num_value_heads"],
            key_head_dim=text["linear_key_head_dim"], value_head_dim=text["linear_value_head_dim"],
            conv_kernel=text["linear_conv_kernel_dim"], state_dtype=str(text.get("mamba_ssm_dtype", dtype)))
        if checkpoint_bytes is None:
            raise ValueError("hybrid model: put model.safetensors.index.json beside config.json so the "
                             "weight size is known")
    tied = bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    parameters = (checkpoint_bytes // DTYPE_BYTES[dtype] if checkpoint_bytes is not None
                  else _dense_parameter_estimate(text, tied))
    return ModelArchitecture(
        hf_id=hf_id, num_layers=layers, full_attention_layers=full_layers,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        hidden_size=hidden, vocab_size=vocab, parameter_count=parameters,
        checkpoint_dtype=dtype, checkpoint_bytes=checkpoint_bytes,
        max_position_embeddings=int(text.get("max_position_embeddings", 0)),
        linear_attention=linear, source=source, tie_word_embeddings=tied,
        partial_rotary_factor=float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0))),
        mrope="mrope_section" in rope,
    )


def load_architecture(path: str | Path, *, hf_id: str | None = None) -> ModelArchitecture:
    """Read a local config.json (a file, or a directory holding one) and its safetensors index."""
    path = Path(path)
    config_path = path / "config.json" if path.is_dir() else path
    config = json.loads(config_path.read_text(encoding="utf-8"))
    index_path = config_path.with_name("model.safetensors.index.json")
    checkpoint_bytes = None
    if index_path.exists():
        checkpoint_bytes = int(json.loads(index_path.read_text(encoding="utf-8"))["metadata"]["total_size"])
    return architecture_from_hf_config(
        config, hf_id=hf_id or config_path.parent.name, source=f"local file {config_path}",
        checkpoint_bytes=checkpoint_bytes)
