"""`python -m lab replica-start` (lab/replica_start.py): the replica it starts is the stack's decode engine
on the L4's budget, its timings come from vLLM's own log line, and the command runs end to end on real
Ray Serve on the CPU (Ray Serve LLM building the lab's fake engine: its numbers are not results)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from lab import replica_start
from lab.replica_start import engine_order, init_begins, replica_config

REPO = Path(__file__).resolve().parents[2]
# A line of vLLM 0.26 as the H200 printed it (lab/results/2026-12-02-h200-run3-run.log).
INIT = "INFO 12-02 09:14:24 [core.py:340] init engine (profile, create kv cache, warmup model) took 118.72 s " \
       "(compilation: 24.95 s)"


def test_init_begins_is_the_line_time_less_the_seconds_it_took():
    assert init_begins(f"noise\n\x1b[36m(pid=1)\x1b[0m {INIT}\n", 2026) == datetime.datetime(2026, 12, 2, 9, 12, 25, 280000)
    assert init_begins("no engine started", 2026) is None


def test_starts_alternate_so_neither_engine_always_meets_the_colder_caches():
    assert engine_order(["single-process", "stock"], 3) == ["single-process", "stock", "single-process"]


def test_the_replica_is_the_stacks_decode_engine_on_the_budget_with_its_kv_connector(settings_for):
    decode = settings_for("dev").serving.app.serve_config_v2["applications"][0]["args"]["decode_config"]
    config = replica_config(decode, model_path="/m", utilization=0.155, kv_cache_bytes=2_831_994_061)
    engine = config["engine_kwargs"]
    assert (engine["gpu_memory_utilization"], engine["kv_cache_memory_bytes"]) == (0.155, 2_831_994_061)
    assert engine["kv_transfer_config"]["kv_connector"] == decode["engine_kwargs"]["kv_transfer_config"]["kv_connector"]
    assert engine["max_num_seqs"] == decode["engine_kwargs"]["max_num_seqs"]
    assert config["deployment_config"] == {"num_replicas": 1}
    assert config["placement_group_config"]["bundle_per_worker"]["GPU"] == 1


@pytest.mark.slow
def test_the_command_starts_serves_and_records_each_start_on_real_ray_serve(settings_for, tmp_path, monkeypatch):
    pytest.importorskip("ray.serve.llm")
    from lab.fake_engine import ENGINE_CLASS_PATH

    # Both "engines" are the fake here: the CPU has no vLLM engine to start.
    monkeypatch.setattr(replica_start, "ENGINES", {"fake": ENGINE_CLASS_PATH})
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.chdir(REPO)
    decode = settings_for("dev").serving.app.serve_config_v2["applications"][0]["args"]["decode_config"]
    config = replica_config(decode, model_path="/m", utilization=0.9, kv_cache_bytes=None)
    data = replica_start.replica_starts(config, engines=["fake"], starts=1, cache_dir=str(tmp_path / "cc"),
                                        out_dir=tmp_path, deadline_s=400, min_start_s=60, timeout_s=120, facts={})
    [start] = data["starts"]
    assert start.get("completion_ok") and start["running_s"] > 0, start
    assert any("ServeReplica" in process for process in start["processes"]), start["processes"]
    assert json.loads((tmp_path / "replica-start.json").read_text())["starts"] == [start]
    assert (tmp_path / "replica-start-0-fake-ray-logs.tar.xz").stat().st_size > 0


def test_the_labs_runs_start_the_engine_the_stack_names():
    # `lab run` and `lab resilience` build apps from the rendered args, which lack the app's runtime_env.
    from lab.commands.common import engine_env

    assert engine_env("dev", ["singleProcessEngine=true"]) == {
        "RAYLLM_VLLM_ENGINE_CLS": "front_door.engine:SingleProcessVLLMEngine"}
    assert engine_env("dev") == {}
