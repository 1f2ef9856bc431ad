"""Models that need no hub: a tiny random-weight Llama, and a random-weight model with a real shape.

Both come with a byte-level BPE tokenizer trained here (`tokenizers`) on a seeded synthetic corpus,
plus a chat template, so vLLM and Ray Serve LLM load them from a local directory with no network.

- `write_tiny_model(dir)`: a few million parameters, bf16 safetensors, seeded: the same seed gives
  the same bytes. Its weights are scaled so that greedy decoding usually has a clear winner (a
  random model with the usual 0.02 init gives near-uniform logits, where PD-vs-colocated output
  comparison would only measure rounding noise).
- `write_shaped_model(dir)`: config + tokenizer only, with the architecture of Llama-3-8B. vLLM
  fills the weights itself with `load_format: dummy` (seeded uniform values) — compute and memory
  traffic depend on shapes, not on weight values, and no 16 GB checkpoint has to be written.

torch/transformers/tokenizers are imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BOS, EOS, IM_START, IM_END = "<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (BOS, EOS, IM_START, IM_END)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Words of the synthetic training corpus (and of chat prompts): the tokenizer learns merges for them.
CORPUS_WORDS = [
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his",
    "her", "it", "an", "were", "are", "which", "this", "be", "time", "year", "people", "way", "day", "man", "thing",
    "woman", "life", "child", "world", "school", "state", "family", "student", "group", "country", "problem",
    "hand", "part", "place", "case", "week", "company", "system", "program", "question", "work", "number", "night",
    "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right", "study",
    "book", "eye", "job", "word", "prefill", "decode", "cache", "token", "layer", "engine", "transfer", "memory",
    "model", "serve", "request", "stream", "batch"
]
# Trained tokens are few; the rest of the vocabulary is filled with tokens the encoder never emits
# but the decoder can print (plain ASCII, which byte-level BPE maps to itself), so a model whose
# vocabulary is larger than the trained one (Llama-3's 128256) still decodes every id it samples.
FILLER_PREFIX = "vocabfill"


@dataclass(frozen=True)
class LlamaShape:
    """The architecture fields of a Llama-family decoder (transformers LlamaConfig names)."""

    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rope_theta: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def parameter_count(self) -> int:
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        per_layer = h * h * 2 + h * kv * 2 + 3 * h * self.intermediate_size + 2 * h
        return self.num_hidden_layers * per_layer + 2 * self.vocab_size * h + h


TINY_LLAMA = LlamaShape(
    name="tiny-random-llama", vocab_size=2048, hidden_size=256, intermediate_size=512,
    num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=8192, rope_theta=10000.0,
)
# Meta-Llama-3-8B's config.json (hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336,
# vocab 128256, 8192 positions, rope theta 500000): about 8.0 B parameters, 16 GB in bf16.
LLAMA3_8B = LlamaShape(
    name="random-llama-3-8b-shape", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
    max_position_embeddings=8192, rope_theta=500000.0,
)


@dataclass(frozen=True)
class ModelCard:
    """What a generated model directory holds; written next to it as lab_model.json."""

    path: str
    shape: LlamaShape
    seed: int
    weights: str  # "safetensors" (real random weights on disk) or "dummy" (vLLM fills them)
    parameters: int
    trained_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shape"] = asdict(self.shape)
        return data


def synthetic_corpus(seed: int, lines: int = 4000) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(CORPUS_WORDS) for _ in range(rng.randint(4, 24))) for _ in range(lines)]


def filler_tokens(vocab: dict[str, int], target_size: int) -> list[str]:
    """Names for ids len(vocab)..target_size-1 that clash with nothing already in `vocab`."""
    if target_size < len(vocab):
        raise ValueError(f"vocabulary of {len(vocab)} trained tokens exceeds the model's {target_size}")
    names: list[str] = []
    index = 0
    while len(vocab) + len(names) < target_size:
        name = f"{FILLER_PREFIX}{index}"
        index += 1
        if name not in vocab:
            names.append(name)
    return names


def build_tokenizer(vocab_size: int, seed: int):
    """A byte-level BPE `tokenizers.Tokenizer` with exactly `vocab_size` ids; returns (tokenizer, trained)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    trained_size = min(vocab_size, 1024)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=trained_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    data = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    trained = len(vocab)
    for name in filler_tokens(vocab, vocab_size):
        vocab[name] = len(vocab)
    return Tokenizer.from_str(json.dumps(data)), trained


