"""The typed PD app, its serveConfigV2 render, the stack-config reader and the Ray image facts.

What a user cares about: the default stack deploys the reference serve config; each serving key in a
stack file lands where Ray Serve reads it; a wrong value is refused with the key's name.
"""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import ValidationError

from components.config.declared import project_name
from components.config.read import read_config
from serve_app.config import EngineOverrides, EngineSettings, PDAppConfig, PhaseSettings, Replicas
from serve_app.errors import ConfigError
from serve_app.render import (
    PD_BUILDER_IMPORT_PATH,
    deployment_names,
    pd_serving_args,
    serve_config_v2,
    serve_config_v2_yaml,
)
from serve_app.settings import ServeAppSettings
from serve_app.stack_keys import from_stack_keys

# Rendered for every engine, never left to vLLM's GPU-dependent defaults (serve_app/config.py).
ENGINE_LIMITS = {"max_num_seqs": 32, "max_num_batched_tokens": 2048, "language_model_only": True}

def reference_phase(engine_id: str, kv_role: str) -> dict:
    """docs/SOURCES.md#reference-serve-config, typed out by hand."""
    phase = {
        "model_loading_config": {"model_id": "qwen3.5-9b", "model_source": "Qwen/Qwen3.5-9B"},
        "engine_kwargs": {
            "max_model_len": 4096,
            "dtype": "bfloat16",
            "gpu_memory_utilization": 0.90,
            "enforce_eager": True,
            "kv_transfer_config": {
                "kv_connector": "NixlConnector",
                "kv_role": kv_role,
                "engine_id": engine_id,
                "kv_connector_extra_config": {"backends": ["LIBFABRIC"]},
            },
        },
        "deployment_config": {"num_replicas": 1},
    }
    return phase


def without_engine_id(phase: dict) -> dict:
    """The departure every render makes: no fixed NIXL engine id, so Ray names each engine start and
    decode hand-shakes with a restarted prefill (serve_app/config.py; measured on the H200)."""
    del phase["engine_kwargs"]["kv_transfer_config"]["engine_id"]
    return phase


def from_stack(**keys: str) -> PDAppConfig:
    """The PD app serving keys describe, over Pulumi.yaml's defaults (the reference deployment), as a
    stack file sets them: typed by the settings model alone, before the checks against the GPU nodes."""
    typed, texts = read_config(keys, project=project_name())
    return from_stack_keys(ServeAppSettings, typed, texts).app()


@pytest.fixture(scope="module")
def refused(settings_for):
    """The ConfigError the whole program raises for the dev stack with these keys (checks included)."""
    def refuse(**keys: str) -> ConfigError:
        with pytest.raises(ConfigError) as raised:
            settings_for("dev", **keys)
        return raised.value
    return refuse


# ── Defaults reproduce the reference ──────────────────────────────────────────────────────────

# Ray Serve LLM's own default flush interval, stated in every render so a Ray release that changes
# its default does not change the endpoint.
STREAM_FLUSH = {"experimental_configs": {"stream_batching_interval_ms": 50}}


def pinned_to_its_group(phase: str) -> dict:
    """The departure that keeps each phase on its own worker group: Ray Serve LLM's own
    GPU bundle plus one unit of the phase's Ray custom resource."""
    return {"placement_group_config": {"bundle_per_worker": {"GPU": 1, f"pd-{phase}": 1}, "strategy": "PACK"}}


