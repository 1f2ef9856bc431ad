"""Prefill and decode scale apart, down to the GPU nodes: the settings, the preview
refusals, the per-phase worker groups and the Ray autoscaler in the RayService, the Cluster
Autoscaler's release and identity, and the plan's two ends.

Node counts are worked by hand next to each case: g6.8xlarge has 1 GPU, so one replica (tp = pp = 1)
takes one worker pod, which takes one node; g6.12xlarge has 4 GPUs, so 4 such replicas share a pod.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.cluster import SUPPORTED_KUBERNETES_VERSIONS
from components.manifests.ray_service import (
    AUTOSCALER_TOKEN_VOLUME,
    PHASE_POD_LABEL,
    SAFE_TO_EVICT_ANNOTATION,
    SERVICE_ACCOUNT_MOUNT,
    autoscaler_version,
    ray_service_manifest,
)
from components.manifests.serving_namespace import serving_network_policies
from components.node_autoscaler import SERVICE_ACCOUNT
from facts.charts import CLUSTER_AUTOSCALER, CLUSTER_AUTOSCALER_RELEASE_FOR_KUBERNETES
from offline.harness import run_offline, try_run_offline
from pdctl.plan import build_plan
from pdctl.preflight import load_deploy_permissions
from serve_app.errors import ConfigError
from serve_app.render import PHASE_RESOURCE

CHART_DATA = Path(__file__).resolve().parents[1] / "data" / "cluster-autoscaler-9.59.0"
# Decode grows to 3 replicas on a node group of 2 → 4 g6.8xlarge: 1 prefill + 3 decode = 4 nodes at most.
SCALING = {"gpuNodeMaxCount": "4", "decodeMaxReplicas": "3", "decodeTargetOngoingRequests": "16",
           "decodeUpscaleDelaySeconds": "10", "decodeDownscaleDelaySeconds": "120"}


@pytest.fixture(scope="module")
def scaling_run():
    return run_offline("dev", overrides=SCALING)


def _groups(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]}


def _resources_of(run, type_: str) -> list:
    return [r for r in run.resources if r.type == type_]


# ── Settings: every bound and target validated, naming its key ───────────────────────────────────

@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("gpuNodeMaxCount", "1", "≥ gpuNodeCount (2)"),
    ("gpuNodeMaxCount", "65", "to 64"),
    ("decodeTargetOngoingRequests", "0", "1 to 1024"),
    ("prefillUpscaleDelaySeconds", "-1", "0 to 3600"),
    ("decodeDownscaleDelaySeconds", "3601", "0 to 3600"),
    ("clusterAutoscalerChartVersion", "^9.59", "exact chart version"),
])
def test_bad_bounds_and_targets_name_their_key(settings_for: Any, key: str, value: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_for(**{key: value})
    assert error.value.setting == key
    assert allowed in str(error.value)


def test_good_bounds_are_accepted_and_rendered_per_phase(settings_for: Any) -> None:
    settings = settings_for(**SCALING)
    assert (settings.gpu_nodes.count, settings.gpu_nodes.most, settings.gpu_nodes.autoscaled) == (2, 4, True)
    args = settings.serving.app.pd_serving_args
    assert args["decode_config"]["deployment_config"] == {"autoscaling_config": {
        "min_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 16,
        "upscale_delay_s": 10, "downscale_delay_s": 120}}
    # Prefill stays fixed: no autoscaling_config, its targets unused.
    assert args["prefill_config"]["deployment_config"] == {"num_replicas": 1}


# ── Preview refusals: before any resource, naming what to change ─────────────────────────────────

@pytest.mark.parametrize(("overrides", "key", "said"), [
    # 1 prefill + 3 decode = 4 nodes at max; the node group stops at 3.
    ({"gpuNodeMaxCount": "3", "decodeMaxReplicas": "3"}, "decodeMaxReplicas", "= 4 nodes at most replicas"),
    # Fixed node group of 2: decode's max of 2 needs a third node and nothing can add it.
    ({"decodeMaxReplicas": "2"}, "decodeMaxReplicas", "raise gpuNodeCount"),
    # 3 prefill + 1 decode = 4 nodes at the minimum; the group reaches 3 at most.
    ({"gpuNodeMaxCount": "3", "prefillReplicas": "3"}, "prefillReplicas", "cannot reach the minimum"),
    # min > max on the node group itself.
    ({"gpuNodeCount": "3", "gpuNodeMaxCount": "2"}, "gpuNodeMaxCount", "0 (fixed) or ≥ gpuNodeCount (3)"),
    # min > max on a phase.
    ({"decodeReplicas": "2", "decodeMaxReplicas": "1"}, "decodeMaxReplicas", "≥ decodeReplicas (2)"),
])
def test_bounds_that_cannot_hold_are_refused_before_any_resource(overrides: dict[str, str], key: str,
                                                                  said: str) -> None:
    run = try_run_offline("dev", overrides=overrides)
    assert isinstance(run.error, ConfigError)
    assert run.error.setting == key
    assert said in str(run.error)
    assert [r.type for r in run.resources] == ["pulumi:pulumi:Stack"]  # the program's root, nothing in it


def test_replicas_sharing_a_bigger_node_need_fewer_nodes(settings_for: Any) -> None:
    """g6.12xlarge (4 GPUs): decode's 5 replicas need ceil(5 / 4) = 2 pods, prefill 1: 3 nodes fit."""
    settings = settings_for(gpuNodeType="g6.12xlarge", gpuNodeMaxCount="3", decodeMaxReplicas="5")
    decode = settings.serving.app.nodes["decode"]
    assert (decode.replicas_per_node, decode.min_nodes, decode.max_nodes) == (4, 1, 2)
    with pytest.raises(ConfigError, match="decodeMaxReplicas"):
        settings_for(gpuNodeType="g6.12xlarge", gpuNodeMaxCount="3", decodeMaxReplicas="9")  # 3 pods + 1


