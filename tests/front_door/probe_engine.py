"""Ray Serve LLM's own vLLM engine start (stock, or the stack's single-process subclass) on a CPU-only Ray
with one declared GPU, each process that takes part writing its pid: the replica, Ray Serve LLM's
node-initialisation and engine-config tasks (wherever Ray runs them), and the executor class vLLM's
`Executor.get_class` picks from the engine config. What a CPU cannot do is stood in for, in place: vLLM's
`create_engine_config` (a config carrying the executor Ray Serve LLM's own kwargs ask for), the model
download, and AsyncLLM itself (the start stops where Ray Serve LLM would construct it). Everything else
of `VLLMEngine.start` runs as on the GPU host."""

from __future__ import annotations

import os
from types import SimpleNamespace

from ray.llm._internal.serve.engines.vllm import vllm_engine as ray_vllm_engine
from ray.llm._internal.serve.engines.vllm.vllm_engine import VLLMEngine
from ray.llm._internal.serve.utils import node_initialization_utils

from front_door.engine import SingleProcessVLLMEngine

PIDS_FILE_ENV = "ENGINE_PROBE_PIDS_FILE"
STOCK_ENGINE_PATH = "probe_engine:StockProbe"
SINGLE_PROCESS_ENGINE_PATH = "probe_engine:SingleProcessProbe"


def record(role: str) -> None:
    with open(os.environ[PIDS_FILE_ENV], "a", encoding="utf-8") as pids:
        pids.write(f"{role} {os.getpid()}\n")


def node_init_stand_in(llm_config):
    record("node-init")
    return llm_config.get_engine_config().actual_hf_model_id


def engine_config_stand_in(llm_config, *, device_type=None):
    from transformers import PretrainedConfig

    record("engine-config")
    kwargs = llm_config.get_engine_config().get_initialization_kwargs()
    backend = kwargs["distributed_executor_backend"]
    args = SimpleNamespace(distributed_executor_backend=backend, enable_log_requests=False, disable_log_stats=True)
    config = SimpleNamespace(
        parallel_config=SimpleNamespace(distributed_executor_backend=backend),
        model_config=SimpleNamespace(model=kwargs["model"], hf_config=PretrainedConfig(architectures=["Probe"])))
    return args, config


# Ray Serve LLM looks both up by module attribute when it starts a task, so the tasks run these (by reference,
# in whichever process Ray gives them).
node_initialization_utils.initialize_remote_node = node_init_stand_in
ray_vllm_engine._get_vllm_engine_config = engine_config_stand_in


class _Started(Exception):
    pass


class _Healthy:
    async def check_health(self) -> None:
        return None


class _Probe:
    async def start(self) -> None:
        record("replica")
        try:
            await super().start()  # type: ignore[misc]
        except _Started:
            self._engine_client = _Healthy()
            self._running = True

    def _start_async_llm_engine(self, engine_args, engine_config, placement_group):
        from vllm.v1.executor.abstract import Executor

        record(f"executor:{Executor.get_class(engine_config).__name__}")
        raise _Started


class StockProbe(_Probe, VLLMEngine):
    pass


class SingleProcessProbe(_Probe, SingleProcessVLLMEngine):
    pass