def test_default_args_are_the_reference_config_with_the_measured_departures():
    # Departures from the AWS sample: kv_both → producer/consumer (config.KV_ROLE_DECISION), CUDA graphs
    # instead of enforce_eager, and the engine limits and text-only serving that start on an L4's memory
    # (measured: docs/PROVEN.md#default-deployment).
    expected = {}
    for phase, role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
        config = {**without_engine_id(reference_phase(phase, role)), **pinned_to_its_group(phase), **STREAM_FLUSH}
        config["engine_kwargs"] = {**config["engine_kwargs"], "enforce_eager": False, **ENGINE_LIMITS,
                                   "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8, 16, 24, 32]}}
        expected[f"{phase}_config"] = config
    assert pd_serving_args(PDAppConfig()) == expected


def test_kv_both_and_eager_reproduce_the_aws_sample_but_the_engine_id_plus_the_stated_flush_interval():
    app = PDAppConfig(engine=EngineSettings(enforce_eager=True),
                      prefill=PhaseSettings(kv_role="kv_both"), decode=PhaseSettings(kv_role="kv_both"))
    expected = {}
    for phase in ("prefill", "decode"):
        config = {**without_engine_id(reference_phase(phase, "kv_both")), **pinned_to_its_group(phase), **STREAM_FLUSH}
        config["engine_kwargs"] = {**config["engine_kwargs"], **ENGINE_LIMITS}
        expected[f"{phase}_config"] = config
    assert pd_serving_args(app) == expected


@pytest.mark.parametrize(("most", "sizes"), [
    (1, [1]), (3, [1, 2, 3]), (32, [1, 2, 4, 8, 16, 24, 32]), (64, [1, 2, 4, 8, 16, 24, 32, 48, 64]),
    (100, [1, 2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 100]),
])
def test_cuda_graph_capture_sizes_cover_the_batch_the_setting_names(most, sizes):
    args = pd_serving_args(from_stack(cudaGraphMaxBatchSize=str(most), maxNumSeqs="128"))
    assert both_phases(args, "engine_kwargs", "compilation_config") == [{"cudagraph_capture_sizes": sizes}] * 2


def test_no_graph_is_captured_for_a_batch_larger_than_max_num_seqs():
    args = pd_serving_args(from_stack(cudaGraphMaxBatchSize="64", maxNumSeqs="16"))
    sizes = {"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}
    assert both_phases(args, "engine_kwargs", "compilation_config") == [sizes] * 2
    assert both_phases(args, "engine_kwargs", "max_num_seqs") == [16] * 2


def test_vision_inputs_load_the_encoder_and_text_only_is_the_default():
    assert both_phases(pd_serving_args(from_stack()), "engine_kwargs", "language_model_only") == [True] * 2
    vision = pd_serving_args(from_stack(visionInputs="true"))
    assert all("language_model_only" not in vision[p]["engine_kwargs"] for p in ("prefill_config", "decode_config"))


def test_eager_engines_render_no_capture_sizes_and_the_flush_interval_is_rendered():
    args = pd_serving_args(from_stack(enforceEager="true", streamBatchingIntervalMs="5"))
    assert all("compilation_config" not in args[p]["engine_kwargs"] for p in ("prefill_config", "decode_config"))
    assert both_phases(args, "experimental_configs") == [{"stream_batching_interval_ms": 5}] * 2


def test_direct_streaming_reaches_the_app_runtime_env_and_is_off_by_default():
    default = serve_config_v2(from_stack())
    assert "runtime_env" not in default["applications"][0]
    on = serve_config_v2(from_stack(pdDirectStreaming="true"))
    # Ray Serve LLM reads it at import: the builder's task and every replica get the app's runtime_env.
    assert on["applications"][0]["runtime_env"] == {"env_vars": {"RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1"}}
    assert {**on["applications"][0], "runtime_env": None} == {**default["applications"][0], "runtime_env": None}


def test_direct_streaming_refuses_an_ingress_deployment_config():
    # Ray Serve LLM refuses ingress_deployment_config under direct streaming: decode is the ingress.
    with pytest.raises(ValidationError, match="no ingress deployment"):
        PDAppConfig(direct_streaming=True, ingress={"deployment_config": {"num_replicas": 2}})


def test_empty_stack_config_gives_the_default_app():
    assert from_stack() == PDAppConfig()
    # Pulumi.yaml declares every key; its "" and "0" defaults mean "use the default" too.
    assert from_stack(tokenizerSource="", prefillMaxReplicas="0", decodeMaxReplicas="0",
                      extraEngineKwargs="", rayImage="") == PDAppConfig()


def test_serve_config_v2_is_one_pd_application_at_root():
    document = serve_config_v2(PDAppConfig())
    assert document["http_options"] == {"host": "0.0.0.0", "port": 8000}
    [application] = document["applications"]
    assert application["name"] == "llm"
    assert application["route_prefix"] == "/"
    assert application["import_path"] == PD_BUILDER_IMPORT_PATH == "ray.serve.llm:build_pd_openai_app"
    assert application["args"] == pd_serving_args(PDAppConfig())


def test_yaml_is_the_same_data_and_has_no_python_tags():
    text = serve_config_v2_yaml(PDAppConfig())
    assert "!!python" not in text
    assert yaml.safe_load(text) == serve_config_v2(PDAppConfig())


def test_deployment_names_follow_ray_serve_llm_naming():
    assert deployment_names(PDAppConfig()) == {
        "prefill": "Prefill:qwen3_5-9b", "decode": "Decode:qwen3_5-9b", "ingress": "OpenAiIngress"}
    named = PDAppConfig(model={"model_id": "meta-llama/Llama-3.1-8B", "model_source": "meta-llama/Llama-3.1-8B"})
    assert deployment_names(named)["prefill"] == "Prefill:meta-llama--Llama-3_1-8B"


# ── Each stack setting lands where Ray Serve reads it ────────────────────────────────────────

def both_phases(args: dict, *path: str) -> list:
    values = []
    for phase in ("prefill_config", "decode_config"):
        node = args[phase]
        for part in path:
            node = node[part]
        values.append(node)
    return values


@pytest.mark.parametrize(("key", "raw", "path", "expected"), [
    ("modelId", "my-model", ("model_loading_config", "model_id"), "my-model"),
    ("modelSource", "acme/custom-model-7b", ("model_loading_config", "model_source"), "acme/custom-model-7b"),
    ("tokenizerSource", "Qwen/Qwen3.5-9B-Tok", ("model_loading_config", "tokenizer_source"), "Qwen/Qwen3.5-9B-Tok"),
    ("maxModelLen", "8192", ("engine_kwargs", "max_model_len"), 8192),
    ("dtype", "float16", ("engine_kwargs", "dtype"), "float16"),
    ("gpuMemoryUtilization", "0.85", ("engine_kwargs", "gpu_memory_utilization"), 0.85),
    ("enforceEager", "false", ("engine_kwargs", "enforce_eager"), False),
    ("tensorParallelSize", "2", ("engine_kwargs", "tensor_parallel_size"), 2),
    ("pipelineParallelSize", "2", ("engine_kwargs", "pipeline_parallel_size"), 2),
    ("extraEngineKwargs", '{"max_logprobs": 8}', ("engine_kwargs", "max_logprobs"), 8),
    ("kvBackends", '["LIBFABRIC"]', ("engine_kwargs", "kv_transfer_config", "kv_connector_extra_config", "backends"),
     ["LIBFABRIC"]),
])
def test_shared_setting_changes_both_phases(key, raw, path, expected):
    args = pd_serving_args(from_stack(**{key: raw}))
    assert both_phases(args, *path) == [expected, expected]


@pytest.mark.parametrize(("source", "served_as"), [
    ("Qwen/Qwen3.5-9B", "qwen3.5-9b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
    ("s3://models/mirrors/Qwen3-8B/", "qwen3-8b"),
])
def test_another_model_is_served_under_its_own_name_unless_model_id_is_set(source, served_as):
    # The old model's name on a new model would send clients to a model they did not ask for.
    streamer = {"rayImageCarriesRunaiStreamer": "true"}
    assert both_phases(pd_serving_args(from_stack(modelSource=source, **streamer)),
                       "model_loading_config", "model_id") == [served_as, served_as]
    assert both_phases(pd_serving_args(from_stack(modelSource=source, modelId="chat", **streamer)),
                       "model_loading_config", "model_id") == ["chat", "chat"]


def test_ucx_accepted_on_efa_renders_ucx():
    app = from_stack(kvBackends='["UCX"]', acceptUcxOnEfaKvTransferIs100xSlower="true")
    assert both_phases(pd_serving_args(app), "engine_kwargs", "kv_transfer_config",
                       "kv_connector_extra_config", "backends") == [["UCX"], ["UCX"]]


def test_no_phase_fixes_its_nixl_engine_id():
    # Ray Serve LLM then names each engine `<random>-<host>-<port>` at its start.
    args = pd_serving_args(from_stack())
    assert [args[f"{p}_config"]["engine_kwargs"]["kv_transfer_config"].get("engine_id")
            for p in ("prefill", "decode")] == [None, None]


@pytest.mark.parametrize("key", ["prefillEngineId", "decodeEngineId"])
def test_a_stack_file_still_setting_an_engine_id_is_told_it_was_removed_and_why(key):
    with pytest.raises(ConfigError) as raised:
        from_stack(**{key: "p0"})
    assert raised.value.setting == key
    assert "removed" in str(raised.value) and "stale peer" in str(raised.value)


def test_fixed_replicas_render_num_replicas():
    args = pd_serving_args(from_stack(prefillReplicas="2", decodeReplicas="3"))
    assert args["prefill_config"]["deployment_config"] == {"num_replicas": 2}
    assert args["decode_config"]["deployment_config"] == {"num_replicas": 3}


def test_max_replicas_render_autoscaling_bounds():
    args = pd_serving_args(from_stack(prefillReplicas="1", prefillMaxReplicas="4",
                                      decodeReplicas="2", decodeMaxReplicas="2"))
    # Serve's pace defaults (target 2 ongoing requests, 30 s up, 600 s down) are stated in the render.
    pace = {"target_ongoing_requests": 2, "upscale_delay_s": 30, "downscale_delay_s": 600}
    assert args["prefill_config"]["deployment_config"] == {"autoscaling_config": {
        "min_replicas": 1, "max_replicas": 4, **pace}}
    assert args["decode_config"]["deployment_config"] == {"autoscaling_config": {
        "min_replicas": 2, "max_replicas": 2, **pace}}


def test_per_phase_override_changes_only_that_phase():
    app = PDAppConfig(decode=PhaseSettings(kv_role="kv_consumer",
        engine=EngineOverrides(gpu_memory_utilization=0.8, extra_engine_kwargs={"max_logprobs": 4})))
    args = pd_serving_args(app)
    assert both_phases(args, "engine_kwargs", "gpu_memory_utilization") == [0.90, 0.8]
    assert "max_logprobs" not in args["prefill_config"]["engine_kwargs"]
    assert args["decode_config"]["engine_kwargs"]["max_logprobs"] == 4


def test_override_extra_kwargs_merge_over_shared_ones():
    app = PDAppConfig(engine={"extra_engine_kwargs": {"max_logprobs": 16, "seed": 1}},
                      prefill=PhaseSettings(kv_role="kv_producer",
                                            engine=EngineOverrides(extra_engine_kwargs={"max_logprobs": 2})))
    args = pd_serving_args(app)
    assert args["prefill_config"]["engine_kwargs"]["max_logprobs"] == 2
    assert args["decode_config"]["engine_kwargs"]["max_logprobs"] == 16
    assert both_phases(args, "engine_kwargs", "seed") == [1, 1]


def test_accelerator_type_ingress_and_app_name_render():
    app = PDAppConfig(name="chat", route_prefix="/v2", accelerator_type="L4",
                      ingress={"deployment_config": {"num_replicas": 2}})
    document = serve_config_v2(app)
    [application] = document["applications"]
    assert (application["name"], application["route_prefix"]) == ("chat", "/v2")
    assert both_phases(application["args"], "accelerator_type") == ["L4", "L4"]
    assert application["args"]["ingress_deployment_config"] == {"num_replicas": 2}


# ── Bad settings are refused, naming the key ─────────────────────────────────────────────────

@pytest.mark.parametrize(("settings", "key", "says"), [
    ({"maxModelLen": "4k"}, "maxModelLen", "whole number"),
    ({"maxModelLen": "0"}, "maxModelLen", "≥ 1"),
    ({"dtype": "bf16"}, "dtype", "bfloat16"),
    ({"gpuMemoryUtilization": "90%"}, "gpuMemoryUtilization", "(0, 1]"),
    ({"gpuMemoryUtilization": "0"}, "gpuMemoryUtilization", "(0, 1]"),
    ({"gpuMemoryUtilization": "1.2"}, "gpuMemoryUtilization", "(0, 1]"),
    ({"gpuMemoryUtilization": "nan"}, "gpuMemoryUtilization", "(0, 1]"),
    ({"enforceEager": "yes"}, "enforceEager", "true or false"),
    ({"tensorParallelSize": "0"}, "tensorParallelSize", "≥ 1"),
    ({"pipelineParallelSize": "two"}, "pipelineParallelSize", "whole number"),
    ({"prefillReplicas": "0"}, "prefillReplicas", "≥ 1"),
    ({"decodeReplicas": "-1"}, "decodeReplicas", "whole number"),
    ({"prefillReplicas": "3", "prefillMaxReplicas": "2"}, "prefillMaxReplicas", "0 (fixed)"),
    ({"decodeMaxReplicas": "1.5"}, "decodeMaxReplicas", "whole number"),
    ({"kvBackends": "LIBFABRIC"}, "kvBackends", "JSON"),
    ({"kvBackends": '"LIBFABRIC"'}, "kvBackends", "JSON"),
    ({"kvBackends": "[]"}, "kvBackends", "non-empty"),
    ({"kvBackends": '["LIBFABRIC", "LIBFABRIC"]'}, "kvBackends", "distinct"),
    ({"kvBackends": '["libfabric"]'}, "kvBackends", "unknown NIXL backend"),
    ({"kvBackends": '[1]'}, "kvBackends", "JSON array of strings"),
    ({"kvBackends": '["UCX"]'}, "kvBackends", "acceptUcxOnEfaKvTransferIs100xSlower"),
    ({"kvBackends": '["UCX", "LIBFABRIC"]'}, "kvBackends", "acceptUcxOnEfaKvTransferIs100xSlower"),
    ({"kvBackends": '["UCX"]', "acceptUcxOnEfaKvTransferIs100xSlower": "maybe"},
     "acceptUcxOnEfaKvTransferIs100xSlower", "true or false"),
    ({"modelSource": "Qwen/Qwen 3.5"}, "modelSource", "without spaces"),
    ({"modelId": "qwen 3.5"}, "modelId", "without spaces"),
    ({"modelId": "qwen#3"}, "modelId", "'#'"),
    ({"extraEngineKwargs": "max_num_seqs=8"}, "extraEngineKwargs", "not JSON"),
    ({"extraEngineKwargs": "[1]"}, "extraEngineKwargs", "JSON text of an object"),
    ({"extraEngineKwargs": '{"max_model_len": 8192}'}, "extraEngineKwargs", "set max_model_len with maxModelLen"),
    ({"extraEngineKwargs": '{"kv_transfer_config": {}}'}, "extraEngineKwargs", "kvBackends"),
    ({"extraEngineKwargs": '{"data_parallel_size": 2}'}, "extraEngineKwargs", "tensor and pipeline"),
    ({"extraEngineKwargs": '{"disable_log_stats": true}'}, "extraEngineKwargs", "log_engine_metrics"),
    ({"extraEngineKwargs": '{"kv_cache_memory_bytes": 4294967296}'}, "extraEngineKwargs",
     "set kv_cache_memory_bytes with kvCacheFromPlan"),
    ({"modelSource": "s3://models"}, "modelSource", "names a whole bucket"),
    ({"modelSource": "s3://Models_Bucket/qwen"}, "modelSource", "valid bucket name"),
    ({"tokenizerSource": "s3://models/tok"}, "tokenizerSource", "bucket and prefix only"),
    ({"modelSource": "s3://models/a", "tokenizerSource": "s3://models/b", "rayImageCarriesRunaiStreamer": "true"},
     "tokenizerSource", "bucket and prefix only"),
    ({"modelSource": "s3://models/qwen3.5-9b"}, "rayImageCarriesRunaiStreamer", "runai-model-streamer"),
    # The streamer asked for on the Hugging Face path is held to the same declaration.
    ({"extraEngineKwargs": '{"load_format": "runai_streamer"}'}, "rayImageCarriesRunaiStreamer",
     "extraEngineKwargs sets load_format runai_streamer"),
    ({"modelSource": "s3://models/qwen3.5-9b", "rayImageCarriesRunaiStreamer": "true",
      "extraEngineKwargs": '{"load_format": "safetensors"}'}, "extraEngineKwargs", "reads only by streaming"),
    ({"rayImageCarriesRunaiStreamer": "maybe"}, "rayImageCarriesRunaiStreamer", "true or false"),
])
def test_bad_setting_is_refused_naming_its_key(settings, key, says, refused):
    error = refused(**settings)
    assert error.setting == key
    assert says in str(error)
    assert str(error).startswith(f"{key}: got ")


SERVING_KEYS = sorted(ServeAppSettings.keys())


@hypothesis_settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(SERVING_KEYS),
       raw=st.one_of(st.text(max_size=40), st.integers(-10, 10**6).map(str),
                     st.sampled_from(["[\"UCX\"]", "{}", "[]", "0.5", "true", "nan", "1e999", "[" * 5000])))
def test_any_text_in_any_serving_key_is_accepted_or_refused_by_name(key, raw):
    try:
        app = from_stack(**{key: raw})
    except ConfigError as error:
        assert error.setting in (key, "kvBackends")  # the UCX acknowledgement is about kvBackends
        return
    assert yaml.safe_load(serve_config_v2_yaml(app)) == serve_config_v2(app)


def test_typed_model_is_frozen_and_refuses_unknown_fields():
    app = PDAppConfig()
    with pytest.raises(ValidationError):
        app.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        PDAppConfig(proxy_cls_config={})  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        PDAppConfig(route_prefix="v1")
    with pytest.raises(ValidationError):
        PDAppConfig(route_prefix="/v1/")
    with pytest.raises(ValidationError):
        Replicas(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError):
        PhaseSettings(kv_role="kv_sender")  # type: ignore[arg-type]


def test_stack_config_reader_accepts_pulumi_json_arrays():
    # Pulumi hands arrays over as JSON text; the reader takes exactly that.
    app = from_stack(kvBackends=json.dumps(["LIBFABRIC"]))
    assert app.kv_transfer.backends == ("LIBFABRIC",)


@pytest.mark.parametrize("engine", [
    lambda kwargs: EngineSettings(extra_engine_kwargs=kwargs),
    lambda kwargs: EngineOverrides(extra_engine_kwargs=kwargs),
])
@pytest.mark.parametrize("kwargs", [{"max_model_len": 65536}, {"kv_transfer_config": {}}, {"disable_log_stats": True}])
def test_the_typed_api_cannot_smuggle_owned_engine_kwargs(engine, kwargs):
    # The capacity check reads the typed fields: an extra kwarg overriding one would go unchecked.
    with pytest.raises(ValueError, match="extra_engine_kwargs may not set"):
        engine(kwargs)