# ── RayService: one worker group per phase, the Ray autoscaler, the token only where it is used ─

def test_one_worker_group_per_phase_with_its_own_bounds_labels_and_resource(settings_for: Any) -> None:
    groups = _groups(ray_service_manifest(settings_for(**SCALING).serving))
    assert set(groups) == {"prefill-workers", "decode-workers"}
    assert [(g["minReplicas"], g["replicas"], g["maxReplicas"]) for g in groups.values()] == [(1, 1, 1), (1, 1, 3)]
    for phase, group in zip(("prefill", "decode"), groups.values(), strict=True):
        assert group["template"]["metadata"]["labels"][PHASE_POD_LABEL] == phase
        assert group["rayStartParams"]["resources"] == f"'{{\"{PHASE_RESOURCE[phase]}\":1}}'"


def test_each_phases_engines_ask_for_their_own_groups_resource(settings_for: Any) -> None:
    args = settings_for(**SCALING).serving.app.pd_serving_args
    for phase in ("prefill", "decode"):
        bundle = args[f"{phase}_config"]["placement_group_config"]["bundle_per_worker"]
        assert bundle == {"GPU": 1, PHASE_RESOURCE[phase]: 1}  # never the other phase's


def test_autoscaler_off_and_no_token_while_both_phases_are_fixed(settings_for: Any) -> None:
    cluster = ray_service_manifest(settings_for().serving)["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is False
    assert "autoscalerOptions" not in cluster
    volumes = cluster["headGroupSpec"]["template"]["spec"].get("volumes", [])
    assert AUTOSCALER_TOKEN_VOLUME not in [v["name"] for v in volumes]


def test_autoscaler_v2_gets_a_token_no_ray_container_sees(settings_for: Any) -> None:
    cluster = ray_service_manifest(settings_for(**SCALING).serving)["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    options = cluster["autoscalerOptions"]
    assert options["version"] == "v2"  # the DLC's Ray 2.58.0
    assert options["volumeMounts"] == [
        {"name": AUTOSCALER_TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_MOUNT, "readOnly": True}]
    head = cluster["headGroupSpec"]["template"]["spec"]
    (token,) = [v for v in head["volumes"] if v["name"] == AUTOSCALER_TOKEN_VOLUME]
    assert token["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    # Every pod still refuses the automatic token; no Ray container mounts the autoscaler's.
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    assert all(p["template"]["spec"]["automountServiceAccountToken"] is False for p in pods)
    for pod in pods:
        for container in pod["template"]["spec"]["containers"]:
            assert SERVICE_ACCOUNT_MOUNT not in [m["mountPath"] for m in container.get("volumeMounts", [])]


@pytest.mark.parametrize(("ray", "version"), [("2.9.3", "v1"), ("2.10.0", "v2"), ("2.58.0", "v2")])
def test_autoscaler_v2_only_where_ray_runs_it(ray: str, version: str) -> None:
    assert autoscaler_version(ray) == version


def test_the_node_autoscaler_never_takes_a_node_from_under_a_worker_pod(settings_for: Any) -> None:
    for group in _groups(ray_service_manifest(settings_for(**SCALING).serving)).values():
        assert group["template"]["metadata"]["annotations"] == {SAFE_TO_EVICT_ANNOTATION: "false"}


def test_autoscaled_rayservice_matches_the_kuberay_crd(ray_service_crd_validator: Any, settings_for: Any) -> None:
    manifest = ray_service_manifest(settings_for(**SCALING).serving)
    assert [e.message for e in ray_service_crd_validator.iter_errors(manifest)] == []
    broken = json.loads(json.dumps(manifest))
    broken["spec"]["rayClusterConfig"]["autoscalerOptions"]["version"] = "v3"
    assert list(ray_service_crd_validator.iter_errors(broken))


def test_serving_network_policies_still_select_both_phases_pods(settings_for: Any) -> None:
    serving = settings_for(**SCALING).serving
    policies = serving_network_policies(serving)
    selector = policies["ray-internal"]["spec"]["podSelector"]["matchLabels"]
    for group in _groups(ray_service_manifest(serving)).values():
        assert selector.items() <= group["template"]["metadata"]["labels"].items()


# ── Pods → nodes: the node group's bounds and the Cluster Autoscaler ─────────────────────────────

def test_gpu_node_group_spans_its_bounds_and_only_it_is_named(scaling_run) -> None:
    groups = {r.name: r.inputs for r in _resources_of(scaling_run, "eks:index:ManagedNodeGroup")}
    assert groups["gpu-nodes"]["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 4}
    assert groups["gpu-nodes"]["nodeGroupName"].startswith("ray-llm-multinode-gpu-")
    assert groups["system-nodes"]["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 1}


def test_pulumi_up_leaves_the_autoscaled_groups_desired_size_to_the_cluster_autoscaler(scaling_run) -> None:
    """pulumi-eks's own switch reaches the node group it creates; ignore_changes on the remote
    component would not (pulumi/pulumi-eks#1380), and a refresh-and-up would shrink the group."""
    groups = {r.name: r for r in _resources_of(scaling_run, "eks:index:ManagedNodeGroup")}
    assert groups["gpu-nodes"].inputs["ignoreScalingChanges"] is True
    assert "ignoreScalingChanges" not in groups["system-nodes"].inputs  # fixed size: nothing to ignore
    assert all(not group.ignore_changes for group in groups.values())


def test_gpu_nodes_carry_the_accelerator_label_the_cluster_autoscaler_reads(scaling_run) -> None:
    groups = {r.name: r.inputs for r in _resources_of(scaling_run, "eks:index:ManagedNodeGroup")}
    assert groups["gpu-nodes"]["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-l4"  # g6.8xlarge: one L4
    assert "k8s.amazonaws.com/accelerator" not in groups["system-nodes"]["labels"]


def test_cluster_autoscaler_release_pinned_on_system_nodes_for_the_gpu_group_only(scaling_run) -> None:
    (release,) = [r for r in _resources_of(scaling_run, "kubernetes:helm.sh/v3:Release")
                  if r.inputs["chart"] == "cluster-autoscaler"]
    values = release.inputs["values"]
    assert release.inputs["version"] == CLUSTER_AUTOSCALER.default_version
    assert release.inputs["namespace"] == "kube-system"
    assert values["nodeSelector"] == {"role": "system"}
    (group,) = [r for r in _resources_of(scaling_run, "eks:index:ManagedNodeGroup") if r.name == "gpu-nodes"]
    assert f"eks:nodegroup-name={group.inputs['nodeGroupName']}" in values["autoDiscovery"]["tags"]
    assert values["image"]["tag"] == "v1.35.2"  # the cluster's Kubernetes 1.35
    assert values["rbac"]["serviceAccount"]["name"] == SERVICE_ACCOUNT
    assert values["rbac"]["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"].startswith(
        "arn:aws:iam::123456789012:role/eks-pd-llm/cluster-autoscaler")  # the path is in a role's ARN
    chart_defaults = yaml.safe_load((CHART_DATA / "values.yaml").read_text())
    assert set(values) <= set(chart_defaults)
    assert set(values["rbac"]["serviceAccount"]) <= set(chart_defaults["rbac"]["serviceAccount"])
    assert yaml.safe_load((CHART_DATA / "Chart.yaml").read_text())["version"] == CLUSTER_AUTOSCALER.default_version


def test_cluster_autoscaler_identity_is_its_service_account_and_the_gpu_group(scaling_run) -> None:
    (role,) = [r for r in _resources_of(scaling_run, "aws:iam/role:Role") if r.name.startswith("cluster-autoscaler")]
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    conditions = statement["Condition"]["StringEquals"]
    assert sorted(conditions.values()) == ["sts.amazonaws.com", "system:serviceaccount:kube-system:cluster-autoscaler"]
    # The bootstrap's policy for the cluster, attached by its ARN: it resizes the GPU group by its name.
    (policy,) = [r for r in _resources_of(scaling_run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                 if r.name.startswith("cluster-autoscaler")]
    assert policy.inputs["policyArn"].endswith(":policy/eks-pd-llm/ray-llm-multinode-cluster-autoscaler")
    permissions = load_deploy_permissions()
    statements = permissions.workload_policies(partition="aws", cluster_name="ray-llm-multinode")[
        permissions.CLUSTER_AUTOSCALER]["Statement"]
    writes = [s for s in statements if set(s["Action"]) & set(permissions.CLUSTER_AUTOSCALER_WRITE_ACTIONS)]
    (group,) = [r for r in _resources_of(scaling_run, "eks:index:ManagedNodeGroup") if r.name == "gpu-nodes"]
    assert len(writes) == 1 and writes[0]["Condition"]["StringEquals"] == {
        "aws:ResourceTag/eks:cluster-name": "ray-llm-multinode"}
    assert fnmatch.fnmatchcase(group.inputs["nodeGroupName"],
                               writes[0]["Condition"]["StringLike"]["aws:ResourceTag/eks:nodegroup-name"])


def test_no_node_autoscaler_for_a_fixed_node_group(offline_run: Any) -> None:
    run = offline_run("dev")
    assert not [r for r in run.resources if "cluster-autoscaler" in r.name]


def test_every_supported_kubernetes_version_has_a_cluster_autoscaler_release() -> None:
    assert set(CLUSTER_AUTOSCALER_RELEASE_FOR_KUBERNETES) == set(SUPPORTED_KUBERNETES_VERSIONS)


# ── The plan prints both ends ────────────────────────────────────────────────────────────────────

def test_plan_shows_replicas_nodes_and_cost_at_min_and_at_max(scaling_run) -> None:
    scaling = build_plan(scaling_run, stack="dev", config_region="us-west-2").to_dict()["scaling"]
    assert scaling["phases"]["decode"]["replicas"] == {"min": 1, "max": 3}
    assert scaling["phases"]["decode"]["worker_pods"] == {"min": 1, "max": 3}
    assert scaling["phases"]["prefill"]["autoscaling"] is False
    assert scaling["gpu_nodes"] == {"min": 2, "max": 4, "instance_type": "g6.8xlarge"}
    assert scaling["node_autoscaler"] == "cluster-autoscaler"
    low, high = scaling["cost_per_hour"]["min"], scaling["cost_per_hour"]["max"]
    # Two more g6.8xlarge (and their 200 GiB gp3 disks) between the ends; nothing else changes.
    from facts.prices import HOURS_PER_MONTH, PRICES
    table = PRICES["us-west-2"]
    extra = 2 * (table.ec2_on_demand_per_hour["g6.8xlarge"] + 200 * table.ebs_per_gb_month["gp3"] / HOURS_PER_MONTH)
    assert high - low == pytest.approx(extra, abs=1e-3)
