"""How long Ray Serve LLM takes to start one replica of the stack's decode engine on this host's GPU, as
Ray Serve LLM starts it and with the stack's single-process engine (`singleProcessEngine`,
front_door/engine.py), alternately, each start in a fresh Ray so each has its own logs.

The replica is the stack's decode LLMConfig as rendered (its NIXL connector included: its side channel
starts as on EKS), held to the deployment GPU's memory (lab/probe.py `budget_utilization`, the L4's by
default) with the KV cache fixed where asked (`--kv-cache-bytes plan`: what `kvCacheFromPlan` renders),
dummy weights of the model's architecture, the L4's kernel path, one replica under `build_openai_app`.

Per start, seconds from `serve.run` (what Serve's controller acts on at once) to: vLLM's engine init
beginning (its `init engine ... took X s` line's time less X: the replica start docs/PROVEN.md#serve-replica-start
counts), and the app answering (a completion of 8 tokens). Also: the Ray and vLLM processes alive once
it serves (name and pid), which shows the processes each start left running, and those holding GPU
memory (nvidia-smi). Raw: each start's Ray logs.
Written to `replica-start.json` after every start, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.apps import STATIC_ENV, phase_resources
from lab.overlay import LabOverlay, apply_lab_overlay
from lab.probe import L4_KERNEL_KWARGS, compile_cache_env
from lab.provenance import gpu, gpu_memory_used_mib, provenance, versions
from serve_app.render import ENGINE_CLASS_ENV, SINGLE_PROCESS_ENGINE_CLASS

ENGINES: Mapping[str, str | None] = {"stock": None, "single-process": SINGLE_PROCESS_ENGINE_CLASS}
APP = "replica-start"
HTTP_PORT = 8000
RAY_LOGS = Path("/tmp/ray/session_latest/logs")
# vLLM 0.26 v1/engine/core.py, in the engine core's output (Ray's worker-*.out/err files).
INIT_LINE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)[^\n]*init engine \(profile, create kv cache, warmup model\) "
                       r"took ([\d.]+) s")
# Processes worth naming once the replica serves: Ray's actors and tasks, vLLM's engine core.
PROCESS_MARKERS = ("ray::", "VLLM::", "default_worker.py")
IDLE_GPU_MEMORY_MIB = 2048
# The replica's bundle and the ingress take a CPU each: declared, so a small host can still place them.
MIN_RAY_CPUS = 4


def replica_config(decode_config: Mapping[str, Any], *, model_path: str, utilization: float,
                   kv_cache_bytes: int | None) -> dict[str, Any]:
    """The stack's rendered decode LLMConfig as one replica on this host, held to the deployment GPU's memory."""
    overlay = LabOverlay(model_path=model_path, engines_on_gpu=1, engine_slot=0, kv_cache_memory_bytes=kv_cache_bytes,
                         dummy_weights=True, budget_utilization=utilization,
                         kernel_kwargs=tuple(L4_KERNEL_KWARGS.items()))
    config = apply_lab_overlay(decode_config, overlay)
    config["deployment_config"] = {"num_replicas": 1}
    return config


def init_begins(log_text: str, year: int) -> datetime.datetime | None:
    """When vLLM's engine init began (local time), from its `init engine ... took X s` line; None: no init."""
    found = INIT_LINE.search(log_text)
    if found is None:
        return None
    done = datetime.datetime.strptime(f"{year}-{found.group(1)}", "%Y-%m-%d %H:%M:%S")
    return done - datetime.timedelta(seconds=float(found.group(2)))


def engine_order(engines: list[str], starts: int) -> list[str]:
    """`starts` starts cycling through `engines`: alternate, so neither always meets the colder caches."""
    return [engines[i % len(engines)] for i in range(starts)]


def _processes() -> list[str]:
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    return [line.strip()[:160] for line in listing.splitlines() if any(m in line for m in PROCESS_MARKERS)]


def _gpu_processes() -> list[str]:
    # Which processes hold a CUDA context, and how much: the single-process engine must leave the replica
    # without one (vLLM builds its config from NVML), or the replica's context eats the GPU's budget.
    try:
        return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as error:
        return [f"nvidia-smi: {error}"]


def _worker_logs() -> str:
    return "\n".join(path.read_text(errors="replace") for path in sorted(RAY_LOGS.glob("worker-*"))
                     if path.suffix in (".out", ".err"))


