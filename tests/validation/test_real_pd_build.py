"""Ray Serve LLM's `build_pd_openai_app`, run the way the Serve controller runs it on the head
pod, builds the deployment graph each stack's serveConfigV2 asks for — and refuses the mistakes
that would otherwise only show up as DEPLOY_FAILED after the GPU nodes are up.

Expected values come from the stack's settings (stack file + Pulumi.yaml defaults), not from the
rendered args, so a render that drops or misplaces a setting fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from serve_app.render import INGRESS_DEPLOYMENT_NAME, serve_deployment_id

if TYPE_CHECKING:
    from tests.validation.conftest import BuiltDeployment, DeployedConfig

pytestmark = pytest.mark.validation

PHASES = ("prefill", "decode")


def _phase_deployment(deployed: DeployedConfig, phase: str) -> str:
    # Ray names a phase `<Prefill|Decode>:<model id with '/'→'--', '.'→'_'>`.
    # The served name as rendered: modelId "" names the model after modelSource.
    model_id = deployed.pd_app["args"][f"{phase}_config"]["model_loading_config"]["model_id"]
    return f"{phase.capitalize()}:{serve_deployment_id(model_id)}"


def _gpus_per_replica(deployed: DeployedConfig) -> int:
    return int(deployed.settings["tensorParallelSize"]) * int(deployed.settings["pipelineParallelSize"])


def test_ray_builds_prefill_decode_and_the_openai_ingress(deployed: DeployedConfig, built) -> None:
    assert set(built) == {
        _phase_deployment(deployed, "prefill"), _phase_deployment(deployed, "decode"), INGRESS_DEPLOYMENT_NAME,
    }


@pytest.mark.parametrize("phase", PHASES)
def test_each_replica_reserves_its_gpus(deployed: DeployedConfig, built, phase: str) -> None:
    deployment: BuiltDeployment = built[_phase_deployment(deployed, phase)]

    assert deployment.gpus_per_replica == _gpus_per_replica(deployed)
    assert deployment.placement_group_bundles, "vLLM engines are placed through a placement group"


def test_the_ingress_takes_no_gpu(deployed: DeployedConfig, built) -> None:
    assert built[INGRESS_DEPLOYMENT_NAME].gpus_per_replica == 0


@pytest.mark.parametrize("phase", PHASES)
def test_replicas_are_the_stack_settings(deployed: DeployedConfig, built, phase: str) -> None:
    deployment: BuiltDeployment = built[_phase_deployment(deployed, phase)]
    replicas = int(deployed.settings[f"{phase}Replicas"])
    max_replicas = int(deployed.settings[f"{phase}MaxReplicas"])  # 0 = fixed

    if max_replicas == 0:
        assert (deployment.num_replicas, deployment.autoscaling_bounds) == (replicas, None)
    else:
        assert (deployment.num_replicas, deployment.autoscaling_bounds) == (None, (replicas, max_replicas))


def test_the_built_app_fits_the_gpus_the_rayservice_starts(deployed: DeployedConfig, built) -> None:
    """Serve replicas beyond the Ray cluster's GPUs stay pending forever (no error anywhere)."""
    workers = deployed.ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    cluster_gpus = sum(int(group["rayStartParams"]["num-gpus"]) * group["maxReplicas"] for group in workers)
    most_gpus_needed = sum(
        (deployment.autoscaling_bounds[1] if deployment.autoscaling_bounds else deployment.num_replicas)
        * deployment.gpus_per_replica
        for deployment in built.values()
    )

    assert 0 < most_gpus_needed <= cluster_gpus


# --- Teeth: each variant is a plausible mistake in the rendered args -----------------------------


def _misspelled_engine_kwarg(args: dict[str, Any]) -> None:
    engine = args["prefill_config"]["engine_kwargs"]
    engine["gpu_memory_utilisation"] = engine.pop("gpu_memory_utilization")


def _model_id_mismatch(args: dict[str, Any]) -> None:
    args["decode_config"]["model_loading_config"]["model_id"] += "-instruct"


def _replica_count_as_word(args: dict[str, Any]) -> None:
    args["decode_config"]["deployment_config"] = {"num_replicas": "two"}


def _removed_proxy_key(args: dict[str, Any]) -> None:
    # Ray 2.60 removed the PD proxy; configs written for older Ray still carry this key.
    args["proxy_cls_config"] = {}


def _decode_without_kv_transfer(args: dict[str, Any]) -> None:
    del args["decode_config"]["engine_kwargs"]["kv_transfer_config"]


def _unknown_accelerator(args: dict[str, Any]) -> None:
    args["prefill_config"]["accelerator_type"] = "L4-24GB"


def _gpu_bundles_in_deployment_config(args: dict[str, Any]) -> None:
    args["prefill_config"]["deployment_config"]["placement_group_bundles"] = [{"GPU": 1}]


BROKEN_APPS = [
    (_misspelled_engine_kwarg, "Unknown engine argument: gpu_memory_utilisation"),
    (_model_id_mismatch, "P/D model id mismatch"),
    (_replica_count_as_word, "Invalid deployment config"),
    (_removed_proxy_key, r"proxy_cls_config\s+Extra inputs are not permitted"),
    (_decode_without_kv_transfer, "kv_transfer_config is required"),
    (_unknown_accelerator, "Unsupported accelerator type: L4-24GB"),
    (_gpu_bundles_in_deployment_config, "placement_group_bundles .* must not be specified in deployment_config"),
]


@pytest.mark.parametrize(("mutate", "refusal"), BROKEN_APPS,
                         ids=[mutate.__name__.strip("_") for mutate, _ in BROKEN_APPS])
def test_ray_refuses_a_broken_app(dev: DeployedConfig, build_serve_app: Callable, mutate, refusal: str) -> None:
    app = dev.pd_app
    mutate(app["args"])

    with pytest.raises(ValueError, match=refusal):
        build_serve_app(app)
