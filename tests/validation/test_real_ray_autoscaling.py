"""Ray's own code reads the autoscaling the stack renders: Ray Serve's AutoscalingConfig
takes each phase's autoscaling_config, Ray's KubeRay autoscaler derives one node type per phase from
the RayCluster spec with the phase's custom resource and pod bounds, and the Serve controller's build
puts that resource into every bundle of the phase's placement group.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from components.manifests.ray_service import ray_service_manifest
from serve_app.render import PHASE_RESOURCE

pytestmark = pytest.mark.validation

# Decode scales 1 → 3 on a node group of 2 → 4 g6.8xlarge (one GPU per node, one replica per pod).
SCALING = {"gpuNodeMaxCount": "4", "decodeMaxReplicas": "3", "decodeTargetOngoingRequests": "16"}


@pytest.fixture(scope="module")
def serving(settings_for):
    return settings_for(**SCALING).serving


def test_serve_accepts_each_phases_autoscaling_config(serving) -> None:
    from ray.serve.config import AutoscalingConfig

    rendered = serving.app.pd_serving_args["decode_config"]["deployment_config"]["autoscaling_config"]
    config = AutoscalingConfig(**rendered)
    assert (config.min_replicas, config.max_replicas, config.target_ongoing_requests) == (1, 3, 16)
    with pytest.raises(ValidationError):  # Serve's own schema has teeth: max below min
        AutoscalingConfig(**{**rendered, "max_replicas": 0})


def _ray_cluster_cr(serving) -> dict[str, Any]:
    """The RayCluster KubeRay makes from the RayService, as the autoscaler sidecar reads it."""
    manifest = ray_service_manifest(serving)
    return {"metadata": {"name": f"{serving.name}-raycluster", "namespace": serving.namespace},
            "spec": copy.deepcopy(manifest["spec"]["rayClusterConfig"])}


def test_rays_autoscaler_sees_one_node_type_per_phase_with_its_resource(serving) -> None:
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    config = _derive_autoscaling_config_from_ray_cr(_ray_cluster_cr(serving))
    types = config["available_node_types"]
    prefill, decode = types["prefill-workers"], types["decode-workers"]
    assert (prefill["min_workers"], prefill["max_workers"]) == (1, 1)
    assert (decode["min_workers"], decode["max_workers"]) == (1, 3)
    assert prefill["resources"]["GPU"] == decode["resources"]["GPU"] == 1
    assert prefill["resources"][PHASE_RESOURCE["prefill"]] == 1 and PHASE_RESOURCE["decode"] not in prefill["resources"]
    assert decode["resources"][PHASE_RESOURCE["decode"]] == 1 and PHASE_RESOURCE["prefill"] not in decode["resources"]
    assert config["idle_timeout_minutes"] == 1.0
    assert config["max_workers"] == 4


def test_rays_autoscaler_refuses_the_resources_without_the_shell_quotes(serving) -> None:
    """Teeth: the unquoted JSON a hand edit would write loses its first and last character."""
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    cr = _ray_cluster_cr(serving)
    cr["spec"]["workerGroupSpecs"][1]["rayStartParams"]["resources"] = '{"pd-decode":1}'
    with pytest.raises(Exception):  # noqa: B017 - Ray raises whatever json/assert raises
        _derive_autoscaling_config_from_ray_cr(cr)


def test_each_replicas_placement_group_asks_for_its_phases_resource(build_serve_app, serving) -> None:
    (app,) = serving.app.serve_config_v2["applications"]
    built = build_serve_app(app)
    for name, deployment in built.items():
        phase = "prefill" if name.startswith("Prefill") else "decode" if name.startswith("Decode") else None
        if phase is None:
            continue
        bundles = deployment.placement_group_bundles
        assert bundles and all(bundle.get(PHASE_RESOURCE[phase]) == 1 for bundle in bundles), bundles
        other = PHASE_RESOURCE["decode" if phase == "prefill" else "prefill"]
        assert not any(other in bundle for bundle in bundles)
