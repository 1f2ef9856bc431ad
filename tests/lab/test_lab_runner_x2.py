"""The two-GPU lab (`python -m lab run --gpus 2`), on the CPU: prefill and decode on separate
whole GPUs, apps in stages, the interference load and its report. The GPU run is lab/results/
(2026-11-29-h200x2-*); these tests keep its logic honest between runs."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import time

import pytest

from lab import workload
from lab.__main__ import main as cli_main
from lab.apps import Interference, LabModel, Workload, lab_apps, lab_environment, lab_stages
from lab.overlay import GiB, LabOverlay, apply_lab_overlay, changed_paths
from lab.report import interference_table, markdown_report
from lab.runner import compare_greedy_outputs, verdict
from measure.latency import RequestSample
from serve_app.errors import ConfigError

MODEL_DIR = "/tmp/lab-models/llama3-8b-shape"
# What the two-GPU overlay may change in one PD phase of the dev stack's render, leaf by leaf: no GPU
# fraction, no memory share, no fixed KV cache (vLLM profiles its own whole GPU, as on EKS).
WHOLE_GPU_OVERLAY_LEAVES = {
    "model_loading_config.model_source",
    "engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends",
    "engine_kwargs.seed",
    "placement_group_config.bundle_per_worker.CPU",
    "runtime_env.env_vars.VLLM_DP_MASTER_PORT",
    "runtime_env.env_vars.VLLM_NIXL_SIDE_CHANNEL_PORT",
}


def _models() -> list[LabModel]:
    return [LabModel("llama3-8b-shape", MODEL_DIR, True, False, (4, 500)),
            LabModel("tiny", "/tmp/lab-models/tiny", False, True, (4, 500), timed=False)]


def _configs(app) -> list[dict]:
    return app.args["llm_configs"] if app.mode == "colocated" else [app.args["prefill_config"],
                                                                    app.args["decode_config"]]


def _gpus_needed(app) -> float:
    return sum(c["placement_group_config"]["bundle_per_worker"]["GPU"] for c in _configs(app))


# ── whole-GPU overlay ─────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("role", ["prefill_config", "decode_config"])
def test_whole_gpu_overlay_changes_only_the_lab_keys_and_keeps_the_stacks_memory_settings(dev_args, role):
    overlay = LabOverlay(MODEL_DIR, engines_on_gpu=1, engine_slot=4, kv_cache_memory_bytes=None, engines_on_host=6)
    after = apply_lab_overlay(dev_args[role], overlay)

    assert changed_paths(dev_args[role], after) == WHOLE_GPU_OVERLAY_LEAVES
    phase = role.removesuffix("_config")
    assert after["placement_group_config"]["bundle_per_worker"] == {"GPU": 1, "CPU": 1, f"pd-{phase}": 1}
    assert "kv_cache_memory_bytes" not in after["engine_kwargs"]
    assert after["engine_kwargs"]["gpu_memory_utilization"] == dev_args[role]["engine_kwargs"]["gpu_memory_utilization"]


def test_a_fixed_kv_cache_is_still_possible_on_a_whole_gpu(dev_args):
    after = apply_lab_overlay(dev_args["decode_config"], LabOverlay(MODEL_DIR, 1, 0, kv_cache_memory_bytes=8 * GiB))
    assert after["engine_kwargs"]["kv_cache_memory_bytes"] == 8 * GiB
    assert "gpu_memory_utilization" not in changed_paths(dev_args["decode_config"], after)


def test_engines_sharing_a_gpu_must_have_a_fixed_kv_cache():
    with pytest.raises(ConfigError, match="kv_cache_memory_bytes"):
        LabOverlay(MODEL_DIR, engines_on_gpu=2, engine_slot=0, kv_cache_memory_bytes=None)


def test_engine_slots_are_counted_over_the_host_not_the_gpu():
    assert LabOverlay(MODEL_DIR, 1, 5, engines_on_host=6).dp_master_port != LabOverlay(MODEL_DIR, 1, 4,
                                                                                        engines_on_host=6).dp_master_port
    with pytest.raises(ConfigError, match="engine_slot"):
        LabOverlay(MODEL_DIR, engines_on_gpu=1, engine_slot=6, engines_on_host=6)
    with pytest.raises(ConfigError, match="engines_on_host"):
        LabOverlay(MODEL_DIR, engines_on_gpu=3, engine_slot=0, engines_on_host=2)


def test_two_gpu_apps_give_every_engine_a_whole_gpu_and_its_own_ports(dev_args):
    apps = lab_apps(dev_args, _models(), kv_cache_memory_bytes=None, gpus=2)
    configs = [c for app in apps for c in _configs(app)]
    assert len(configs) == 6
    assert all(c["placement_group_config"]["bundle_per_worker"]["GPU"] == 1 for c in configs)
    assert all("kv_cache_memory_bytes" not in c["engine_kwargs"] for c in configs)
    starts = sorted(int(c["runtime_env"]["env_vars"]["VLLM_DP_MASTER_PORT"]) + 100 for c in configs)
    assert all(b - a >= 32 for a, b in itertools.pairwise(starts))  # vLLM scans 32 ports from there
    nixl = [c["runtime_env"]["env_vars"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] for c in configs
            if "kv_transfer_config" in c["engine_kwargs"]]
    assert len(nixl) == len(set(nixl)) == 4
    # PD keeps the stack's KV roles; the colocated baseline has no KV transfer.
    pd = next(a for a in apps if a.name == "llama3-8b-shape-pd")
    assert [pd.args[r]["engine_kwargs"]["kv_transfer_config"]["kv_role"] for r in ("prefill_config", "decode_config")] \
        == ["kv_producer", "kv_consumer"]
    assert all("kv_transfer_config" not in c["engine_kwargs"] for a in apps if a.mode == "colocated" for c in _configs(a))


def test_two_gpu_environment_keeps_nvlink_multicast_off_and_no_gpu_fraction():
    env = lab_environment(_models(), gpus=2)
    assert (env["NCCL_NVLS_ENABLE"], env["TORCH_SYMM_MEM_DISABLE_MULTICAST"], env["NVSHMEM_DISABLE_NVLS"]) == ("0", "1", "1")
    assert "VLLM_RAY_PER_WORKER_GPUS" not in env
    assert lab_environment(_models())["VLLM_RAY_PER_WORKER_GPUS"] == "0.1666"  # one GPU: unchanged


# ── stages ────────────────────────────────────────────────────────────────────────────────────

def test_two_gpu_stages_fit_the_gpus_and_put_the_first_models_pd_and_colocated_first(dev_args):
    apps = lab_apps(dev_args, _models(), kv_cache_memory_bytes=None, gpus=2)
    stages = lab_stages(apps, gpus=2)
    assert [[a.name for a in stage] for stage in stages] == [
        ["llama3-8b-shape-pd"], ["llama3-8b-shape-colocated", "tiny-colocated"], ["tiny-pd"]]
    assert all(sum(_gpus_needed(a) for a in stage) <= 2 for stage in stages)
    assert sorted(a.name for stage in stages for a in stage) == sorted(a.name for a in apps)


def test_one_gpu_runs_everything_in_one_stage(dev_args):
    apps = lab_apps(dev_args, _models())
    assert lab_stages(apps, gpus=1) == [apps]
    with pytest.raises(ConfigError, match="gpus"):
        lab_stages(apps, gpus=0)


def test_ray_serve_llm_builds_the_two_gpu_apps(dev_args, ray_serve_llm):
    """Whole-GPU bundles pass Ray Serve LLM's own schemas (placement_group_config, engine kwargs)."""
    for app in lab_apps(dev_args, _models(), kv_cache_memory_bytes=None, gpus=2):
        builder = ray_serve_llm.build_pd_openai_app if app.mode == "pd" else ray_serve_llm.build_openai_app
        assert builder(copy.deepcopy(app.args)) is not None


