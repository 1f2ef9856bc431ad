"""Capacity numbers of the reference deployment, checked against arithmetic written out by hand."""

from __future__ import annotations

import json

import pytest

from facts.instances import RECORDED_EC2_ANSWERS, InstanceType, instance_type
from facts.models import KNOWN_MODELS, known_model, load_architecture
from serve_app.capacity import capacity_report
from serve_app.checks import DeploymentTarget, check_app
from serve_app.config import EngineSettings, PDAppConfig


def recorded(name: str) -> InstanceType:
    """A type as the offline cloud's recorded EC2 answer describes it."""
    return instance_type(RECORDED_EC2_ANSWERS[name])

MIB = 1024 * 1024
G6_8X = recorded("g6.8xlarge")
QWEN35_9B = KNOWN_MODELS["Qwen/Qwen3.5-9B"]


@pytest.fixture(scope="module")
def reference():
    """The reference deployment's decode replica: Qwen3.5-9B bf16 on one L4 of a g6.8xlarge, eager."""
    app = PDAppConfig(engine=EngineSettings(enforce_eager=True))
    return check_app(app, DeploymentTarget(G6_8X, gpu_node_count=2, efa=True)).capacity["decode"]


def test_the_stacks_default_reserves_room_for_cuda_graphs():
    # The stack's default captures CUDA graphs: reserve 1,024 + 512 MiB = 1,610,612,736 B, so the KV
    # budget is 21,599,826,739 − 19,306,216,416 − 1,610,612,736 = 682,997,587 B (651.4 MiB):
    # 682,997,587 // 32,768 = 20,843 tokens, 682,997,587 // 185,729,024 = 3 sequences of 4,096 tokens.
    graphs = check_app(PDAppConfig(), DeploymentTarget(G6_8X, gpu_node_count=2, efa=True)).capacity["decode"]
    assert graphs.reserve_bytes_per_gpu == 1_610_612_736
    assert graphs.kv_budget_bytes == 682_997_587
    assert (graphs.kv_tokens, graphs.max_concurrent_sequences) == (20_843, 3)


def test_reference_memory_budget(reference):
    # L4 on g6.8xlarge: 22,888 MiB usable = 22,888 × 1,048,576 = 23,999,807,488 B
    assert reference.gpu_memory_bytes == 23_999_807_488
    # × gpu_memory_utilization 0.90 = 21,599,826,739.2 → 21,599,826,739 B (20,599.2 MiB)
    assert reference.usable_bytes == 21_599_826_739
    # Weights: safetensors total_size of Qwen/Qwen3.5-9B, bf16 = 19,306,216,416 B (17.98 GiB)
    assert reference.weight_bytes == reference.weight_bytes_per_gpu == 19_306_216_416
    # Reserve, enforce_eager (no CUDA graphs): 1,024 MiB = 1,073,741,824 B
    assert reference.reserve_bytes_per_gpu == 1_073_741_824
    # KV budget = 21,599,826,739 − 19,306,216,416 − 1,073,741,824 = 1,219,868,499 B (1,163.4 MiB)
    assert reference.kv_budget_bytes == 1_219_868_499
    assert reference.weights_fit


def test_reference_kv_per_token_counts_full_attention_layers_only(reference):
    # 8 of 32 layers are full attention (full_attention_interval 4).
    # 2 (K,V) × 4 KV heads × 256 head dim × 2 B (bf16) × 8 layers = 32,768 B per token
    assert reference.kv_bytes_per_token == 2 * 4 * 256 * 2 * 8 == 32_768
    # A dense 32-layer model of the same attention shape would need 4× that: the hybrid saves it.


def test_reference_linear_attention_state_per_sequence(reference):
    # Per Gated-DeltaNet layer:
    #   conv window: (kernel 4 − 1) × conv_dim (2 × 16 key heads × 128 + 32 value heads × 128 = 8,192)
    #                = 24,576 values × 2 B (bf16)                 =    49,152 B
    #   recurrent:   32 value heads × 128 × 128 = 524,288 values × 4 B (float32) = 2,097,152 B
    #   per layer                                                 = 2,146,304 B
    # × 24 linear-attention layers                                = 51,511,296 B (49.1 MiB)
    assert reference.state_bytes_per_sequence == 24 * (3 * 8_192 * 2 + 32 * 128 * 128 * 4) == 51_511_296


