"""Which Ray Serve LLM / vLLM the real-validator tier checks serveConfigV2 with, and why it may
differ from the Ray inside the image the stack deploys.

The decision (team, 2026-11): keep the Ray LLM Deep Learning Container image (Ray 2.58.0 /
vLLM 0.26.0), because it is the image that carries the EFA pieces NIXL's LIBFABRIC backend needs
(libfabric with the efa provider, aws-ofi-nccl, NIXL cu13) — an image we built ourselves around a
newer Ray would have to re-create and re-prove that stack. CI validates the config's SHAPE with
Ray 2.60.0 / vLLM 0.29.0, because that pairing installs on a CPU runner in minutes from the
torch 2.13.0 CPU wheel, while Ray 2.58 needs vLLM 0.26 → torch 2.11.0, a multi-GB download on
every CI run. The remaining gap (a key 2.60 accepts but 2.58 does not, or the reverse) is closed
by running the same rendered config on Ray 2.58 in the GPU lab before a release.

What makes the shape check meaningful across the gap: the rendered app uses the keys the AWS
reference deployment ran on the 2.58 image (docs/SOURCES.md#reference-serve-config: LLMConfig model_loading_config,
engine_kwargs with max_model_len, dtype, gpu_memory_utilization, enforce_eager and
kv_transfer_config {kv_connector, kv_role, kv_connector_extra_config.backends} (the reference also set
engine_id; the render leaves it to Ray, see serve_app/config.py),
deployment_config), plus long-standing LLMConfig / Serve fields (accelerator_type,
tensor/pipeline_parallel_size, autoscaling_config). The PD-args keys 2.60 removed
(proxy_cls_config, proxy_deployment_config) are refused by the 2.60 validator, so the app cannot
come to depend on them. What 2.60 accepts and 2.58 would not is the residual risk the GPU lab run
covers.

A pairing is accepted here only with its reason; `tests/validation/test_real_validator_versions.py`
fails when the installed validator, the pinned validator or the image's Ray move without this
table being updated — the moment someone has to re-decide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from facts.images import RAY_LLM_DLC_V1_0, ServingStack

# What CI installs (`pip install 'ray[serve,llm]==2.60.0'`, which brings these) and runs the
# validator tier with (docs/SOURCES.md#version-pins).
VALIDATOR = ServingStack(
    ray="2.60.0", vllm="0.29.0", torch="2.13.0", nixl="1.3.2", cuda="none (CPU torch wheel)",
    python="3.11", source="CI venv: ray[serve,llm]==2.60.0 on the torch 2.13.0 CPU wheel",
)


@dataclass(frozen=True)
class AcceptedPairing:
    """An image serving stack the project may deploy while CI validates with `validator`."""

    image: ServingStack
    validator: ServingStack
    reason: str
    proven_on_image_by: str


# Keyed by the Ray version inside the image.
ACCEPTED_PAIRINGS: Mapping[str, AcceptedPairing] = MappingProxyType({
    RAY_LLM_DLC_V1_0.ray: AcceptedPairing(
        image=RAY_LLM_DLC_V1_0,
        validator=VALIDATOR,
        reason=(
            "Ray LLM DLC image kept for its EFA stack (libfabric efa provider, aws-ofi-nccl, NIXL "
            "cu13); Ray 2.58's vLLM 0.26 needs torch 2.11.0, a multi-GB install per CI run, so CI "
            "checks the config shape with Ray 2.60.0 / vLLM 0.29.0 on the CPU torch 2.13.0 wheel."
        ),
        # Not the image itself: its Python packages (pip bundle, lab/build-bundle.sh) on a GPU host,
        # KV over UCX, so LIBFABRIC/EFA remains unproven until a cluster run (`pdctl verify-transport`).
        proven_on_image_by=("GPU lab run (docs/PROVEN.md#one-h200, 2026-11-29) of the rendered serveConfigV2 with the "
                            "image's Ray 2.58.0 / vLLM 0.26.0 / NIXL 1.3.1"),
    ),
})


def accepted_pairing(image_ray: str) -> AcceptedPairing | None:
    """The accepted pairing for an image's Ray version, or None when nobody has decided one."""
    return ACCEPTED_PAIRINGS.get(image_ray)


__all__ = ["ACCEPTED_PAIRINGS", "VALIDATOR", "AcceptedPairing", "accepted_pairing"]
