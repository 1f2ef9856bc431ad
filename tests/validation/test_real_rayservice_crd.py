"""The whole RayService object each stack registers validates against KubeRay 1.7.0's CRD
(`ray.io_rayservices.yaml`, version ray.io/v1, openAPIV3Schema) with unknown fields refused as the
API server refuses them. Skipped, with the reason, when the CRD file is not beside the repo.

Not covered here (only a real API server shows it): the CRD's three CEL rules (managedBy values
and immutability), int32 ranges, and admission by KubeRay's webhook.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.validation.conftest import DeployedConfig

pytestmark = pytest.mark.validation


def crd_errors(validator, ray_service: dict[str, Any]) -> list[str]:
    return sorted(
        f"{'.'.join(str(part) for part in error.absolute_path) or '<root>'}: {error.message}"
        for error in validator.iter_errors(ray_service)
    )


def test_the_rayservice_matches_the_kuberay_crd(deployed: DeployedConfig, ray_service_crd_validator) -> None:
    assert crd_errors(ray_service_crd_validator, deployed.ray_service) == []


def test_the_haproxy_and_direct_streaming_rayservice_matches_the_kuberay_crd(
        dev_direct_streaming: DeployedConfig, ray_service_crd_validator) -> None:
    assert crd_errors(ray_service_crd_validator, dev_direct_streaming.ray_service) == []


# --- Teeth ---------------------------------------------------------------------------------------


def _worker_replicas_as_word(ray_service: dict) -> None:
    ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = "two"


def _serve_config_as_object(ray_service: dict) -> None:
    # serveConfigV2 is a YAML *string*; an embedded mapping is refused.
    ray_service["spec"]["serveConfigV2"] = {"applications": []}


def _misspelled_resource_limits(ray_service: dict) -> None:
    container = ray_service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    container["resources"]["limit"] = container["resources"].pop("limits")


def _misspelled_spec_field(ray_service: dict) -> None:
    ray_service["spec"]["serveConfigv2"] = ray_service["spec"].pop("serveConfigV2")


def _head_group_missing(ray_service: dict) -> None:
    del ray_service["spec"]["rayClusterConfig"]["headGroupSpec"]


def _annotation_value_not_a_string(ray_service: dict) -> None:
    ray_service["metadata"]["annotations"]["ray.io/initializing-timeout"] = 30


def _old_api_version(ray_service: dict) -> None:
    ray_service["apiVersion"] = "ray.io/v1alpha1"


BROKEN_RAY_SERVICES = [
    (_worker_replicas_as_word, "spec.rayClusterConfig.workerGroupSpecs.0.replicas"),
    (_serve_config_as_object, "spec.serveConfigV2"),
    (_misspelled_resource_limits, "spec.rayClusterConfig.workerGroupSpecs.0.template.spec.containers.0.resources"),
    (_misspelled_spec_field, "spec"),
    (_head_group_missing, "spec.rayClusterConfig"),
    (_annotation_value_not_a_string, "metadata.annotations.ray.io/initializing-timeout"),
    (_old_api_version, "apiVersion"),
]


@pytest.mark.parametrize(("mutate", "where"), BROKEN_RAY_SERVICES,
                         ids=[mutate.__name__.strip("_") for mutate, _ in BROKEN_RAY_SERVICES])
def test_the_crd_refuses_a_broken_rayservice(
        dev: DeployedConfig, ray_service_crd_validator, mutate, where: str) -> None:
    ray_service = copy.deepcopy(dev.ray_service)
    mutate(ray_service)

    errors = crd_errors(ray_service_crd_validator, ray_service)

    assert [error for error in errors if error.startswith(f"{where}: ")], errors
