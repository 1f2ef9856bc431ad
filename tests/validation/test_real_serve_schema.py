"""Ray Serve's own `ServeDeploySchema` (the body of `PUT /api/serve/applications/`, which KubeRay
sends) accepts each stack's whole serveConfigV2, and refuses known-bad variants of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pydantic import ValidationError

if TYPE_CHECKING:
    from tests.validation.conftest import DeployedConfig

pytestmark = pytest.mark.validation

PD_BUILDER = "ray.serve.llm:build_pd_openai_app"


def serve_deploy_schema():
    from ray.serve.schema import ServeDeploySchema

    return ServeDeploySchema


def test_serve_accepts_the_whole_serve_config(deployed: DeployedConfig) -> None:
    schema = serve_deploy_schema().model_validate(deployed.serve_config)

    (app,) = schema.applications
    assert app.import_path == PD_BUILDER
    assert app.route_prefix == "/"


def test_serve_proxy_listens_where_the_serve_service_points(deployed: DeployedConfig) -> None:
    """KubeRay's <name>-serve-svc targets the head container's `serve` port: Serve's HTTP proxy
    (as Serve resolves it, defaults included) must listen on that port, on all interfaces."""
    schema = serve_deploy_schema().model_validate(deployed.serve_config)
    head = deployed.ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    serve_ports = [port["containerPort"] for port in head["ports"] if port["name"] == "serve"]

    assert serve_ports == [schema.http_options.port]
    assert schema.http_options.host == "0.0.0.0"


def test_serve_accepts_direct_streamings_runtime_env(dev_direct_streaming: DeployedConfig) -> None:
    schema = serve_deploy_schema().model_validate(dev_direct_streaming.serve_config)

    (app,) = schema.applications
    assert app.import_path == PD_BUILDER
    assert app.runtime_env == {"env_vars": {"RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1"}}


# --- Teeth: each variant is what a plausible hand edit of serveConfigV2 looks like -----------------


def _mistyped_proxy_port(config: dict) -> None:
    config["http_options"]["port"] = "eight thousand"


def _replica_override_mistyped(config: dict) -> None:
    # serveConfigV2's per-deployment overrides are checked by the schema itself.
    config["applications"][0]["deployments"] = [{"name": "OpenAiIngress", "num_replicas": "two"}]


def _host_inside_application(config: dict) -> None:
    config["applications"][0]["host"] = "0.0.0.0"


def _import_path_with_two_colons(config: dict) -> None:
    config["applications"][0]["import_path"] = "ray.serve.llm:build_pd_openai_app:app"


def _duplicate_application(config: dict) -> None:
    config["applications"].append(dict(config["applications"][0]))


def _runtime_env_as_text(config: dict) -> None:
    # The direct-streaming switch written as a shell assignment instead of runtime_env.env_vars.
    config["applications"][0]["runtime_env"] = "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1"


BROKEN_SERVE_CONFIGS = [
    (_mistyped_proxy_port, r"http_options.port\s+Input should be a valid integer"),
    (_replica_override_mistyped, "`num_replicas` must be an int or \"auto\", but got: two"),
    (_host_inside_application, "Host \"0.0.0.0\" is set in the config for application"),
    (_import_path_with_two_colons, "An import path may have at most one colon"),
    (_duplicate_application, "Found multiple configs for application"),
    (_runtime_env_as_text, r"applications.0.runtime_env\s+Input should be a valid dictionary"),
]


@pytest.mark.parametrize(("mutate", "refusal"), BROKEN_SERVE_CONFIGS,
                         ids=[mutate.__name__.strip("_") for mutate, _ in BROKEN_SERVE_CONFIGS])
def test_serve_refuses_a_broken_serve_config(dev: DeployedConfig, mutate, refusal: str) -> None:
    config = dev.serve_config
    mutate(config)

    with pytest.raises(ValidationError, match=refusal):
        serve_deploy_schema().model_validate(config)