def _complete(model_id: str) -> bool:
    import httpx

    answer = httpx.post(f"http://127.0.0.1:{HTTP_PORT}/v1/completions", timeout=120,
                        json={"model": model_id, "prompt": "The capital of France is", "max_tokens": 8})
    return answer.status_code == 200


def start_once(config: dict[str, Any], engine: str, env: dict[str, str], out_dir: Path, index: int,
               timeout_s: float) -> dict[str, Any]:
    """One start in a fresh Ray; its timings, the processes alive once it serves, its logs archived."""
    import ray
    from ray import serve
    from ray.serve.llm import build_openai_app

    engine_env = {**env, **({ENGINE_CLASS_ENV: ENGINES[engine]} if ENGINES[engine] else {})}
    ray.init(num_cpus=max(MIN_RAY_CPUS, os.cpu_count() or 1), num_gpus=1, resources=phase_resources(),
             include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": engine_env})
    result: dict[str, Any] = {"engine": engine, "engine_class_env": engine_env.get(ENGINE_CLASS_ENV)}
    failure: list[BaseException] = []
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": HTTP_PORT})
        begun, begun_at = time.perf_counter(), datetime.datetime.now()

        def deploy() -> None:
            try:
                serve.run(build_openai_app({"llm_configs": [config]}), name=APP, route_prefix="/")
            except BaseException as error:  # reported below: the start failed
                failure.append(error)

        deploying = threading.Thread(target=deploy, daemon=True)
        deploying.start()
        deploying.join(timeout_s)
        if deploying.is_alive() or failure:
            result["error"] = repr(failure[0]) if failure else f"not running after {timeout_s:.0f} s"
        else:
            result["running_s"] = round(time.perf_counter() - begun, 1)
            result["completion_ok"] = _complete(config["model_loading_config"]["model_id"])
            result["serving_s"] = round(time.perf_counter() - begun, 1)
            result["processes"] = _processes()
            result["gpu_processes"] = _gpu_processes()
        began = init_begins(_worker_logs(), begun_at.year)
        result["to_init_s"] = None if began is None else round((began - begun_at).total_seconds(), 1)
    finally:
        archive = out_dir / f"replica-start-{index}-{engine}-ray-logs.tar.xz"
        with tarfile.open(archive, "w:xz") as tar:
            for path in [RAY_LOGS / "serve", *RAY_LOGS.glob("worker-*")]:
                if path.exists():
                    tar.add(path, arcname=path.name)
        serve.shutdown()
        ray.shutdown()
    _wait_for_gpu_memory()
    return result


def _wait_for_gpu_memory(timeout_s: float = 60) -> None:
    # The next start's vLLM refuses while the last one's memory is still held.
    until = time.perf_counter() + timeout_s
    while (used := gpu_memory_used_mib()) and max(used) > IDLE_GPU_MEMORY_MIB and time.perf_counter() < until:
        time.sleep(2)


def replica_starts(config: dict[str, Any], *, engines: list[str], starts: int, cache_dir: str, out_dir: Path,
                   deadline_s: float, min_start_s: float, timeout_s: float, facts: dict[str, Any]) -> dict[str, Any]:
    """Start the replica `starts` times alternating `engines`, while `min_start_s` is left before the deadline."""
    began = time.perf_counter()
    # The repository (front_door/, lab/) ahead of whatever the host's PYTHONPATH holds (the bundle's site).
    python_path = os.pathsep.join(filter(None, (os.getcwd(), os.environ.get("PYTHONPATH"))))
    env = {**STATIC_ENV, **compile_cache_env(cache_dir), "PYTHONPATH": python_path}
    data: dict[str, Any] = {"kind": "replica-start/1", "facts": facts, "config": config, "provenance": provenance(),
                            "versions": versions(), "gpu": gpu(), "starts": []}
    out_dir.mkdir(parents=True, exist_ok=True)
    for index, engine in enumerate(engine_order(engines, starts)):
        left = deadline_s - (time.perf_counter() - began)
        if left < min_start_s:
            data["stopped"] = f"{left:.0f} s left before the deadline, a start needs {min_start_s:.0f} s"
            break
        start = start_once(config, engine, env, out_dir, index, min(timeout_s, left - 15))
        data["starts"].append(start)
        print(f"start {index} {engine}: {json.dumps({k: v for k, v in start.items() if k != 'processes'})}",
              flush=True)
        (out_dir / "replica-start.json").write_text(json.dumps(data, indent=1))
    (out_dir / "replica-start.json").write_text(json.dumps(data, indent=1))
    return data