def write_tokenizer(directory: Path, vocab_size: int, seed: int, max_length: int) -> int:
    """tokenizer.json + tokenizer_config.json (with the chat template); returns the trained token count."""
    from transformers import PreTrainedTokenizerFast

    tokenizer, trained = build_tokenizer(vocab_size, seed)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=IM_END, pad_token=EOS,
        additional_special_tokens=[IM_START], model_max_length=max_length,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    return trained


def llama_config(shape: LlamaShape, tokenizer_dir: Path):
    from transformers import LlamaConfig

    token_ids = json.loads((tokenizer_dir / "tokenizer.json").read_text())["model"]["vocab"]
    return LlamaConfig(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size, num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads, num_key_value_heads=shape.num_key_value_heads,
        max_position_embeddings=shape.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": shape.rope_theta},
        bos_token_id=token_ids[BOS], eos_token_id=token_ids[IM_END], pad_token_id=token_ids[EOS],
        tie_word_embeddings=False, dtype="bfloat16", architectures=["LlamaForCausalLM"],
    )


def _sharpen(model, seed: int, logit_scale: float) -> None:
    """Re-draw weights from a seeded generator so logits are peaked (greedy has clear winners)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if param.dim() == 1:  # RMSNorm weights
                param.fill_(1.0)
                continue
            fan_in = param.shape[1]
            std = 1.0 if "embed_tokens" in name else fan_in ** -0.5
            if name == "lm_head.weight":
                std *= logit_scale
            param.copy_(torch.randn(param.shape, generator=generator) * std)


def write_tiny_model(directory: Path, *, seed: int = 0, shape: LlamaShape = TINY_LLAMA,
                     logit_scale: float = 16.0) -> ModelCard:
    """Write a seeded random-weight Llama (bf16 safetensors) + tokenizer to `directory`."""
    import torch
    from transformers import LlamaForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    trained = write_tokenizer(directory, shape.vocab_size, seed, shape.max_position_embeddings)
    config = llama_config(shape, directory)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    _sharpen(model, seed, logit_scale)
    model.to(torch.bfloat16).save_pretrained(str(directory), safe_serialization=True)
    card = ModelCard(path=str(directory), shape=shape, seed=seed, weights="safetensors",
                     parameters=sum(p.numel() for p in model.parameters()), trained_tokens=trained,
                     extra={"logit_scale": logit_scale})
    (directory / "lab_model.json").write_text(json.dumps(card.as_dict(), indent=2))
    return card


def write_shaped_model(directory: Path, *, seed: int = 0, shape: LlamaShape = LLAMA3_8B) -> ModelCard:
    """Write config + tokenizer of `shape`; the weights come from vLLM's `load_format: dummy`."""
    directory.mkdir(parents=True, exist_ok=True)
    trained = write_tokenizer(directory, shape.vocab_size, seed, shape.max_position_embeddings)
    llama_config(shape, directory).save_pretrained(str(directory))
    card = ModelCard(path=str(directory), shape=shape, seed=seed, weights="dummy",
                     parameters=shape.parameter_count(), trained_tokens=trained)
    (directory / "lab_model.json").write_text(json.dumps(card.as_dict(), indent=2))
    return card


# ── Qwen3.5-9B: the stack's default model, its architecture with dummy weights ──────────────────
#
# Architecture: transformers 5.24's `Qwen3_5Config` defaults, documented there as the "Qwen3.5-9B style
# configuration", with the fields where the published checkpoint's config.json differs from those
# defaults (facts/models.py cites them): 262,144 positions, the vision merger projecting to the text
# hidden size (4096), the recurrent state kept in float32, and the rotary settings
# (QWEN35_ROPE_PARAMETERS: interleaved M-RoPE; vLLM then keeps a larger position table, which the
# KV cache pays for, docs/PROVEN.md#published-rotary). The tokenizer is byte-level BPE trained here
# (no hub), padded to the model's 248,320 ids, with Qwen's special tokens at the ids the config points
# at (image 248056, video 248057, vision start/end 248053/248054: Qwen3's special-token order shifted to
# 248044 for <|endoftext|>), so vLLM's multimodal processor and the chat path read real token ids.
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)
QWEN_FIRST_SPECIAL_ID = 248_044
QWEN35_VOCAB = 248_320
QWEN35_MAX_POSITIONS = 262_144
# text_config.rope_parameters of the published Qwen3.5 checkpoints, as public copies of their config.json
# show them (docs/SOURCES.md#qwen35-rotary); transformers' defaults have theta 10,000 and no M-RoPE.
QWEN35_ROPE_PARAMETERS: dict[str, Any] = {
    "rope_type": "default", "rope_theta": 10_000_000, "partial_rotary_factor": 0.25,
    "mrope_interleaved": True, "mrope_section": [11, 11, 10]}
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'video' %}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