# ── workload ──────────────────────────────────────────────────────────────────────────────────

def test_request_counts_are_clamped_as_issue_7_asks():
    spec = Workload(concurrencies=(1, 8, 32), requests_per_concurrency_slot=2, min_requests=4, max_requests=32)
    assert [spec.requests_at(c) for c in spec.concurrencies] == [4, 16, 32]
    assert [Workload().requests_at(c) for c in (1, 8)] == [8, 32]  # the one-GPU run's counts


def test_long_prompts_span_the_range_and_fit_the_rendered_context(dev_args):
    load = Interference()
    lengths = workload.long_prompt_lengths(load.long_requests, load.long_prompt_tokens_min, load.long_prompt_tokens_max)
    assert lengths[0] == 2048 and lengths[-1] == 4000 and lengths == sorted(lengths) and len(lengths) == 6
    max_model_len = dev_args["decode_config"]["engine_kwargs"]["max_model_len"]
    assert max(lengths) + load.long_output_tokens <= max_model_len
    assert workload.long_prompt_lengths(1, 2048, 4000) == [4000]


def test_long_prompts_arrive_while_the_short_requests_decode(monkeypatch):
    """The short streams start at once; each long prompt starts on its schedule, open loop."""
    sent: list[tuple[float, int]] = []

    async def fake_stream(client, body):
        began = time.perf_counter()
        sent.append((began, len(body["prompt"])))
        await asyncio.sleep(0.01 * body["max_tokens"])
        return RequestSample(start=began, end=time.perf_counter(), token_times=(time.perf_counter(),))

    monkeypatch.setattr(workload, "stream_completion", fake_stream)
    short, long, wall = asyncio.run(workload.run_interference(
        "http://unused", "m", [[1] * 4] * 3, 30, [[2] * 100, [2] * 200], 1,
        long_start_after_s=0.1, long_interval_s=0.05))
    assert len(short) == 3 and len(long) == 2 and wall >= 0.3
    t0 = min(t for t, _ in sent)
    short_starts = [t - t0 for t, n in sent if n == 4]
    long_starts = sorted(t - t0 for t, n in sent if n > 4)
    assert max(short_starts) < 0.05
    assert long_starts[0] == pytest.approx(0.1, abs=0.04) and long_starts[1] == pytest.approx(0.15, abs=0.04)
    assert long_starts[-1] < 0.3  # all long prompts arrive while the short ones (0.3 s) still decode


