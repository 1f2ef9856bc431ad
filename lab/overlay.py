"""The single-host lab overlay: the few changes that let the stack's own serve config run on one GPU box.

The stack renders per-phase `LLMConfig` dicts for EKS (`serve_app.render.pd_serving_args`). On one
host with one GPU, a handful of settings cannot stay as rendered, and nothing else may change:

| key (per LLMConfig)                                       | lab value                      | why |
|-----------------------------------------------------------|--------------------------------|-----|
| model_loading_config.model_source (+ tokenizer_source)    | local model directory          | no model hub on the lab host |
| engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends | ["UCX"]              | no EFA on one host; LIBFABRIC needs it |
| placement_group_config.bundle_per_worker.GPU / .CPU       | f, 1                           | f = 1 / engines on the GPU (1: a whole GPU per engine); the phase's Ray resource (pd-prefill / pd-decode) stays, and the lab's Ray advertises both |
| engine_kwargs.gpu_memory_utilization (shared GPU only)    | 0.9 / engines on the GPU       | vLLM refuses to start when free memory < this share of the card |
| engine_kwargs.gpu_memory_utilization (a GPU's budget)     | that GPU's bytes / this card's | each engine held to the deployment's GPU memory (lab/probe.py) |
| engine_kwargs.kv_cache_memory_bytes (unless None)         | fixed bytes                    | memory profiling is wrong with another engine on the GPU |
| engine_kwargs.gdn_prefill_backend (hybrid models)         | "triton"                       | the L4's Gated-DeltaNet kernel; vLLM picks FlashInfer's on Hopper |
| engine_kwargs.seed                                        | fixed seed                     | reproducible runs |
| engine_kwargs.load_format                                 | "dummy" (shaped models only)   | random weights of a real shape, no 16 GB checkpoint |
| runtime_env.env_vars.VLLM_DP_MASTER_PORT / VLLM_NIXL_SIDE_CHANNEL_PORT | distinct per engine | engines on one host otherwise race for the same torch.distributed / NIXL port |
| experimental_configs.NIXL_SIDE_CHANNEL_PORT_BASE (instead of the NIXL env var, when the phase may run several replicas) | the engine's NIXL window | Ray Serve LLM adds each replica's rank: a 2nd replica of the phase gets the next port |
| accelerator_type (only if rendered)                       | removed                        | the lab GPU is not the cloud's GPU type |

A phase that may run several replicas (`replicas` > 1: autoscaling up to that many, or a fixed count)
has one LLMConfig for all of them, so one environment: a fixed NIXL port there would be bound twice
on one host. Its replicas share VLLM_DP_MASTER_PORT: vLLM scans from it for a free port, and a
replica Serve adds later finds the first one's port taken and moves on (only engines starting at
the same moment race).

With one engine per GPU (`engines_on_gpu=1`, the two-GPU lab: prefill and decode on separate GPUs),
the bundle is a whole GPU, the rendered `gpu_memory_utilization` stays, and `kv_cache_memory_bytes=None`
leaves the KV cache to vLLM's memory profiling, as on EKS.

`overlay_values` lists exactly the keys `apply_lab_overlay` sets for a given config (with their
values), so a test can prove that the before/after difference is that list and nothing more.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from serve_app.errors import ConfigError

GiB = 1024 ** 3
LAB_KV_BACKENDS = ("UCX",)
# vLLM's own default share of the card, split between the engines that share it.
WHOLE_CARD_MEMORY_UTILIZATION = 0.90
# First ports of the per-engine windows, PORT_STRIDE apart so no two engines can meet.
# vLLM 0.26's Ray executor (v2) picks its torch.distributed TCPStore port by scanning 32 ports from
# VLLM_DP_MASTER_PORT + 100 — without data parallelism that is 0 + 100 for every engine, so engines
# sharing a host race for ports 100..131 (seen on the H200: EADDRINUSE, replicas restarting).
# NIXL binds its handshake listener on VLLM_NIXL_SIDE_CHANNEL_PORT (+ TP rank); Ray Serve LLM's
# default (20000 + replica rank) is the same for a prefill and a decode replica on one host.
DP_MASTER_PORT_BASE = 30000
NIXL_SIDE_CHANNEL_PORT_BASE = 21000
PORT_STRIDE = 100
# Ray Serve LLM's key for a phase's first NIXL port (engines/vllm/kv_transfer/nixl.py, Ray 2.58 and 2.60):
# replica r listens on base + r × GPUs per replica.
NIXL_PORT_BASE_KEY = "NIXL_SIDE_CHANNEL_PORT_BASE"

KV_BACKENDS_PATH = "engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends"


@dataclass(frozen=True)
class LabOverlay:
    """What the lab host imposes on one engine's LLMConfig.

    engine_slot: 0..engines_on_host-1, distinct per engine on the host (picks its port windows).
    engines_on_host: engines on the whole host (several GPUs); defaults to engines_on_gpu.
    replicas: the most replicas this LLMConfig runs at once (its deployment's max); they share the slot.
    kv_cache_memory_bytes: None leaves the KV cache size to vLLM's memory profiling (whole GPU only).
    """

    model_path: str
    engines_on_gpu: int
    engine_slot: int
    kv_cache_memory_bytes: int | None = 4 * GiB
    seed: int = 0
    dummy_weights: bool = False
    kv_backends: tuple[str, ...] = LAB_KV_BACKENDS
    engines_on_host: int | None = None
    replicas: int = 1
    # The deployment GPU's memory as a share of this card (lab/probe.py budget_utilization): each engine
    # is held to that instead of an equal split of the card.
    budget_utilization: float | None = None
    kernel_kwargs: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= PORT_STRIDE:
            raise ConfigError("replicas", self.replicas, f"1..{PORT_STRIDE} (one port window per engine slot)")
        if self.engines_on_gpu < 1:
            raise ConfigError("engines_on_gpu", self.engines_on_gpu, "at least 1")
        if self.host_engines < self.engines_on_gpu:
            raise ConfigError("engines_on_host", self.engines_on_host, f"at least engines_on_gpu ({self.engines_on_gpu})")
        if not 0 <= self.engine_slot < self.host_engines:
            raise ConfigError("engine_slot", self.engine_slot, f"0..{self.host_engines - 1}")
        if self.kv_cache_memory_bytes is None and self.shares_gpu:
            raise ConfigError("kv_cache_memory_bytes", None, "a positive byte count when engines share a GPU",
                              "memory profiling is wrong with another engine on the GPU")
        if self.kv_cache_memory_bytes is not None and self.kv_cache_memory_bytes <= 0:
            raise ConfigError("kv_cache_memory_bytes", self.kv_cache_memory_bytes, "a positive byte count")

    @property
    def host_engines(self) -> int:
        return self.engines_on_host if self.engines_on_host is not None else self.engines_on_gpu

    @property
    def shares_gpu(self) -> bool:
        return self.engines_on_gpu > 1

    @property
    def gpu_share(self) -> float | int:
        """Ray GPU fraction of each engine's bundle; floored to Ray's 1e-4 grain so the shares fit; 1: whole GPU."""
        if not self.shares_gpu:
            return 1
        return math.floor(10_000 / self.engines_on_gpu) / 10_000

    @property
    def gpu_memory_utilization(self) -> float:
        return math.floor(100 * WHOLE_CARD_MEMORY_UTILIZATION / self.engines_on_gpu) / 100

    @property
    def dp_master_port(self) -> int:
        return DP_MASTER_PORT_BASE + PORT_STRIDE * self.engine_slot

    @property
    def nixl_side_channel_port(self) -> int:
        return NIXL_SIDE_CHANNEL_PORT_BASE + PORT_STRIDE * self.engine_slot


def _has_kv_transfer(config: Mapping[str, Any]) -> bool:
    return "kv_transfer_config" in config.get("engine_kwargs", {})


def _check_single_gpu(config: Mapping[str, Any]) -> None:
    engine = config.get("engine_kwargs", {})
    gpus = engine.get("tensor_parallel_size", 1) * engine.get("pipeline_parallel_size", 1)
    if gpus != 1:
        raise ConfigError("tensorParallelSize/pipelineParallelSize", gpus,
                          "1 GPU per replica for the single-GPU lab",
                          "the lab shares one GPU between the engines")


def overlay_values(config: Mapping[str, Any], overlay: LabOverlay) -> dict[str, Any]:
    """{dotted key path: lab value} for every key the overlay sets on `config` (None = removed)."""
    values: dict[str, Any] = {"model_loading_config.model_source": overlay.model_path}
    if "tokenizer_source" in config.get("model_loading_config", {}):
        values["model_loading_config.tokenizer_source"] = overlay.model_path
    if _has_kv_transfer(config):
        values[KV_BACKENDS_PATH] = list(overlay.kv_backends)
    if overlay.gpu_share != 1:
        values["placement_group_config.bundle_per_worker.GPU"] = overlay.gpu_share
    values["placement_group_config.bundle_per_worker.CPU"] = 1
    if overlay.budget_utilization is not None:
        values["engine_kwargs.gpu_memory_utilization"] = overlay.budget_utilization
    elif overlay.shares_gpu:
        values["engine_kwargs.gpu_memory_utilization"] = overlay.gpu_memory_utilization
    for key, value in overlay.kernel_kwargs:
        values[f"engine_kwargs.{key}"] = value
    if overlay.kv_cache_memory_bytes is not None:
        values["engine_kwargs.kv_cache_memory_bytes"] = overlay.kv_cache_memory_bytes
    values["engine_kwargs.seed"] = overlay.seed
    if overlay.dummy_weights:
        values["engine_kwargs.load_format"] = "dummy"
    values["runtime_env.env_vars.VLLM_DP_MASTER_PORT"] = str(overlay.dp_master_port)
    if _has_kv_transfer(config) and overlay.replicas > 1:
        values[f"experimental_configs.{NIXL_PORT_BASE_KEY}"] = overlay.nixl_side_channel_port
    elif _has_kv_transfer(config):
        values["runtime_env.env_vars.VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(overlay.nixl_side_channel_port)
    if "accelerator_type" in config:
        values["accelerator_type"] = None
    return values


def nixl_ports(config: Mapping[str, Any]) -> range | None:
    """The NIXL side-channel ports the overlay gave one phase's engines (None: no KV transfer)."""
    env = config.get("runtime_env", {}).get("env_vars", {})
    first = env.get("VLLM_NIXL_SIDE_CHANNEL_PORT", config.get("experimental_configs", {}).get(NIXL_PORT_BASE_KEY))
    return None if first is None else range(int(first), int(first) + PORT_STRIDE)


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(leaf, None)
    else:
        node[leaf] = copy.deepcopy(value)


def apply_lab_overlay(config: Mapping[str, Any], overlay: LabOverlay) -> dict[str, Any]:
    """A copy of one phase's rendered LLMConfig dict with the lab overlay applied (input untouched)."""
    _check_single_gpu(config)
    result = copy.deepcopy(dict(config))
    for path, value in overlay_values(config, overlay).items():
        _set_path(result, path, value)
    return result


def colocated_config(pd_phase_config: Mapping[str, Any]) -> dict[str, Any]:
    """The colocated baseline: one rendered PD phase's LLMConfig without its KV transfer.

    Take it from the rendered config (before the overlay); the overlay then adds no NIXL port.
    """
    result = copy.deepcopy(dict(pd_phase_config))
    result.get("engine_kwargs", {}).pop("kv_transfer_config", None)
    return result


def leaf_items(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf; lists and empty dicts are leaves."""
    if isinstance(data, Mapping) and data:
        for key, value in data.items():
            yield from leaf_items(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


def changed_paths(before: Mapping[str, Any], after: Mapping[str, Any]) -> set[str]:
    """Dotted paths of the leaves that differ between two nested dicts (added, removed or changed)."""
    old, new = dict(leaf_items(before)), dict(leaf_items(after))
    return {path for path in old.keys() | new.keys() if old.get(path, _MISSING) != new.get(path, _MISSING)}


_MISSING = object()