# The processor files a Qwen3-VL-family checkpoint ships (16-px patches merged 2×2, mean/std 0.5, pixel
# budgets), written as data so no image or video processor class has to be built here.
_QWEN_VISION = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3,
                "image_std": [0.5] * 3, "processor_class": "Qwen3VLProcessor"}
QWEN_PROCESSOR_FILES: dict[str, dict[str, Any]] = {
    "preprocessor_config.json": {**_QWEN_VISION, "image_processor_type": "Qwen2VLImageProcessorFast",
                                 "size": {"longest_edge": 16_777_216, "shortest_edge": 65_536}},
    "video_preprocessor_config.json": {**_QWEN_VISION, "video_processor_type": "Qwen3VLVideoProcessor",
                                       "size": {"longest_edge": 25_165_824, "shortest_edge": 4_096}},
    "processor_config.json": {"processor_class": "Qwen3VLProcessor"},
}


def qwen_special_ids() -> dict[str, int]:
    return {token: QWEN_FIRST_SPECIAL_ID + i for i, token in enumerate(QWEN_SPECIAL_TOKENS)}


def build_qwen_tokenizer(seed: int):
    """Byte-level BPE with QWEN35_VOCAB ids, Qwen's special tokens at their ids; returns (tokenizer, trained)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    data = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    trained = len(vocab)
    specials = qwen_special_ids()
    for token_id, name in enumerate(filler_tokens(vocab, QWEN35_VOCAB), start=trained):
        vocab[name] = token_id
    by_id = {token_id: name for name, token_id in vocab.items()}
    for token, token_id in specials.items():
        del vocab[by_id[token_id]]
        vocab[token] = token_id
    data["added_tokens"] = [
        {"id": token_id, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for token, token_id in specials.items()]
    return Tokenizer.from_str(json.dumps(data)), trained


def qwen35_config_dict(tokens: dict[str, int]) -> dict[str, Any]:
    from transformers import Qwen3_5Config

    config = Qwen3_5Config().to_dict()
    text, vision = config["text_config"], config["vision_config"]
    text.update(max_position_embeddings=QWEN35_MAX_POSITIONS, mamba_ssm_dtype="float32", dtype="bfloat16",
                rope_parameters=dict(QWEN35_ROPE_PARAMETERS),
                bos_token_id=None, eos_token_id=tokens["<|im_end|>"], pad_token_id=tokens["<|endoftext|>"])
    vision["out_hidden_size"] = text["hidden_size"]
    config.update(architectures=["Qwen3_5ForConditionalGeneration"], dtype="bfloat16",
                  eos_token_id=tokens["<|im_end|>"], pad_token_id=tokens["<|endoftext|>"])
    for key in ("id2label", "label2id"):
        for part in (config, text, vision):
            part.pop(key, None)
    return config


def write_qwen35_model(directory: Path, *, seed: int = 0) -> dict[str, Any]:
    """config.json, tokenizer and processor files of Qwen3.5-9B's architecture; weights from vLLM's
    `load_format: dummy`. Returns the model card (also written as lab_model.json)."""
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer_object, trained = build_qwen_tokenizer(seed)
    tokens = qwen_special_ids()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer_object, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=[t for t in QWEN_SPECIAL_TOKENS if t not in ("<|im_end|>", "<|endoftext|>")],
        model_max_length=QWEN35_MAX_POSITIONS)
    tokenizer.chat_template = QWEN_CHAT_TEMPLATE
    tokenizer.save_pretrained(str(directory))
    for name, data in QWEN_PROCESSOR_FILES.items():
        (directory / name).write_text(json.dumps(data, indent=2))
    config = qwen35_config_dict(tokens)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    card = {"path": str(directory), "shape": {"name": "qwen3.5-9b-architecture", "vocab_size": QWEN35_VOCAB,
                                              "source": "transformers 5.24 Qwen3_5Config defaults + the published "
                                                        "config's positions, state dtype and rotary settings"},
            "seed": seed, "weights": "dummy", "trained_tokens": trained, "special_token_ids": tokens}
    (directory / "lab_model.json").write_text(json.dumps(card, indent=2))
    return card