# ── comparison across stages, verdict, report ────────────────────────────────────────────────

def _choice(tokens_margins: list[tuple[int, float]]) -> dict:
    return {"logprobs": {"tokens": [f"token_id:{t}" for t, _ in tokens_margins],
                         "top_logprobs": [{f"token_id:{t}": -0.1, f"token_id:{t + 1}": -0.1 - m}
                                          for t, m in tokens_margins]}}


def test_greedy_outputs_from_different_stages_are_compared_position_by_position():
    spec = Workload(min_clear_positions=2)
    reference = [_choice([(5, 2.0), (6, 2.0), (7, 0.1)])]
    assert compare_greedy_outputs(reference, [_choice([(5, 2.0), (6, 2.0), (8, 0.1)])], spec)["passed"] is True
    assert compare_greedy_outputs(reference, [_choice([(5, 2.0), (9, 2.0), (7, 0.1)])], spec)["passed"] is False
    failed = compare_greedy_outputs(reference, [{"error": "HTTP 500: engine died"}], spec)
    assert failed["passed"] is False and failed["errors"] == ["HTTP 500: engine died"]


def _part(failed: int = 0, tpot: float = 0.02) -> dict:
    dist = {"mean": tpot, "p50": tpot, "p90": tpot * 1.5, "p99": tpot * 3}
    return {"requests": {"total": 8, "succeeded": 8 - failed, "failed": failed}, "tpot_s": dist, "itl_s": dist,
            "ttft_s": dist, "itl_max_s": tpot * 10}


