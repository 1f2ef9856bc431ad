"""Capacity numbers of the reference deployment, checked against arithmetic written out by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from components.config.nodes import gpu_node_group_settings
from components.config.ray_service import RUNTIME_SETTINGS
from facts.instances import RECORDED_EC2_ANSWERS, InstanceType, instance_type
from facts.models import KNOWN_MODELS, known_model, load_architecture
from serve_app.capacity import capacity_report
from serve_app.checks import check_app
from serve_app.config import EngineSettings, PDAppConfig
from serve_app.errors import ConfigError
from serve_app.targets import DeploymentTarget

# The settings a refusal names: gpuNodeType's group, rayVersion and httpFront.
TARGET_SETTINGS = {"gpu_node_settings": gpu_node_group_settings(None), "runtime_settings": RUNTIME_SETTINGS}


def recorded(name: str) -> InstanceType:
    """A type as the offline cloud's recorded EC2 answer describes it."""
    return instance_type(RECORDED_EC2_ANSWERS[name])

MIB = 1024 * 1024
G6_8X = recorded("g6.8xlarge")
QWEN35_9B = KNOWN_MODELS["Qwen/Qwen3.5-9B"]


VLLM_LINES = json.loads((Path(__file__).parents[1] / "data" / "qwen35-l4-budget-vllm-0.26.0.json").read_text())
GIB = 1024 ** 3


@pytest.fixture(scope="module")
def reference():
    """The stack's decode replica: Qwen3.5-9B bf16, text only, CUDA graphs, on one L4 of a g6.8xlarge."""
    return check_app(PDAppConfig(), DeploymentTarget(G6_8X, gpu_node_count=2, efa=True,
                                                     **TARGET_SETTINGS)).capacity["decode"]


# The 2026-12-02 lines were vLLM's for transformers' default rotary settings (no M-RoPE: a 32 MiB position
# table where the published config's takes 128 MiB).
AS_MEASURED_THEN = replace(QWEN35_9B, mrope=False)


def _report(enforce_eager: bool, vision_inputs: bool, **engine):
    return capacity_report(AS_MEASURED_THEN, G6_8X, dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.90,
                           enforce_eager=enforce_eager, vision_inputs=vision_inputs,
                           max_num_seqs=engine.get("max_num_seqs", 32), max_num_batched_tokens=2048)


@pytest.mark.parametrize("point", VLLM_LINES["points"], ids=lambda p: p["name"])
def test_the_estimate_meets_vllms_own_log_lines_within_ten_percent(point):
    report = _report(point["enforce_eager"], point["vision_inputs"])
    blocks = report.num_blocks if point["first_start"] else report.num_blocks_restart
    budget = report.kv_budget_bytes if point["first_start"] else report.kv_budget_bytes_restart
    tokens = report.kv_tokens if point["first_start"] else report.kv_tokens_restart
    assert report.weight_bytes / GIB == pytest.approx(point["weights_gib"], rel=0.10)
    assert budget / GIB == pytest.approx(point["kv_cache_gib"], rel=0.10)
    assert blocks == pytest.approx(point["num_blocks"], rel=0.10)
    assert tokens == pytest.approx(point["kv_tokens"], rel=0.10)
    assert blocks / report.blocks_per_sequence == pytest.approx(point["max_concurrency"], rel=0.10)


