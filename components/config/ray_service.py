"""The RayService's settings: namespace, name, image and its Ray version, how it starts and upgrades."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from components.config.names import DNS_1035_LABEL, DNS_1123_LABEL
from components.scheduling import RESERVED_NAMESPACES
from facts.images import (
    DLC_TAG,
    FLOATING_TAGS,
    PUBLIC_DLC_REPOSITORY,
    ServingStack,
    default_ray_image,
    serving_stack,
    split_image,
)
from serve_app.config import HTTP_FRONTS, HttpFront
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackKeyModel
from serve_app.targets import RuntimeSettings

# KubeRay's ValidateRayServiceMetadata: at most 47 characters and a DNS-1035 label, because it
# derives Service and RayCluster names from it.
MAX_RAY_SERVICE_NAME_LENGTH = 47
INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
# The first start pulls a multi-GB Ray LLM image on three nodes and loads the checkpoint (about
# 145 s for the reference model); past the timeout the RayService is terminal until recreated.
MIN_INITIALIZING_TIMEOUT_SECONDS = 10 * 60
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_DURATION_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
# KubeRay accepts None, NewCluster and NewClusterWithIncrementalUpgrade. Default None: the GPU node
# group is fixed (desired = min = max), so NewCluster's blue/green upgrade would park a second
# RayCluster Pending until someone adds GPU nodes, while `pulumi up` reports success. With None,
# serveConfigV2 changes are applied in place by Ray Serve, and the InferenceService component
# replaces the RayService when the cluster spec changes (a short, visible outage instead of a
# silent stuck upgrade).
UPGRADE_STRATEGIES_THIS_STACK_RUNS = ("None", "NewCluster")


def duration_seconds(value: str) -> float | None:
    """Seconds in a Go duration ("30m", "1h30m") or integer seconds, as KubeRay parses the annotation."""
    if re.fullmatch(r"\d+", value):
        return float(value)
    parts = _GO_DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * _GO_DURATION_UNIT_SECONDS[unit] for number, unit in parts)


class RayServiceSettings(StackKeyModel):
    """Where the RayService runs, which image it starts and how it starts and upgrades."""

    namespace: str = Field(alias="namespace", description=(
        "a DNS-1123 label of at most 63 characters, other than " + ", ".join(RESERVED_NAMESPACES)))
    name: str = Field(alias="rayServiceName", description=(
        f"a DNS-1035 label of at most {MAX_RAY_SERVICE_NAME_LENGTH} characters (lowercase letters, digits "
        "and '-', starting with a letter, not ending with '-')"))
    image: str = Field(alias="rayImage", description=(
        f'"" (the Ray LLM DLC image of the region) or an image pinned by a version tag or @sha256 digest, '
        f"e.g. {PUBLIC_DLC_REPOSITORY}:{DLC_TAG}"))
    ray_version: str = Field(alias="rayVersion", description=(
        '"" (the version of a known image) or the Ray release inside the image, e.g. 2.58.0'))
    initializing_timeout: str = Field(alias="initializingTimeout", description=(
        f"a Go duration (e.g. '30m', '1h') or integer seconds, at least {MIN_INITIALIZING_TIMEOUT_SECONDS // 60}m"))
    upgrade_strategy: str = Field(alias="upgradeStrategy", description=", ".join(UPGRADE_STRATEGIES_THIS_STACK_RUNS))
    image_carries_runai_streamer: bool = Field(alias="rayImageCarriesRunaiStreamer", description="true or false")
    compile_cache_in_s3: bool = Field(alias="compileCacheInS3", description="true or false")
    gcs_fault_tolerance: bool = Field(alias="gcsFaultTolerance", description="true or false")
    # Every Ray container's environment, so it is the cluster's setting, not the serve app's.
    http_front: HttpFront = Field(alias="httpFront", description=" or ".join(HTTP_FRONTS))

    @field_validator("namespace")
    @classmethod
    def _serving_namespace(cls, value: str) -> str:
        if len(value) > 63 or not DNS_1123_LABEL.match(value) or value in RESERVED_NAMESPACES:
            raise ConfigError(cls.key("namespace"), value, cls.model_fields["namespace"].description or "",
                              "the stack creates this namespace and labels it to admit privileged EFA workers")
        return value

    @field_validator("name")
    @classmethod
    def _ray_service_name(cls, value: str) -> str:
        if len(value) > MAX_RAY_SERVICE_NAME_LENGTH or not DNS_1035_LABEL.match(value):
            raise ConfigError(cls.key("name"), value, cls.model_fields["name"].description or "",
                              "KubeRay refuses other names and derives Service and RayCluster names from it")
        return value

    @field_validator("initializing_timeout")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        seconds = duration_seconds(value)
        if seconds is None:
            raise ValueError("not a duration")
        if seconds < MIN_INITIALIZING_TIMEOUT_SECONDS:
            raise ConfigError(
                cls.key("initializing_timeout"), value, cls.model_fields["initializing_timeout"].description or "",
                "the first start pulls the Ray LLM image and loads the model; past the timeout KubeRay marks "
                "the RayService failed for good and it must be recreated")
        return value

    @field_validator("upgrade_strategy")
    @classmethod
    def _strategy_this_stack_runs(cls, value: str) -> str:
        if value not in UPGRADE_STRATEGIES_THIS_STACK_RUNS:
            why = None
            if value == "NewClusterWithIncrementalUpgrade":
                why = ("it needs the Ray autoscaler, a Gateway API implementation and clusterUpgradeOptions, "
                       "none of which this stack deploys")
            raise ConfigError(cls.key("upgrade_strategy"), value, ", ".join(UPGRADE_STRATEGIES_THIS_STACK_RUNS), why)
        return value

    @field_validator("image", "ray_version", mode="before")
    @classmethod
    def _trimmed(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    def resolved(self, region: str) -> RayServiceSettings:
        """The same settings with the image ("" = the region's DLC) and its Ray version filled in;
        refuses an unpinned image and a Ray version the image does not carry."""
        image = self.image or default_ray_image(region)
        stack = _image_serving_stack(image, self.ray_version or None)
        return self.model_copy(update={"image": image, "ray_version": stack.ray if stack else self.ray_version})


# The settings serve_app's checks name when they refuse the image's Ray or the HTTP front.
RUNTIME_SETTINGS = RuntimeSettings(RayServiceSettings.field("ray_version"), RayServiceSettings.field("http_front"))


def _image_serving_stack(image: str, ray_version: str | None) -> ServingStack | None:
    """Refuse unpinned images and Ray versions that disagree with the image; the image's known
    serving stack, or None for an image this project has no facts for (its version was given)."""
    image_key, version_key = RayServiceSettings.key("image"), RayServiceSettings.key("ray_version")
    repository, tag, digest = split_image(image)
    if not repository or any(c.isspace() for c in image):
        raise ConfigError(image_key, image, f"an image reference such as {PUBLIC_DLC_REPOSITORY}:{DLC_TAG}")
    if digest is None and (tag is None or tag in FLOATING_TAGS):
        raise ConfigError(
            image_key, image, "an image pinned by a version tag or @sha256 digest",
            f"tag {tag or '(none)'} moves to new builds; a node restart could bring up a different Ray")
    if ray_version is not None and not re.fullmatch(r"\d+\.\d+\.\d+", ray_version):
        raise ConfigError(version_key, ray_version, "a Ray release such as 2.60.0")
    stack = serving_stack(image)
    if stack is None and ray_version is None:
        raise ConfigError(version_key, "", "the Ray version inside the image, e.g. 2.58.0",
                          f"{image} is not an image this project knows, so its Ray version must be given")
    if stack is not None and ray_version is not None and ray_version != stack.ray:
        raise ConfigError(version_key, ray_version, f"{stack.ray} (or empty)", f"{image} contains Ray {stack.ray}")
    return stack
