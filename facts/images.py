"""Ray container images this project knows, and the serving stack inside each, as data.

Source: the Ray LLM Deep Learning Container (AWS sample "Ray LLM DLC" on EKS and its release notes,
REFERENCE.md §1), read 2026-11: `ray:serve-llm-cuda-v1.0` carries Ray 2.58.0, vLLM 0.26.0,
PyTorch 2.11.0, NIXL 1.3.1 (cu13, with libfabric/EFA and aws-ofi-nccl), CUDA 13.0.2, Python 3.13,
and sets FI_PROVIDER=efa. The same image is published in the DLC account's regional ECR
(763104351884 in the commercial regions) and in ECR Public.

KubeRay starts the head and workers from `rayImage` and needs the Ray version inside it
(`spec.rayClusterConfig.rayVersion`); a wrong one breaks the dashboard/Serve handshake in ways that
only show on the cluster. So: known image ⇒ its Ray version, and a given rayVersion must match;
unknown image ⇒ allowed, but rayVersion must be given. Floating tags (`latest`, no tag, or the
unversioned `serve-llm-cuda` alias) are refused: they change under a running cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from serve_app.errors import ConfigError

DLC_ACCOUNT = "763104351884"
DLC_REPOSITORY = "ray"
DLC_TAG = "serve-llm-cuda-v1.0"
PUBLIC_DLC_REPOSITORY = "public.ecr.aws/deep-learning-containers/ray"
# Tags that move to newer builds: never deploy them.
FLOATING_TAGS = ("latest", "serve-llm-cuda")

_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")


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


RAY_LLM_DLC_V1_0 = ServingStack(
    ray="2.58.0", vllm="0.26.0", torch="2.11.0", nixl="1.3.1", cuda="13.0.2", python="3.13",
    source="AWS Ray LLM DLC serve-llm-cuda-v1.0 (REFERENCE.md §1), read 2026-11",
)

# Image reference without registry host variance: a regex over the repository, and the exact tag.
_KNOWN: tuple[tuple[re.Pattern[str], str, ServingStack], ...] = (
    (re.compile(rf"^{DLC_ACCOUNT}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com/{DLC_REPOSITORY}$"), DLC_TAG,
     RAY_LLM_DLC_V1_0),
    (re.compile(rf"^{re.escape(PUBLIC_DLC_REPOSITORY)}$"), DLC_TAG, RAY_LLM_DLC_V1_0),
)


@dataclass(frozen=True)
class ResolvedRayImage:
    image: str
    ray_version: str
    stack: ServingStack | None  # None: an image this project has no facts for


def default_ray_image(region: str) -> str:
    """The Ray LLM DLC image in `region`'s ECR (the reference deployment's image)."""
    if not _REGION.match(region):
        raise ConfigError("aws:region", region, "an AWS region name such as us-east-1")
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


def check_ray_image(image: str, ray_version: str | None, *, image_setting: str = "rayImage",
                    version_setting: str = "rayVersion") -> ResolvedRayImage:
    """Refuse unpinned images and Ray versions that disagree with the image; return what deploys."""
    repository, tag, digest = split_image(image)
    if not repository or any(c.isspace() for c in image):
        raise ConfigError(image_setting, image, "an image reference such as "
                          f"{PUBLIC_DLC_REPOSITORY}:{DLC_TAG}")
    if digest is None and (tag is None or tag in FLOATING_TAGS):
        raise ConfigError(
            image_setting, image, "an image pinned by a version tag or @sha256 digest",
            f"tag {tag or '(none)'} moves to new builds; a node restart could bring up a different Ray")
    stack = serving_stack(image)
    ray_version = ray_version or None
    if stack is None:
        if ray_version is None:
            raise ConfigError(version_setting, "", "the Ray version inside the image, e.g. 2.58.0",
                              f"{image} is not an image this project knows, so its Ray version must be given")
        return ResolvedRayImage(image=image, ray_version=ray_version, stack=None)
    if ray_version is not None and ray_version != stack.ray:
        raise ConfigError(version_setting, ray_version, f"{stack.ray} (or empty)",
                          f"{image} contains Ray {stack.ray}")
    return ResolvedRayImage(image=image, ray_version=stack.ray, stack=stack)
