"""Ray Serve LLM's vLLM engine, started in two processes instead of four.

A stock replica of one GPU starts four processes, each importing the serving stack (about 22 s each on
the lab's host, docs/PROVEN.md#serve-replica-start): the replica actor; a Ray worker for two tasks
Ray Serve LLM sends into the replica's placement group (the node initialisation, which downloads the
model's files, and the engine config, because a GPU accelerator `requires_remote_initialization`,
core/configs/accelerators.py); vLLM's engine core; and vLLM's Ray worker, because Ray Serve LLM sets
`distributed_executor_backend` to "ray" for every GPU engine (engines/vllm/vllm_models.py
`get_initialization_kwargs`, which refuses any other value in `engine_kwargs`). Read in Ray 2.58.0
and 2.60.0.

This subclass, which Ray Serve LLM builds when `RAYLLM_VLLM_ENGINE_CLS` names it
(core/server/llm_server.py `_get_default_engine_class`; `build_pd_openai_app` passes its prefill and
decode servers no engine class, so this is the hook that reaches them, not `LLMConfig.server_cls`),
does both tasks' work in the replica itself and hands vLLM its single-process executor ("uni":
`UniProcExecutor` runs the GPU worker inside the engine core). Left: the replica actor and the engine
core (vLLM 0.26's AsyncLLM always starts its core in a process of its own). Unchanged: the placement
group Serve reserves (its bundle still holds the GPU and the phase's resource, so the autoscaler and
the scheduler see the same replica), NIXL's side channel (Ray Serve LLM sets its host and port in the
replica's environment, engines/vllm/kv_transfer/nixl.py, which the engine core inherits), and the GPU
the engine sees: Ray leaves CUDA_VISIBLE_DEVICES as the pod set it for an actor that holds no GPU
(`ray._private.utils.set_visible_accelerator_ids` skips a resource with no ids, ray#54868), which on a
node of one GPU is that GPU.

It applies only where that holds without asking Ray which GPU the bundle got: one GPU per engine
(tensor × pipeline parallel 1, no data parallel) on a Ray node of at most one GPU. Anything else starts
as Ray Serve LLM starts it. The engine config is built exactly as the stock task builds it (so vLLM
takes the same decisions, e.g. async scheduling, as with Ray's executor) and only its executor is
swapped: the two starts differ in processes, not in the engine.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
from ray.llm._internal.serve.core.configs.accelerators import GPUAccelerator
from ray.llm._internal.serve.engines.vllm import vllm_engine as ray_vllm_engine
from ray.llm._internal.serve.engines.vllm.vllm_engine import VLLMEngine
from ray.llm._internal.serve.utils import node_initialization_utils

SINGLE_PROCESS_EXECUTOR = "uni"
LOG = logging.getLogger("ray.serve")


def node_gpus() -> float:
    """The GPUs Ray counts on the node this process runs on."""
    node_id = ray.get_runtime_context().get_node_id()
    return next((node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node["NodeID"] == node_id), 0.0)


class SingleProcessVLLMEngine(VLLMEngine):
    """VLLMEngine whose start, for one GPU on a one-GPU node, runs no Ray task and no vLLM Ray worker."""

    def _single_process(self) -> bool:
        engine_config = self.llm_config.get_engine_config()
        return (isinstance(engine_config.accelerator, GPUAccelerator) and engine_config.num_devices == 1
                and engine_config.engine_kwargs.get("data_parallel_size", 1) == 1 and node_gpus() <= 1)

    async def start(self) -> None:
        self._in_replica = not self._running and self._single_process()
        if self._in_replica:
            context = self.llm_config.get_or_create_callback().ctx
            if context.run_init_node:
                # Stock: one Ray task per node of the placement group, which is this node (one bundle).
                # It runs before Ray Serve LLM's node-init callbacks here; the stack configures none.
                # A thread: the download must not stall the replica's event loop.
                await asyncio.to_thread(node_initialization_utils.initialize_remote_node, self.llm_config)
                context.run_init_node = False
        else:
            LOG.info("Starting the vLLM engine as Ray Serve LLM does: it needs more than one GPU or its "
                     "node has several")
        await super().start()

    def _prepare_engine_config(self, callback_ctx: Any) -> tuple[Any, Any, Any]:
        if not self._in_replica:
            return super()._prepare_engine_config(callback_ctx)
        engine_args, engine_config = ray_vllm_engine._get_vllm_engine_config(self.llm_config)
        engine_args.distributed_executor_backend = SINGLE_PROCESS_EXECUTOR
        engine_config.parallel_config.distributed_executor_backend = SINGLE_PROCESS_EXECUTOR
        frontend_args = ray_vllm_engine.FrontendArgs(**self.llm_config.get_engine_config().frontend_kwargs)
        LOG.info("vLLM engine config built in the replica; executor %r, no Ray worker", SINGLE_PROCESS_EXECUTOR)
        return engine_args, frontend_args, engine_config
