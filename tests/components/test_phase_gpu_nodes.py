"""A phase on a GPU node group of its own: prefill on a compute-heavier type than
decode, in the same AZ and placement group, with EFA; the checks, the pinning and the plan per group.

The heterogeneous stack below: decode on gpuNodeType's group (g6.8xlarge, 1 L4 GPU, 25 Gbps; 1 to 3
nodes for decode's 1 to 3 replicas), prefill on its own g6.12xlarge group (4 L4 GPUs, 40 Gbps; 1 to 2
nodes: 4 replicas share a node's worker pod, so 8 replicas take ceil(8 / 4) = 2 pods).
"""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from components.manifests.ray_service import ray_service_manifest
from components.scheduling import GPU_NODE_SELECTOR, PHASE_LABEL
from facts.prices import HOURS_PER_MONTH, PRICES
from offline.harness import run_offline, try_run_offline
from pdctl.plan import build_plan
from pdctl.preflight import load_deploy_permissions
from serve_app.errors import ConfigError

HETERO = {"prefillGpuNodeType": "g6.12xlarge", "prefillGpuNodeMaxCount": "2", "prefillMaxReplicas": "8",
          "gpuNodeCount": "1", "gpuNodeMaxCount": "3", "decodeMaxReplicas": "3"}
CLUSTER = "ray-llm-multinode"
# The Cluster Autoscaler's GPU label, spelt as its AWS README spells it.
ACCELERATOR = "k8s.amazonaws.com/accelerator"


@pytest.fixture(scope="module")
def hetero_run():
    return run_offline("dev", overrides=HETERO)


def _of_type(run, type_: str) -> dict[str, Any]:
    return {r.name: r for r in run.resources if r.type == type_}


def _worker_groups(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]}


# ── Today's stacks: one GPU group holding both phases, nothing new ────────────────────────────────

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_without_a_phase_type_both_phases_share_the_one_gpu_group(offline_run: Any, settings_for: Any,
                                                                   stack: str) -> None:
    run = offline_run(stack)
    groups = _of_type(run, "eks:index:ManagedNodeGroup")
    assert sorted(groups) == ["gpu-nodes", "system-nodes"]
    # No phase label: it holds both.
    assert groups["gpu-nodes"].inputs["labels"] == {**GPU_NODE_SELECTOR, ACCELERATOR: "nvidia-l4"}
    assert len(_of_type(run, "aws:ec2/placementGroup:PlacementGroup")) == 1
    for group in _worker_groups(ray_service_manifest(settings_for(stack).serving)).values():
        assert group["template"]["spec"]["nodeSelector"] == GPU_NODE_SELECTOR
    scaling = build_plan(run, stack=stack, config_region="us-west-2").to_dict()["scaling"]
    assert "gpu_node_groups" not in scaling


# ── A valid heterogeneous stack ────────────────────────────────────────────────────────────────────

