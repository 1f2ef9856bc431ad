"""The memory probe: the engines it starts from the stack's render, the budget it asks for, and the vLLM
lines it reads; the Qwen3.5-9B model directory it starts them from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.probe import (
    LOG_PATTERNS,
    budget_utilization,
    parse_log,
    planned_kv_cache_bytes,
    probe_specs,
    restore_caches,
)
from serve_app.capacity import FIXED_KV_CACHE_MARGIN_BYTES
from serve_app.errors import ConfigError

# vLLM 0.26.0's own lines from the as-rendered probe on an L4's budget (lab/results, 2026-12-02).
AS_RENDERED_LOG = """\
(EngineCore pid=1) INFO 12-02 09:12:40 [gpu_model_runner.py:5347] Model loading took 16.71 GiB memory and 1.2 seconds
(EngineCore pid=1) INFO 12-02 09:12:40 [interface.py:905] Setting attention block size to 528 tokens to ensure that attention page size is >= mamba page size.
(EngineCore pid=1) INFO 12-02 09:13:55 [monitor.py:81] Initial profiling/warmup run took 73.98 s
(EngineCore pid=1) INFO 12-02 09:14:12 [gpu_model_runner.py:6737] Estimated CUDA graph memory: 0.09 GiB total
(EngineCore pid=1) INFO 12-02 09:14:12 [gpu_worker.py:560] Available KV cache memory: 1.09 GiB
(EngineCore pid=1) INFO 12-02 09:14:12 [kv_cache_utils.py:2177] GPU KV cache size: 24,948 tokens
(EngineCore pid=1) INFO 12-02 09:14:12 [kv_cache_utils.py:2178] Maximum concurrency for 4,096 tokens per request: 6.09x
"""
REFUSED_LOG = ("(EngineCore pid=2) ERROR [core.py:1330] ValueError: max_num_seqs (32) exceeds available Mamba cache "
               "blocks (17). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.")


def test_the_budget_asks_this_card_for_the_deployment_gpus_bytes():
    # 0.90 × 22,888 MiB of an L4 = 21,599,826,739 B, asked of an H200's 150,109,880,320 B.
    share = budget_utilization(0.90, 22_888, 150_109_880_320)
    assert share == pytest.approx(0.1438934, rel=1e-6)
    assert int(share * 150_109_880_320) == 21_599_826_739


def test_vllms_lines_are_read_as_numbers_and_a_refusal_as_its_block_count():
    values = parse_log(AS_RENDERED_LOG)
    assert (values["weights_gib"], values["kv_cache_gib"], values["kv_tokens"]) == (16.71, 1.09, 24_948)
    assert (values["max_concurrency"], values["attention_block_size"]) == (6.09, 528)
    assert values["mamba_blocks_refused"] is None
    assert parse_log(REFUSED_LOG)["mamba_blocks_refused"] == 17
    assert set(parse_log("")) == set(LOG_PATTERNS) and not any(parse_log("").values())


def test_each_variant_changes_only_what_it_names_on_the_stacks_decode_engine(dev_args):
    specs = {s.name: s for s in probe_specs(dev_args, model_path="/m", utilization=0.1439)}
    assert list(specs) == ["as-rendered", "eager", "vision", "vision-eager", "as-rendered-warm"]
    rendered = specs["as-rendered"].engine_kwargs
    decode = dev_args["decode_config"]["engine_kwargs"]
    # The stack's engine as rendered, without its KV connector, on the budget and the L4's kernel.
    assert "kv_transfer_config" not in rendered
    assert {k: rendered[k] for k in ("max_num_seqs", "max_num_batched_tokens", "language_model_only",
                                     "compilation_config")} == {k: decode[k] for k in (
        "max_num_seqs", "max_num_batched_tokens", "language_model_only", "compilation_config")}
    assert (rendered["gpu_memory_utilization"], rendered["gdn_prefill_backend"], rendered["load_format"]) == (
        0.1439, "triton", "dummy")
    eager = specs["eager"].engine_kwargs
    assert eager["enforce_eager"] and "compilation_config" not in eager
    vision = specs["vision"].engine_kwargs
    assert "language_model_only" not in vision and vision["mm_processor_cache_gb"] == 0
    assert vision["compilation_config"] == rendered["compilation_config"]
    assert specs["as-rendered-warm"].engine_kwargs == rendered and specs["as-rendered"].changes == {}


def test_fp8_and_fixed_kv_variants_change_only_the_quantization_and_the_kv_bytes(dev_args):
    specs = {s.name: s for s in probe_specs(dev_args, model_path="/m", utilization=0.1439,
                                            variants=("as-rendered", "fp8", "fp8-warm", "kv-bytes"),
                                            kv_cache_bytes=2_849_190_707)}
    rendered = specs["as-rendered"].engine_kwargs
    assert specs["fp8"].engine_kwargs == {**rendered, "quantization": "fp8"} == specs["fp8-warm"].engine_kwargs
    assert specs["kv-bytes"].engine_kwargs == {**rendered, "kv_cache_memory_bytes": 2_849_190_707}
    assert specs["kv-bytes"].changes == {"kv_cache_memory_bytes": 2_849_190_707}


def test_a_variant_the_probe_cannot_build_is_refused_naming_the_flag(dev_args):
    with pytest.raises(ConfigError, match=r"^--variants: got 'fp16'"):
        probe_specs(dev_args, model_path="/m", utilization=0.1, variants=("fp16",))
    with pytest.raises(ConfigError, match=r"^--kv-cache-bytes"):
        probe_specs(dev_args, model_path="/m", utilization=0.1, variants=("kv-bytes",))


def test_the_fixed_kv_cache_is_the_plans_restart_less_vllms_margin():
    from lab.stack import stack_app

    plan = planned_kv_cache_bytes(stack_app("dev"))
    # The dev stack's decode engine on g6.8xlarge's L4: the plan's restart holds 167 blocks, a first start 62
    # (vLLM held 167 and 62 with the published rotary settings: docs/PROVEN.md#first-start).
    assert (plan["restart_blocks"], plan["first_start_blocks"]) == (167, 62)
    assert plan["kv_cache_bytes"] == plan["restart_kv_bytes"] - FIXED_KV_CACHE_MARGIN_BYTES == 2_831_994_061


def test_restored_caches_are_a_copy_and_the_originals_are_gone(tmp_path):
    source = tmp_path / "first-start"
    (source / "vllm" / "torch_compile_cache").mkdir(parents=True)
    (source / "vllm" / "torch_compile_cache" / "graph.py").write_text("x" * 100)
    (source / "triton").mkdir()
    (source / "triton" / "kernel.cubin").write_bytes(b"\0" * 50)
    restored = restore_caches(source, tmp_path / "new-node")
    assert not source.exists()
    assert (tmp_path / "new-node" / "triton" / "kernel.cubin").read_bytes() == b"\0" * 50
    assert (restored["files"], restored["bytes"]) == (2, 150)


def test_caches_restored_at_the_path_they_were_written_at_are_the_same_files_and_no_archive_is_left(tmp_path):
    cache = tmp_path / "cache"
    (cache / "inductor").mkdir(parents=True)
    (cache / "inductor" / "fx.py").write_text("graph")
    restored = restore_caches(cache, cache)
    assert (cache / "inductor" / "fx.py").read_text() == "graph"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]
    assert restored["same_path"] and restored["files"] == 1


def test_the_qwen35_config_has_the_published_rotary_settings_and_vllm_reads_mrope():
    from transformers import Qwen3_5Config

    from lab.models import qwen35_config_dict, qwen_special_ids

    config = Qwen3_5Config(**qwen35_config_dict(qwen_special_ids()))
    rope = config.text_config.rope_parameters
    assert (rope["mrope_section"], rope["mrope_interleaved"], rope["partial_rotary_factor"]) == ([11, 11, 10], True, 0.25)
    assert rope["rope_theta"] == 10_000_000
    uses_mrope = pytest.importorskip("vllm.transformers_utils.config").uses_mrope
    assert uses_mrope(config)  # vLLM builds its M-RoPE rotary (a larger position table) for this model


@pytest.mark.slow
def test_the_qwen35_directory_has_the_configs_ids_in_its_tokenizer_and_a_chat_template(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from lab.models import QWEN35_VOCAB, write_qwen35_model

    card = write_qwen35_model(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert len(tokenizer) == QWEN35_VOCAB == config.text_config.vocab_size
    # The ids vLLM's multimodal processor and the chat path use are the tokens the config names.
    assert tokenizer.convert_tokens_to_ids("<|image_pad|>") == config.image_token_id
    assert tokenizer.convert_tokens_to_ids("<|vision_start|>") == config.vision_start_token_id
    assert tokenizer.eos_token_id == config.text_config.eos_token_id == card["special_token_ids"]["<|im_end|>"]
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "serve the model"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert (config.text_config.max_position_embeddings, config.vision_config.out_hidden_size) == (262_144, 4096)
    assert json.loads((Path(tmp_path) / "preprocessor_config.json").read_text())["patch_size"] == 16


def test_the_long_sequence_load_counts_finished_and_preempted_sequences():
    """vLLM's scheduler requests are read as they arrive (in-process engine core): a sequence preempted
    once shows, and one cut short is not counted as finished."""
    pytest.importorskip("vllm")
    from types import SimpleNamespace

    from lab.probe_engine import concurrent_load

    class Scheduler:
        def add_request(self, request):
            request.num_preemptions = 1 if request.request_id == 2 else 0

    scheduler = Scheduler()
    core = SimpleNamespace(scheduler=scheduler)

    class FakeLLM:
        llm_engine = SimpleNamespace(engine_core=SimpleNamespace(engine_core=core))

        def generate(self, prompts, params):
            assert all(len(p["prompt_token_ids"]) == 3840 for p in prompts) and params.ignore_eos
            for index, _ in enumerate(prompts):
                scheduler.add_request(SimpleNamespace(request_id=index))
            return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[0] * (params.max_tokens - (i == 0)))])
                    for i in range(len(prompts))]

    load = concurrent_load(FakeLLM(), sequences=3, prompt_tokens=3840, output_tokens=256)
    assert (load["finished"], load["preemptions"], load["preempted_sequences"]) == (2, [0, 0, 1], 1)
    assert "add_request" not in vars(scheduler)  # the scheduler is left as it was