def test_a_hybrid_model_is_paged_as_vllm_pages_it(reference):
    # vLLM 0.26: one attention page must hold one Gated-DeltaNet layer's state, 2,146,304 B
    # (conv 3 × 8,192 × 2 B + recurrent 32 × 128 × 128 × 4 B); attention takes 2 × 4 × 256 × 2 = 4,096 B
    # per token and layer, so the block is 16 × ceil(2,146,304 / (16 × 4,096)) = 16 × 33 = 528 tokens
    # ("Setting attention block size to 528 tokens"), a page 528 × 4,096 = 2,162,688 B.
    assert reference.block_size == 528
    # Groups of 8 layers (8 attention, 24 linear: 1 + 3 groups) share one pool: a block is 8 pages.
    # A 4,096-token sequence takes ceil(4,096 / 528) = 8 attention blocks + 1 per state group = 11.
    assert reference.blocks_per_sequence == 11
    # First start: budget 21,599,826,739 − 17,907,606,528 (text-only weights) − 134,217,728 (the M-RoPE
    # position table: 262,144 × 4 positions × 64 rotated dims × 2 B) − reserve; blocks = budget // (2,162,688
    # × 8); vLLM's "GPU KV cache size" = blocks / 11 × 4,096 = 62 / 11 × 4,096 (vLLM held 62).
    assert (reference.num_blocks, reference.kv_tokens) == (62, 23_086)
    assert reference.position_table_bytes == 262_144 * 4 * 64 * 2
    assert reference.weight_bytes == 17_907_606_528


def test_the_stacks_default_starts_on_an_l4_with_room_to_spare():
    checked = check_app(PDAppConfig(), DeploymentTarget(G6_8X, gpu_node_count=2, efa=True,
                                                        **TARGET_SETTINGS))
    for report in checked.capacity.values():
        assert report.num_blocks >= PDAppConfig().engine.max_num_seqs  # CUDA graphs can capture
        assert report.max_concurrent_sequences >= 5  # 62 blocks of 11 a 4,096-token sequence (vLLM: 5.64×)
    assert checked.warnings == ()


def test_vllms_old_default_of_256_sequences_is_refused_naming_maxnumseqs():
    app = PDAppConfig(engine=EngineSettings(max_num_seqs=256))
    with pytest.raises(ConfigError) as refused:
        check_app(app, DeploymentTarget(G6_8X, gpu_node_count=2, efa=True, **TARGET_SETTINGS))
    assert refused.value.setting == "maxNumSeqs"
    assert "Mamba cache blocks" in str(refused.value) and "enforceEager true" in str(refused.value)


def test_the_vision_encoder_with_cuda_graphs_is_refused_as_vllm_refused_it():
    # Measured with the default rotary settings: 17 blocks < 32 sequences, vLLM refused CUDA graph capture;
    # the published M-RoPE table takes about 6 blocks more, and the estimate gives 10.
    app = PDAppConfig(engine=EngineSettings(vision_inputs=True))
    with pytest.raises(ConfigError) as refused:
        check_app(app, DeploymentTarget(G6_8X, gpu_node_count=2, efa=True, **TARGET_SETTINGS))
    assert refused.value.setting == "maxNumSeqs" and "at most 10" in str(refused.value)
    # The user who just turned the encoder on reads that turning it off is a way out too...
    assert "or visionInputs false" in refused.value.allowed
    # ...but only where it is one: without the encoder a restart holds 167 blocks, not 200.
    app = PDAppConfig(engine=EngineSettings(vision_inputs=True, max_num_seqs=200))
    with pytest.raises(ConfigError) as refused:
        check_app(app, DeploymentTarget(G6_8X, gpu_node_count=2, efa=True, **TARGET_SETTINGS))
    assert refused.value.setting == "maxNumSeqs" and "visionInputs" not in refused.value.allowed


def test_the_vision_encoder_eager_starts_but_warns_about_a_new_nodes_first_start():
    app = PDAppConfig(engine=EngineSettings(vision_inputs=True, enforce_eager=True))
    checked = check_app(app, DeploymentTarget(G6_8X, gpu_node_count=2, efa=True, **TARGET_SETTINGS))
    assert checked.capacity["decode"].num_blocks_restart == 18  # 25 measured with the default rotary table
    assert any("first start on a new node" in warning for warning in checked.warnings)


def test_reference_kv_per_token_counts_full_attention_layers_only(reference):
    # 8 of 32 layers are full attention (full_attention_interval 4).
    # 2 (K,V) × 4 KV heads × 256 head dim × 2 B (bf16) × 8 layers = 32,768 B per token
    assert reference.kv_bytes_per_token == 2 * 4 * 256 * 2 * 8 == 32_768