def test_each_phase_gets_its_own_node_group_in_one_az_and_one_placement_group(hetero_run) -> None:
    groups = {name: r.inputs for name, r in _of_type(hetero_run, "eks:index:ManagedNodeGroup").items()}
    decode, prefill = groups["gpu-nodes"], groups["prefill-gpu-nodes"]
    assert (decode["instanceTypes"], prefill["instanceTypes"]) == (["g6.8xlarge"], ["g6.12xlarge"])
    # g6.8xlarge and g6.12xlarge both hold L4s.
    assert decode["labels"] == {**GPU_NODE_SELECTOR, PHASE_LABEL: "decode", ACCELERATOR: "nvidia-l4"}
    assert prefill["labels"] == {**GPU_NODE_SELECTOR, PHASE_LABEL: "prefill", ACCELERATOR: "nvidia-l4"}
    assert decode["taints"] == prefill["taints"]  # the GPU taint: every GPU DaemonSet tolerates it
    assert decode["nodeGroupName"].startswith(f"{CLUSTER}-gpu-") and "prefill" not in decode["nodeGroupName"]
    assert prefill["nodeGroupName"].startswith(f"{CLUSTER}-gpu-prefill-")
    assert decode["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 3}
    assert prefill["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 2}
    assert decode["subnetIds"] == prefill["subnetIds"] and len(prefill["subnetIds"]) == 1  # the GPU AZ's

    # One placement group and one EFA security group, on both launch templates.
    (placement,) = _of_type(hetero_run, "aws:ec2/placementGroup:PlacementGroup").values()
    (efa_group,) = [r for r in _of_type(hetero_run, "aws:ec2/securityGroup:SecurityGroup").values()
                    if r.name.endswith("-efa")]
    templates = _of_type(hetero_run, "aws:ec2/launchTemplate:LaunchTemplate")
    for name in ("gpu-nodes-lt", "prefill-gpu-nodes-lt"):
        template = templates[name]
        assert {placement.urn, efa_group.urn} <= set(template.dependencies)
        assert [i["interfaceType"] for i in template.inputs["networkInterfaces"]] == ["efa"]  # one card each
    assert (templates["gpu-nodes-lt"].inputs["placement"] == templates["prefill-gpu-nodes-lt"].inputs["placement"]
            != {})


def test_each_worker_group_is_pinned_to_its_phases_nodes_and_sized_for_them(settings_for: Any,
                                                                           ray_service_crd_validator: Any) -> None:
    serving = settings_for(**HETERO).serving
    manifest = ray_service_manifest(serving)
    assert [e.message for e in ray_service_crd_validator.iter_errors(manifest)] == []
    groups = _worker_groups(manifest)
    node_labels = {phase: serving.node_group(phase).labels for phase in ("prefill", "decode")}
    for phase, other in (("prefill", "decode"), ("decode", "prefill")):
        spec = groups[f"{phase}-workers"]["template"]["spec"]
        selector = spec["nodeSelector"]
        assert selector.items() <= node_labels[phase].items()
        assert not selector.items() <= node_labels[other].items()  # never the other phase's nodes
    gpus = {phase: groups[f"{phase}-workers"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            ["nvidia.com/gpu"] for phase in ("prefill", "decode")}
    assert gpus == {"prefill": "4", "decode": "1"}  # a whole g6.12xlarge, a whole g6.8xlarge
    # 8 prefill replicas, 4 to a pod: 1 to 2 pods; decode 1 to 3.
    assert [(g["minReplicas"], g["maxReplicas"]) for g in groups.values()] == [(1, 2), (1, 3)]


def _node_group_names(run) -> dict[str, str]:
    return {name: r.inputs.get("nodeGroupName") for name, r in _of_type(run, "eks:index:ManagedNodeGroup").items()}


def test_the_cluster_autoscaler_sees_both_groups_and_may_resize_only_them(hetero_run) -> None:
    names = _node_group_names(hetero_run)
    shared, prefill = names["gpu-nodes"], names["prefill-gpu-nodes"]
    (release,) = [r for r in _of_type(hetero_run, "kubernetes:helm.sh/v3:Release").values()
                  if r.inputs["chart"] == "cluster-autoscaler"]
    values = release.inputs["values"]
    assert f"eks:nodegroup-name={shared}" in values["autoDiscovery"]["tags"]
    assert values["extraArgs"] == {"node-group-auto-discovery_2": (
        f"asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/{CLUSTER},"
        f"eks:nodegroup-name={prefill}")}
    # The bootstrap's policy for the cluster resizes both by the name the stack gives a group that can grow.
    (policy,) = [r for r in _of_type(hetero_run, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").values()
                 if r.name.startswith("cluster-autoscaler")]
    assert policy.inputs["policyArn"].endswith(f":policy/eks-pd-llm/{CLUSTER}-cluster-autoscaler")
    (resize,) = [s for s in load_deploy_permissions().workload_policies(partition="aws", cluster_name=CLUSTER)[
        "cluster-autoscaler"]["Statement"] if "Condition" in s]
    assert resize["Condition"]["StringEquals"] == {"aws:ResourceTag/eks:cluster-name": CLUSTER}
    pattern = resize["Condition"]["StringLike"]["aws:ResourceTag/eks:nodegroup-name"]
    assert fnmatch.fnmatchcase(shared, pattern) and fnmatch.fnmatchcase(prefill, pattern)


def test_only_the_group_that_can_grow_is_discovered() -> None:
    run = run_offline("dev", overrides={"prefillGpuNodeType": "g6.12xlarge", "prefillGpuNodeMaxCount": "2",
                                        "prefillMaxReplicas": "8"})
    names = _node_group_names(run)
    assert names["gpu-nodes"] is None and names["prefill-gpu-nodes"].startswith(f"{CLUSTER}-gpu-prefill-")
    (release,) = [r for r in _of_type(run, "kubernetes:helm.sh/v3:Release").values()
                  if r.inputs["chart"] == "cluster-autoscaler"]
    assert release.inputs["values"]["autoDiscovery"]["tags"][-1] == f"eks:nodegroup-name={names['prefill-gpu-nodes']}"
    assert "extraArgs" not in release.inputs["values"]


def test_the_plan_shows_capacity_and_cost_per_group(hetero_run) -> None:
    plan = build_plan(hetero_run, stack="dev", config_region="us-west-2").to_dict()
    capacity = plan["capacity"]["per_phase"]
    assert (capacity["prefill"]["instance_type"], capacity["decode"]["instance_type"]) == ("g6.12xlarge", "g6.8xlarge")
    # The KV leaves a 40 Gbps node for a 25 Gbps one: the slower end bounds it, for both reports.
    assert {report["network_bytes_per_second"] for report in capacity.values()} == {25e9 / 8}
    groups = {g["name"]: g for g in plan["scaling"]["gpu_node_groups"]}
    table = PRICES["us-west-2"]
    disk = 200 * table.ebs_per_gb_month["gp3"] / HOURS_PER_MONTH
    prefill_node = table.ec2_on_demand_per_hour["g6.12xlarge"] + disk
    decode_node = table.ec2_on_demand_per_hour["g6.8xlarge"] + disk
    assert groups["prefill-gpu-nodes"]["phases"] == ["prefill"] and groups["gpu-nodes"]["phases"] == ["decode"]
    assert groups["prefill-gpu-nodes"]["cost_per_hour"] == pytest.approx({"min": prefill_node, "max": 2 * prefill_node},
                                                                         abs=1e-3)
    assert groups["gpu-nodes"]["cost_per_hour"] == pytest.approx({"min": decode_node, "max": 3 * decode_node}, abs=1e-3)
    total = plan["scaling"]["cost_per_hour"]
    assert total["max"] - total["min"] == pytest.approx(prefill_node + 2 * decode_node, abs=1e-3)


def test_the_plan_text_prints_a_row_per_group(hetero_run) -> None:
    import io

    from rich.console import Console

    from pdctl.views import render_plan

    out = io.StringIO()
    render_plan(Console(file=out, width=200, color_system=None),
                build_plan(hetero_run, stack="dev", config_region="us-west-2"))
    text = out.getvalue()
    assert "GPU nodes (g6.8xlarge: decode, $2.04 → $6.11)" in text
    assert "GPU nodes (g6.12xlarge: prefill, $4.62 → $9.25)" in text


# ── Refusals, before any resource, naming the key ──────────────────────────────────────────────────

@pytest.mark.parametrize(("overrides", "key", "said"), [
    # No EFA on g6.xlarge: the KV transfer from prefill to decode needs it.
    ({"prefillGpuNodeType": "g6.xlarge"}, "prefillGpuNodeType", "does not support EFA"),
    ({"decodeGpuNodeType": "m7i.xlarge"}, "decodeGpuNodeType", "no NVIDIA GPU"),
    ({"prefillGpuNodeType": "g7.nope"}, "prefillGpuNodeType", "not recorded offline: g7.nope"),
    # A 2-GPU replica on a 1-GPU type (gpuNodeType's g6.12xlarge holds decode's).
    ({"gpuNodeType": "g6.12xlarge", "tensorParallelSize": "2", "prefillGpuNodeType": "g6.16xlarge"},
     "prefillGpuNodeType", "at least 2 GPUs per node"),
    # Prefill grows to 3 replicas on its own group of 1 g6.8xlarge node.
    ({"prefillGpuNodeType": "g6.8xlarge", "prefillMaxReplicas": "3"}, "prefillMaxReplicas",
     "raise prefillGpuNodeCount"),
    # Prefill's 2 replicas at the minimum on a group that stops at 1 node.
    ({"decodeGpuNodeType": "g6.8xlarge", "prefillReplicas": "2", "gpuNodeCount": "1"}, "prefillReplicas",
     "cannot reach the minimum"),
    ({"prefillGpuNodeType": "g6.8xlarge", "prefillGpuNodeCount": "3", "prefillGpuNodeMaxCount": "2"},
     "prefillGpuNodeMaxCount", "≥ prefillGpuNodeCount (3)"),
    ({"decodeGpuNodeMaxCount": "4"}, "decodeGpuNodeMaxCount", 'while decodeGpuNodeType is ""'),
    ({"prefillGpuNodeType": "g6.8xlarge", "decodeGpuNodeType": "g6.12xlarge"}, "decodeGpuNodeType",
     "one phase runs on gpuNodeType's group"),
    # p5.48xlarge is offered only in us-west-2b; the GPU AZ is us-west-2c.
    ({"gpuAvailabilityZone": "us-west-2c", "prefillGpuNodeType": "p5.48xlarge"}, "prefillGpuNodeType",
     "offered in us-west-2b (usw2-az2)"),
    ({"prefillGpuNodeCount": "0"}, "prefillGpuNodeCount", "from 1 to 64"),
])
def test_a_phase_group_that_cannot_hold_its_phase_is_refused(overrides: dict[str, str], key: str, said: str) -> None:
    run = try_run_offline("dev", overrides=overrides)
    assert isinstance(run.error, ConfigError), run.error
    assert run.error.setting == key
    assert said in str(run.error)
    assert [r.type for r in run.resources] == ["pulumi:pulumi:Stack"]


def test_the_gpu_az_is_one_that_offers_both_types(settings_for: Any) -> None:
    """g6.8xlarge is offered in us-west-2b and 2c, p5.48xlarge in 2b only: the AZ chosen is 2b."""
    settings = settings_for(prefillGpuNodeType="p5.48xlarge")
    assert settings.zones.gpu_zone.name == "us-west-2b"
    assert settings.serving.node_group("prefill").instance.name == "p5.48xlarge"
