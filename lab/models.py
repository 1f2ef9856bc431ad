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
