"""How a change reaches traffic, as the program renders it: prod's blue/green path (KubeRay NewCluster,
a serve-config digest in the cluster spec, the old cluster kept for the longest stream, `pulumi up`
waiting for the switch), dev's in-place path, and the refusal of a blue/green stack with no room for
its second cluster. Checked against KubeRay 1.7.0's CRD and its controller's rules
(docs/SOURCES.md#kuberay-new-cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.manifests.ray_service import SERVE_CONFIG_DIGEST_ANNOTATION, ray_service_manifest
from serve_app.errors import ConfigError

RAY_SERVICE = "kubernetes:ray.io/v1:RayService"
BLUE_GREEN = {"upgradeStrategy": "NewCluster", "gpuNodeMaxCount": "4"}


def _errors(validator: Any, body: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(body)]


def test_prod_updates_blue_green_and_keeps_the_old_cluster_for_the_longest_stream(
        offline_run: Any, ray_service_crd_validator: Any) -> None:
    ray_service = offline_run("prod").one(RAY_SERVICE)
    spec, annotations = ray_service.inputs["spec"], ray_service.inputs["metadata"]["annotations"]
    updates = offline_run("prod").program["settings"].serving.updates
    assert spec["upgradeStrategy"] == {"type": "NewCluster"}
    # The old cluster outlives every stream it holds at the switch (KubeRay's default is 60 s).
    assert updates.longest_stream_seconds is not None
    assert spec["rayClusterDeletionDelaySeconds"] >= updates.longest_stream_seconds > 60
    # `pulumi up` returns once KubeRay has switched, not while the old cluster still serves.
    assert json.loads(annotations["pulumi.com/waitFor"]) == ["condition=Ready", "condition=UpgradeInProgress=False"]
    assert ray_service.replace_on_changes == ()
    body = {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": dict(ray_service.inputs["metadata"]), "spec": spec}
    assert _errors(ray_service_crd_validator, body) == []


def test_a_serve_config_change_changes_the_cluster_spec_kuberay_hashes(settings_for: Any) -> None:
    """KubeRay starts a new cluster only when the hash of rayClusterConfig changes
    (rayservice_controller.go shouldPrepareNewCluster): an engine argument must reach it."""
    before = ray_service_manifest(settings_for(**BLUE_GREEN).serving)
    after = ray_service_manifest(settings_for(**BLUE_GREEN, maxModelLen="8192").serving)
    assert before["spec"]["serveConfigV2"] != after["spec"]["serveConfigV2"]
    assert before["spec"]["rayClusterConfig"] != after["spec"]["rayClusterConfig"]
    digests = [m["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["metadata"]["annotations"]
               [SERVE_CONFIG_DIGEST_ANNOTATION] for m in (before, after)]
    assert digests[0] != digests[1]


def test_dev_updates_in_place_and_says_nothing_of_a_second_cluster(offline_run: Any) -> None:
    ray_service = offline_run("dev").one(RAY_SERVICE)
    assert ray_service.inputs["spec"]["upgradeStrategy"] == {"type": "None"}
    assert "rayClusterDeletionDelaySeconds" not in ray_service.inputs["spec"]
    assert "annotations" not in ray_service.inputs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["metadata"]
    assert ray_service.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"


@pytest.mark.parametrize(("overrides", "at_least"), [
    ({}, 4),  # a fixed group of two: the second cluster's prefill and decode need two more nodes
    ({"gpuNodeMaxCount": "3"}, 4),
    ({"gpuNodeMaxCount": "4", "decodeMaxReplicas": "2"}, 5),  # the old cluster may hold three nodes
])
def test_new_cluster_without_room_for_the_second_cluster_is_refused(
        settings_for: Any, overrides: dict[str, str], at_least: int) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_for(upgradeStrategy="NewCluster", **overrides)
    assert refused.value.setting == "gpuNodeMaxCount"
    assert f"at least {at_least}, or upgradeStrategy None" in str(refused.value)

