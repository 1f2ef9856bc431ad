"""Model facts from the model itself: config.json and the safetensors index read through huggingface_hub
from a cache each test builds (HF_HOME in tmp_path, HF_HUB_OFFLINE=1), or from a local directory.
Never the network."""

from __future__ import annotations

import json

import pytest

from facts.models import known_model
from serve_app.errors import ConfigError
from serve_app.model_facts import read_model_facts

# meta-llama/Llama-3.1-70B-Instruct's config.json (the fields read) and its index's total_size.
LLAMA_70B = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "intermediate_size": 28672,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
LLAMA_70B_BYTES = 141_107_412_992
# A small dense model that fits one L4.
SMALL = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24, "num_attention_heads": 16,
         "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 32000, "max_position_embeddings": 32768,
         "torch_dtype": "bfloat16"}
SMALL_BYTES = 4_000_000_000
# A mixture of experts: 128 experts whose weights only the index counts.
MOE = {**SMALL, "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768}
MOE_BYTES = 16_500_000_000


def test_a_model_that_does_not_fit_is_refused_naming_the_setting_and_the_numbers(hf_cache, settings_for):
    hf_cache("meta-llama/Llama-3.1-70B-Instruct", LLAMA_70B, LLAMA_70B_BYTES)
    with pytest.raises(ConfigError) as caught:
        settings_for(modelSource="meta-llama/Llama-3.1-70B-Instruct", modelId="llama-70b")
    error = caught.value
    assert error.setting == "modelSource" and error.value == "meta-llama/Llama-3.1-70B-Instruct"
    # 141,107,412,992 B = 134,570.5 MiB of weights per GPU against 20,599 MiB usable on one L4.
    assert "weights 134,571 MiB per GPU" in str(error) and "1 × 20,599 MiB" in str(error)


def test_a_model_that_fits_is_sized_from_its_own_index(hf_cache, settings_for):
    hf_cache("acme/small-3b", SMALL, SMALL_BYTES)
    serving = settings_for(modelSource="acme/small-3b", modelId="small").serving
    report = serving.app.capacity["decode"]
    assert report.weight_bytes == SMALL_BYTES and report.model_facts_source.startswith("acme/small-3b config.json and")
    # GQA: 2 × 4 KV heads × head_dim 128 × 2 B × 24 layers.
    assert report.kv_bytes_per_token == 2 * 4 * 128 * 2 * 24
    assert any("huggingface_hub" in note for note in serving.app.notes) and serving.app.warnings == ()


def test_mixture_of_experts_weights_are_the_index_total_every_expert_included(hf_cache):
    hf_cache("acme/moe-16b", MOE, MOE_BYTES)
    facts = read_model_facts("acme/moe-16b")
    assert facts.architecture.weight_bytes("auto") == MOE_BYTES


def test_mixture_of_experts_without_an_index_is_not_guessed(hf_cache, settings_for):
    hf_cache("acme/moe-no-index", MOE)
    facts = read_model_facts("acme/moe-no-index")
    assert facts.architecture is None and "128 experts" in facts.problem
    serving = settings_for(modelSource="acme/moe-no-index", modelId="moe").serving
    (warning,) = serving.app.warnings
    assert warning.startswith("modelSource 'acme/moe-no-index'") and "not checked" in warning
    assert serving.app.capacity == {}


def test_sliding_window_layers_keep_full_kv_and_linear_attention_layers_do_not(hf_cache):
    window = {**SMALL, "num_hidden_layers": 4, "sliding_window": 1024,
              "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}
    hf_cache("acme/windowed", window, SMALL_BYTES)
    assert read_model_facts("acme/windowed").architecture.full_attention_layers == 4


def test_attention_the_estimate_does_not_size_is_reported_not_guessed(hf_cache):
    hf_cache("acme/latent", {**SMALL, "kv_lora_rank": 512}, SMALL_BYTES)
    facts = read_model_facts("acme/latent")
    assert facts.architecture is None and "kv_lora_rank" in facts.problem


def test_a_model_nobody_can_read_is_a_warning_naming_model_source(hf_cache, settings_for):
    serving = settings_for(modelSource="acme/not-cached", modelId="x").serving
    (warning,) = serving.app.warnings
    assert "modelSource 'acme/not-cached'" in warning and "could not be read" in warning
    assert "HF_HUB_OFFLINE=1 and the model is not in the Hugging Face cache" in warning
    assert warning in serving.app.notes


def test_the_shipped_facts_are_the_fallback_and_say_so(hf_cache, settings_for):
    app = settings_for().serving.app  # Qwen/Qwen3.5-9B, not in this cache
    assert app.model is known_model("Qwen/Qwen3.5-9B") and app.warnings == ()
    assert any(note.startswith("model facts: shipped facts/models.py") for note in app.notes)


def test_the_models_own_files_win_over_the_shipped_facts(hf_cache):
    config = {"text_config": {**SMALL, "num_hidden_layers": 32}, "torch_dtype": "bfloat16"}
    hf_cache("Qwen/Qwen3.5-9B", config, 123_456_789)
    assert read_model_facts("Qwen/Qwen3.5-9B").architecture.checkpoint_bytes == 123_456_789


def test_a_local_directory_is_read_directly(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": SMALL_BYTES}}))
    facts = read_model_facts(str(tmp_path))
    assert facts.origin == f"local directory {tmp_path}" and facts.architecture.checkpoint_bytes == SMALL_BYTES


def test_a_path_that_is_not_here_is_reported():
    facts = read_model_facts("/models/inside-the-image")
    assert facts.architecture is None and "not a directory on this machine" in facts.problem


def test_fp8_weights_keep_the_embeddings_at_the_checkpoints_dtype_and_a_tied_lm_head_once():
    from facts.models import architecture_from_hf_config

    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "vocab_size": 1000,
              "intermediate_size": 128, "torch_dtype": "bfloat16"}
    untied = architecture_from_hf_config(config, hf_id="t/untied", source="test")
    tied = architecture_from_hf_config({**config, "tie_word_embeddings": True}, hf_id="t/tied", source="test")
    linear = 2 * (4 * 64 * 64 + 3 * 64 * 128)  # q, k, v, o and the MLP's three: one byte each in FP8
    for model, embeddings in ((untied, 2 * 1000 * 64), (tied, 1000 * 64)):
        assert model.fp8_weight_bytes("bfloat16", vision_inputs=False) == linear + 2 * (embeddings + 5 * 64)


@pytest.mark.parametrize(("rope", "table_mib"), [
    ({}, 8),  # 32,768 positions × 128 dims × 2 B
    ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25, "mrope_interleaved": True,
                          "mrope_section": [11, 11, 10]}}, 8),  # 4 × the positions, a quarter of the dims
    ({"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}, 32),  # Qwen2-VL's older spelling
])
def test_a_configs_rotary_settings_size_vllms_position_table(tmp_path, rope, table_mib):
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, **rope}))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": SMALL_BYTES}}))
    architecture = read_model_facts(str(tmp_path)).architecture
    assert architecture.position_table_bytes(2) == table_mib * 2**20