def test_reference_linear_attention_state_per_sequence(reference):
    # Per Gated-DeltaNet layer:
    #   conv window: (kernel 4 − 1) × conv_dim (2 × 16 key heads × 128 + 32 value heads × 128 = 8,192)
    #                = 24,576 values × 2 B (bf16)                 =    49,152 B
    #   recurrent:   32 value heads × 128 × 128 = 524,288 values × 4 B (float32) = 2,097,152 B
    #   per layer                                                 = 2,146,304 B
    # × 24 linear-attention layers                                = 51,511,296 B (49.1 MiB)
    assert reference.state_bytes_per_sequence == 24 * (3 * 8_192 * 2 + 32 * 128 * 128 * 4) == 51_511_296


def test_reference_transfer_prefill_to_decode(reference):
    # One max-length prompt moves its KV blocks and its linear-attention state: 185,729,024 B (177.1 MiB).
    assert reference.transfer_bytes_per_max_prompt == 185_729_024
    # g6.8xlarge: 25 Gbps = 3.125e9 B/s → 185,729,024 / 3.125e9 = 0.0594 s
    assert reference.network_bytes_per_second == 3.125e9
    assert reference.transfer_seconds == pytest.approx(0.05943, abs=1e-5)
    # UCX over EFA at ~0.3 GB/s → 185,729,024 / 0.3e9 = 0.619 s: ten times slower, per request.
    assert reference.transfer_seconds_ucx_on_efa == pytest.approx(0.61910, abs=1e-5)


def test_report_prints_the_numbers_a_user_needs(reference):
    text = reference.render_text()
    for fragment in ("Qwen/Qwen3.5-9B", "hybrid", "20,599.2 MiB usable", "16.68 GiB", "text only", "measured",
                     "rotary position table: 128 MiB", "32,768 B", "49.12 MiB", "23,086", "528-token attention blocks",
                     "first start on a new node", "Restart", "62,184", "177.1 MiB", "59 ms", "619 ms", "log line wins"):
        assert fragment in text
    data = reference.to_dict()
    assert data["kv_tokens"] == 23_086 and data["weights_fit"] is True
    assert data["max_concurrency"] == pytest.approx(5.64, abs=0.01)  # vLLM: 5.64×
    json.dumps(data)  # plain data, ready for `pdctl` output


def test_dense_llama_for_comparison():
    report = capacity_report(KNOWN_MODELS["meta-llama/Llama-3.1-8B-Instruct"], G6_8X, dtype="bfloat16",
                             max_model_len=4096, gpu_memory_utilization=0.90, enforce_eager=True)
    # Weights 16,060,522,496 B; position table 131,072 × 128 × 2 = 33,554,432 B; budget 21,599,826,739 −
    # 16,060,522,496 − 33,554,432 − 1,073,741,824 = 4,432,007,987 B
    assert report.kv_budget_bytes == 4_432_007_987
    # 2 × 8 KV heads × 128 × 2 B × 32 layers = 131,072 B per token (4× Qwen3.5-9B's)
    assert report.kv_bytes_per_token == 131_072
    # 4,432,007,987 // 131,072 = 33,813 tokens; // (4,096 × 131,072 = 536,870,912) = 8 sequences
    assert (report.kv_tokens, report.max_concurrent_sequences) == (33_813, 8)
    assert report.state_bytes_per_sequence == 0 and not report.hybrid


def test_cuda_graphs_take_their_reserve():
    eager = capacity_report(QWEN35_9B, G6_8X, dtype="auto", max_model_len=4096,
                            gpu_memory_utilization=0.90, enforce_eager=True)
    graphs = capacity_report(QWEN35_9B, G6_8X, dtype="auto", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=False)
    # Measured for this model: capturing CUDA graphs costs 0.13 GiB of KV cache (2.93 → 2.80 GiB).
    assert eager.kv_budget_bytes - graphs.kv_budget_bytes == round(0.13 * 1024 ** 3)
    assert graphs.dtype == "bfloat16"  # "auto" = the checkpoint dtype