def _interference_row(mode: str, long_failed: int = 0) -> dict:
    return {"model": "llama3-8b-shape", "mode": mode, "short_quiet": _part(),
            "short_with_long_prompts": _part(tpot=0.03), "long_prompts": _part(failed=long_failed)}


def test_a_failed_long_prompt_fails_the_interference_check():
    data = {"checks": {"endpoints": {"llama3-8b-shape-pd": {"answers": True}}}, "timing": [], "not_done": [],
            "interference": [_interference_row("pd")]}
    assert verdict(data)["checks"]["interference_all_requests_ok:llama3-8b-shape-pd"] is True
    assert verdict(data)["passed"] is True
    data["interference"] = [_interference_row("pd", long_failed=1)]
    assert verdict(data)["passed"] is False


def test_interference_report_names_the_model_and_both_conditions():
    data = {"models": {"llama3-8b-shape": {"dummy_weights": True}},
            "interference": [_interference_row("pd"), _interference_row("colocated")],
            "topology": {"gpus": 2, "engines_on_gpu": 1, "stages": [["llama3-8b-shape-pd"]]}}
    table = interference_table(data)
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert all(r.startswith("| llama3-8b-shape (dummy weights) |") for r in rows)
    assert "20.0 / 30.0 → 30.0 / 45.0" in rows[0]  # TPOT p50 / p90 alone → with long prompts
    assert "Topology: 2 GPU(s), 1 engine(s) per GPU" in markdown_report(data)


# ── command line ──────────────────────────────────────────────────────────────────────────────

def test_cli_refuses_an_unsupported_gpu_count_and_unknown_untimed_models(capsys):
    assert cli_main(["run", "--gpus", "3"]) == 2
    assert "--gpus" in capsys.readouterr().err
    assert cli_main(["run", "--gpus", "2", "--models", "llama3-8b-shape", "--untimed", "tiny"]) == 2
    assert "--untimed" in capsys.readouterr().err
    assert cli_main(["run", "--concurrencies", "1,x"]) == 2
    assert "--concurrencies" in capsys.readouterr().err


def test_cli_refuses_an_unknown_mode(capsys):
    assert cli_main(["run", "--gpus", "2", "--modes", "pd,both"]) == 2
    assert "--modes" in capsys.readouterr().err



def _result_file(tmp_path, name: str, app: str, choices: list[dict], **workload_changes) -> str:
    settings = {"seed": 0, "compare_prompts": 1, "compare_prompt_tokens": 48, "compare_output_tokens": 3,
                "clear_margin": 0.5, "min_clear_positions": 2, **workload_changes}
    path = tmp_path / name
    path.write_text(json.dumps({"workload": settings, "greedy_outputs": {app: choices}}))
    return str(path)


def test_a_split_run_is_compared_from_its_two_results_files(tmp_path, capsys):
    colocated = _result_file(tmp_path, "c.json", "tiny-colocated", [_choice([(5, 2.0), (6, 2.0), (7, 0.1)])])
    same = _result_file(tmp_path, "p.json", "tiny-pd", [_choice([(5, 2.0), (6, 2.0), (8, 0.1)])])
    differs = _result_file(tmp_path, "q.json", "tiny-pd", [_choice([(5, 2.0), (9, 2.0), (7, 0.1)])])
    assert cli_main(["compare-greedy", colocated, same]) == 0
    assert json.loads(capsys.readouterr().out)["clear_positions_compared"] == 2
    assert cli_main(["compare-greedy", colocated, differs]) == 1


def test_results_files_with_other_prompts_are_not_compared(tmp_path, capsys):
    colocated = _result_file(tmp_path, "c.json", "tiny-colocated", [_choice([(5, 2.0)])])
    other_seed = _result_file(tmp_path, "p.json", "tiny-pd", [_choice([(5, 2.0)])], seed=1)
    assert cli_main(["compare-greedy", colocated, other_seed]) == 2
    assert "workload.seed" in capsys.readouterr().err
    assert cli_main(["compare-greedy", colocated, colocated]) == 2  # no tiny-pd outputs in it
    assert "--model" in capsys.readouterr().err
