"""The single-process engine (front_door/engine.py) against Ray Serve LLM's own start, on real Ray Serve
on the CPU: one replica of the dev stack's decode engine, its GPU bundle on a Ray that declares GPUs.
Stock, the replica's start runs Ray Serve LLM's two tasks in another process and hands vLLM Ray's
executor (one more process, its Ray worker, beside the engine core): four processes. With the subclass:
the replica and the engine core, two. On a node of two GPUs the subclass leaves the start as it is.
Processes are counted by the pids they write (probe_engine.py). About three minutes: Ray starts three
times and each replica imports vLLM."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RAY_EXECUTOR = ("RayDistributedExecutor", "RayExecutorV2")


def start_replica(llm_config: dict, engine_path: str, pids_file: Path, gpus: int = 1) -> list[tuple[str, int]]:
    """Deploy one replica of `llm_config` with Ray Serve LLM building `engine_path`; each (role, pid)."""
    import ray
    from ray import serve
    from ray.serve.llm import build_openai_app

    from lab.fake_engine import ENGINE_CLASS_ENV
    from lab.runner import phase_resources

    pids_file.touch()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=4, num_gpus=gpus, resources=phase_resources(), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {ENGINE_CLASS_ENV: engine_path, "ENGINE_PROBE_PIDS_FILE": str(pids_file),
                                       "PYTHONPATH": f"{REPO}:{HERE}"}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": 0})
        serve.run(build_openai_app({"llm_configs": [llm_config]}), name="llm", route_prefix="/")
    finally:
        serve.shutdown()
        ray.shutdown()
    return [(role, int(pid)) for role, pid in (line.split() for line in pids_file.read_text().splitlines())]


def processes_per_replica(records: list[tuple[str, int]]) -> int:
    """Ray's processes that took part, plus vLLM's engine core, plus its Ray worker where Ray's executor runs."""
    executors = [role.removeprefix("executor:") for role, _ in records if role.startswith("executor:")]
    assert len(executors) == 1, records
    ray_processes = {pid for role, pid in records if not role.startswith("executor:")}
    return len(ray_processes) + 1 + (executors[0] in RAY_EXECUTOR)


@pytest.fixture(scope="module")
def decode_config(settings_for) -> dict:
    pytest.importorskip("ray.serve.llm")
    settings = settings_for("dev")
    config = copy.deepcopy(dict(settings.serving.app.serve_config_v2["applications"][0]["args"]["decode_config"]))
    config.pop("accelerator_type", None)  # this Ray's one GPU is of no cloud type
    config["deployment_config"] = {"num_replicas": 1}
    return config


def test_the_stack_engine_starts_a_replica_in_two_processes_where_ray_serve_llm_starts_four(decode_config, tmp_path):
    import sys

    sys.path.insert(0, str(HERE))
    from probe_engine import SINGLE_PROCESS_ENGINE_PATH, STOCK_ENGINE_PATH

    started = time.perf_counter()
    stock = start_replica(decode_config, STOCK_ENGINE_PATH, tmp_path / "stock")
    single = start_replica(decode_config, SINGLE_PROCESS_ENGINE_PATH, tmp_path / "single")
    print(f"stock {stock}\nsingle process {single}\n{time.perf_counter() - started:.0f} s")

    assert processes_per_replica(stock) == 4, stock
    assert processes_per_replica(single) == 2, single
    replica = {pid for role, pid in single if role == "replica"}
    assert {pid for role, pid in single if not role.startswith("executor:")} == replica
    assert ("executor:UniProcExecutor", next(iter(replica))) in single


def test_on_a_node_of_two_gpus_the_engine_starts_as_ray_serve_llm_does(decode_config, tmp_path):
    # Which of the two GPUs the bundle holds is Ray's to say: only a GPU task learns it, so the engine
    # keeps Ray Serve LLM's start (its task and Ray's executor pin the GPU).
    import sys

    sys.path.insert(0, str(HERE))
    from probe_engine import SINGLE_PROCESS_ENGINE_PATH

    records = start_replica(decode_config, SINGLE_PROCESS_ENGINE_PATH, tmp_path / "two-gpus", gpus=2)
    assert processes_per_replica(records) == 4, records