def test_fp8_kv_cache_halves_bytes_per_token():
    report = capacity_report(QWEN35_9B, G6_8X, dtype="bfloat16", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True, kv_cache_dtype="fp8")
    assert report.kv_bytes_per_token == 16_384


def test_tensor_parallel_splits_weights_across_gpus():
    report = capacity_report(QWEN35_9B, recorded("g6.12xlarge"), dtype="bfloat16", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True, tensor_parallel_size=2)
    # Text only, per GPU: 17,907,606,528 / 2 = 8,953,803,264 B; the reserve measured on one GPU does not
    # apply: the estimate's 1,024 MiB. Each GPU keeps its own 128 MiB position table.
    # Budget 2 × (21,599,826,739 − 8,953,803,264 − 134,217,728 − 1,073,741,824)
    assert report.weight_bytes_per_gpu == 8_953_803_264
    assert report.kv_budget_bytes == 2 * (21_599_826_739 - 8_953_803_264 - 134_217_728 - 1_073_741_824) \
        == 22_876_127_846
    assert report.reserve_source == "estimate" and report.num_blocks is None


def test_weights_too_large_leave_a_negative_budget_and_zero_sequences():
    report = capacity_report(QWEN35_9B, G6_8X, dtype="float32", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True)
    # float32, text only: 8,953,803,264 params × 4 B = 35,815,213,056 B > 21,599,826,739 B usable
    assert report.weight_bytes == 35_815_213_056
    assert not report.weights_fit
    assert (report.kv_tokens, report.max_concurrent_sequences) == (0, 0)
    assert "WEIGHTS DO NOT FIT" in report.render_text()


def test_local_config_json_gives_the_same_architecture(tmp_path):
    layer_types = (["linear_attention"] * 3 + ["full_attention"]) * 8
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "text_config": {
            "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 16, "num_key_value_heads": 4,
            "head_dim": 256, "vocab_size": 248_320, "layer_types": layer_types, "dtype": "bfloat16",
            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "mamba_ssm_dtype": "float32",
            "max_position_embeddings": 262_144,
        },
    }))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 19_306_216_416}}))
    local = load_architecture(tmp_path, hf_id="Qwen/Qwen3.5-9B")
    from_file = capacity_report(local, G6_8X, dtype="bfloat16", max_model_len=4096,
                                gpu_memory_utilization=0.90, enforce_eager=True)
    from_facts = capacity_report(QWEN35_9B, G6_8X, dtype="bfloat16", max_model_len=4096,
                                 gpu_memory_utilization=0.90, enforce_eager=True)
    numbers = ("kv_bytes_per_token", "state_bytes_per_sequence", "block_size", "blocks_per_sequence",
               "transfer_bytes_per_max_prompt")
    assert {n: getattr(from_file, n) for n in numbers} == {n: getattr(from_facts, n) for n in numbers}
    # A config.json does not say which weights are the vision encoder's: all of the checkpoint counts.
    assert from_file.weight_bytes == 19_306_216_416 > from_facts.weight_bytes


def test_local_dense_config_without_index_estimates_parameters(tmp_path):
    # Llama-3.1-8B's config.json shape; the estimate must land on its published 8,030,261,248 parameters.
    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14_336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 128_256, "torch_dtype": "bfloat16",
        "tie_word_embeddings": False, "max_position_embeddings": 131_072,
    }))
    assert load_architecture(tmp_path / "config.json").parameter_count == 8_030_261_248


def test_local_hybrid_config_without_index_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
        "layer_types": ["linear_attention", "full_attention"] * 2, "linear_num_key_heads": 2,
        "linear_num_value_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
    }))
    with pytest.raises(ValueError, match=r"model\.safetensors\.index\.json"):
        load_architecture(tmp_path)


def test_known_models_are_found_case_insensitively():
    assert known_model("qwen/qwen3.5-9b") is QWEN35_9B
    assert known_model("nobody/nothing") is None