def test_reference_tokens_and_sequences_that_fit(reference):
    # KV tokens: 1,219,868,499 // 32,768 = 37,227
    assert reference.kv_tokens == 1_219_868_499 // 32_768 == 37_227
    # One 4,096-token sequence: 4,096 × 32,768 + 51,511,296 = 134,217,728 + 51,511,296 = 185,729,024 B
    # Sequences: 1,219,868,499 // 185,729,024 = 6 (6.57)
    assert reference.max_concurrent_sequences == 1_219_868_499 // 185_729_024 == 6


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
    for fragment in ("Qwen/Qwen3.5-9B", "hybrid", "20,599.2 MiB usable", "17.98 GiB", "1,163.4 MiB",
                     "32,768 B", "49.12 MiB", "37,227", "sequences: 6", "177.1 MiB", "59 ms", "619 ms",
                     "log line wins"):
        assert fragment in text
    data = reference.to_dict()
    assert data["kv_tokens"] == 37_227 and data["weights_fit"] is True
    json.dumps(data)  # plain data, ready for `pdctl` output


def test_dense_llama_for_comparison():
    report = capacity_report(KNOWN_MODELS["meta-llama/Llama-3.1-8B-Instruct"], G6_8X, dtype="bfloat16",
                             max_model_len=4096, gpu_memory_utilization=0.90, enforce_eager=True)
    # Weights 16,060,522,496 B; budget 21,599,826,739 − 16,060,522,496 − 1,073,741,824 = 4,465,562,419 B
    assert report.kv_budget_bytes == 4_465_562_419
    # 2 × 8 KV heads × 128 × 2 B × 32 layers = 131,072 B per token (4× Qwen3.5-9B's)
    assert report.kv_bytes_per_token == 131_072
    # 4,465,562,419 // 131,072 = 34,069 tokens; // (4,096 × 131,072 = 536,870,912) = 8 sequences
    assert (report.kv_tokens, report.max_concurrent_sequences) == (34_069, 8)
    assert report.state_bytes_per_sequence == 0 and not report.hybrid


def test_cuda_graphs_take_their_reserve():
    eager = capacity_report(QWEN35_9B, G6_8X, dtype="auto", max_model_len=4096,
                            gpu_memory_utilization=0.90, enforce_eager=True)
    graphs = capacity_report(QWEN35_9B, G6_8X, dtype="auto", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=False)
    assert eager.kv_budget_bytes - graphs.kv_budget_bytes == 512 * MIB
    assert graphs.dtype == "bfloat16"  # "auto" = the checkpoint dtype


def test_fp8_kv_cache_halves_bytes_per_token():
    report = capacity_report(QWEN35_9B, G6_8X, dtype="bfloat16", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True, kv_cache_dtype="fp8")
    assert report.kv_bytes_per_token == 16_384


def test_tensor_parallel_splits_weights_across_gpus():
    report = capacity_report(QWEN35_9B, recorded("g6.12xlarge"), dtype="bfloat16", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True, tensor_parallel_size=2)
    # Per GPU: 19,306,216,416 / 2 = 9,653,108,208 B; budget 2 × (21,599,826,739 − 9,653,108,208 − 1,073,741,824)
    assert report.weight_bytes_per_gpu == 9_653_108_208
    assert report.kv_budget_bytes == 2 * (21_599_826_739 - 9_653_108_208 - 1_073_741_824) == 21_745_953_414


def test_weights_too_large_leave_a_negative_budget_and_zero_sequences():
    report = capacity_report(QWEN35_9B, G6_8X, dtype="float32", max_model_len=4096,
                             gpu_memory_utilization=0.90, enforce_eager=True)
    # float32: 9,653,108,208 params × 4 B = 38,612,432,832 B > 21,599,826,739 B usable
    assert report.weight_bytes == 38_612_432_832
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
    numbers = ("weight_bytes", "kv_bytes_per_token", "state_bytes_per_sequence", "kv_tokens",
               "max_concurrent_sequences", "transfer_bytes_per_max_prompt")
    assert {n: getattr(from_file, n) for n in numbers} == {n: getattr(from_facts, n) for n in numbers}


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
