"""The real-validator tier: the exact config the `dev` and `prod` stacks deploy, checked by the
real Ray Serve LLM, vLLM and KubeRay validators (not by our own re-statement of their rules).

Source of the config: the RayService CustomResource that the real Pulumi program registers under
mocks (`offline.run_offline(stack)`), i.e. the object the cluster receives; its
`spec.serveConfigV2` YAML string is what KubeRay PUTs to the Serve REST API.

Cost: one offline program run per stack and one local Ray instance per session (a few CPUs, no
dashboard), reused by every build. Select the tier with `pytest -m validation`.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

# Every stack file in the repository, not a fixed list: a stack a platform team adds (staging, a
# second model) is validated by the real Ray/vLLM the moment its Pulumi.<stack>.yaml exists.
STACKS = tuple(sorted(p.name[len("Pulumi."):-len(".yaml")] for p in REPO_ROOT.glob("Pulumi.*.yaml")))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "validation: real-validator tier (Ray Serve LLM, vLLM, KubeRay CRD) on the config the stacks deploy",
    )


# --- The config each stack deploys ----------------------------------------------------------------


@dataclass(frozen=True)
class DeployedConfig:
    """What one stack sends to the cluster."""

    stack: str
    ray_service: dict[str, Any]  # the whole RayService object (ray.io/v1)
    # The project's config keys (unqualified) -> value as the program read it: the stack file's
    # value, or the Pulumi.yaml default.
    settings: dict[str, str]

    @property
    def serve_config(self) -> dict[str, Any]:
        """spec.serveConfigV2 parsed as KubeRay reads it before the PUT (a fresh copy per call)."""
        return yaml.safe_load(self.ray_service["spec"]["serveConfigV2"])

    @property
    def pd_app(self) -> dict[str, Any]:
        """The one application of serveConfigV2: import_path ray.serve.llm:build_pd_openai_app + args."""
        (app,) = self.serve_config["applications"]
        return app

    @property
    def image(self) -> str:
        head = self.ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]
        return head["template"]["spec"]["containers"][0]["image"]


@functools.cache
def deployed_config(stack: str, overrides: tuple[tuple[str, str], ...] = ()) -> DeployedConfig:
    """The RayService `run_offline(stack)` registers (one offline run per stack, and per set of
    `overrides` of its keys, per session)."""
    from components.config.declared import project_name
    from offline.harness import run_offline
    from pdctl.render import registered_ray_service

    run = run_offline(stack, overrides=dict(overrides))
    prefix = project_name() + ":"
    settings = {key[len(prefix):]: value for key, value in run.config.items() if key.startswith(prefix)}
    return DeployedConfig(stack, registered_ray_service(run), settings)


@pytest.fixture(scope="session", params=STACKS)
def deployed(request: pytest.FixtureRequest) -> DeployedConfig:
    return deployed_config(request.param)


@pytest.fixture
def dev() -> DeployedConfig:
    """The dev stack's config: the base the known-bad variants are mutated from."""
    return deployed_config("dev")


# The settings measured worthwhile on an H200 but off by default: Ray Serve's HAProxy front and Ray
# Serve LLM's direct streaming, which needs it.
# Direct streaming leaves no ingress to check keys: the front door off with it.
HAPROXY_AND_DIRECT_STREAMING = (("httpFront", "haproxy"), ("pdDirectStreaming", "true"), ("frontDoor", "none"))


@pytest.fixture
def dev_direct_streaming() -> DeployedConfig:
    """The dev stack with httpFront haproxy and pdDirectStreaming on."""
    return deployed_config("dev", HAPROXY_AND_DIRECT_STREAMING)


# --- Ray Serve: the controller's own build path ------------------------------------------------------


@pytest.fixture(scope="session")
def local_ray() -> Iterator[None]:
    """One small local Ray instance for the whole session.

    Building a Ray Serve LLM app reads `ray.get_runtime_context()`, which would otherwise start a
    Ray instance with every CPU and the dashboard on the first build.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # No token file written to ~/.ray for a throwaway local instance.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    if started:
        ray.shutdown()


@dataclass(frozen=True)
class BuiltDeployment:
    """One Serve deployment as the Serve controller would deploy it."""

    name: str
    num_replicas: int | None  # None when autoscaling
    autoscaling_bounds: tuple[int, int] | None  # (min_replicas, max_replicas)
    placement_group_bundles: list[dict[str, float]] | None
    ray_actor_options: dict[str, Any]

    @property
    def gpus_per_replica(self) -> float:
        """GPUs one replica reserves: its placement group's bundles, or the actor's own num_gpus."""
        if self.placement_group_bundles:
            return sum(bundle.get("GPU", 0) for bundle in self.placement_group_bundles)
        return self.ray_actor_options.get("num_gpus", 0)


@pytest.fixture(scope="session")
def build_serve_app(local_ray: None) -> Callable[[dict[str, Any]], dict[str, BuiltDeployment]]:
    """Build one serveConfigV2 application exactly as Ray Serve's controller does
    (ray.serve._private.application_state.build_serve_application in Ray 2.60): import the
    `import_path` builder, call it with `args`, flatten the bound graph with `build_app`, and
    refuse a second FastAPI ingress. Returns the deployments by name.

    No replica is started: this is the step where a serveConfigV2 turns into DEPLOY_FAILED.
    """
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.build_app import build_app

    def build(app_config: dict[str, Any]) -> dict[str, BuiltDeployment]:
        builder = import_attr(app_config["import_path"])
        # The builder mutates the args it validates (PDServingArgs sets decode's NIXL port base).
        app = call_user_app_builder_with_args_if_necessary(builder, copy.deepcopy(app_config.get("args", {})))
        built = build_app(app, name=app_config["name"])
        built.validate_single_fastapi_ingress()
        deployments = {}
        for deployment in built.deployments:
            autoscaling = deployment._deployment_config.autoscaling_config
            deployments[deployment.name] = BuiltDeployment(
                name=deployment.name,
                num_replicas=None if autoscaling else deployment.num_replicas,
                autoscaling_bounds=(autoscaling.min_replicas, autoscaling.max_replicas) if autoscaling else None,
                placement_group_bundles=deployment._replica_config.placement_group_bundles,
                ray_actor_options=dict(deployment.ray_actor_options or {}),
            )
        return deployments

    return build


@pytest.fixture(scope="session")
def built(deployed: DeployedConfig, build_serve_app) -> dict[str, BuiltDeployment]:
    """The deployments Ray Serve builds from the stack's serveConfigV2 (built once per stack)."""
    return build_serve_app(deployed.pd_app)


# --- KubeRay CRD: the `ray_service_crd_validator` fixture of tests/conftest.py --------------------
