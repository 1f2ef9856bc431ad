"""The CrossGuard policy pack: every rule passes on what the dev and prod stacks register, and
catches the mistake it exists for.

Validators are called directly (policy/rules.py neither constructs the PolicyPack nor imports
pulumi_policy, which cannot live in this environment: see docs/ARCHITECTURE.md, Environments).
Their arguments are look-alikes of pulumi_policy's, built the way the analyzer builds them:
resource policies get each resource's inputs, stack policies every resource with its
dependencies resolved to objects. The last test builds the real pack in `.venv-policy` and runs
a validator through real pulumi_policy argument objects.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import scheduling
from components.manifests.serving_namespace import namespace_manifest
from offline import run_offline
from pdctl.policy_check import Options, PolicyResource, policy_resources, run_rules
from policy import rules

PROJECT = "eks-pd-llm"
POLICY_NAMES = [rule.name for rule in rules.RULES]
REPO = Path(__file__).resolve().parents[2]
POLICY_PYTHON = REPO / ".venv-policy" / "bin" / "python"


# --- Running policies the way the analyzer does (pdctl.policy_check's look-alikes) ---------------

def make_resource(stack: str, type_: str, name: str, props: Mapping[str, Any],
                  dependencies: Sequence[PolicyResource] = (), protect: bool = False) -> PolicyResource:
    urn = f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"
    return PolicyResource(type_, copy.deepcopy(dict(props)), urn, name, Options(protect), list(dependencies))


def violations(policy_name: str, resources: Sequence[PolicyResource],
               config: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """(urn, message) for each violation `policy_name` reports on `resources`."""
    return [(v.urn, v.message) for v in run_rules(resources, dict(config or {}), names=[policy_name])]


# --- Looking things up ------------------------------------------------------------------------------

def find(resources: Iterable[PolicyResource], type_: str, name: str | None = None) -> PolicyResource:
    matches = [r for r in resources if r.resource_type == type_ and (name is None or name in r.name)]
    assert matches, f"no {type_} {name or ''} among the resources"
    return matches[0]


def gpu_node_group(resources: Sequence[PolicyResource]) -> PolicyResource:
    groups = [r for r in resources if r.resource_type == rules.EKS_MANAGED_NODE_GROUP and rules.node_group_uses_efa(r)]
    assert len(groups) == 1, [g.name for g in groups]
    return groups[0]


def worker_container(ray_service: PolicyResource) -> dict[str, Any]:
    return ray_service.props["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]


def head_container(ray_service: PolicyResource) -> dict[str, Any]:
    return ray_service.props["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]


# --- The stacks as the program registers them -----------------------------------------------------

@pytest.fixture(scope="module", params=["dev", "prod"])
def registered(request) -> tuple[str, list[PolicyResource]]:
    """(stack, resources) as the real program registers them under mocks."""
    return request.param, policy_resources(run_offline(request.param))


@pytest.fixture
def stack(registered) -> tuple[str, list[PolicyResource]]:
    """A private deep copy, so a test may break it."""
    name, resources = registered
    by_id = {id(r): copy.copy(r) for r in resources}
    for clone in by_id.values():
        clone.props = copy.deepcopy(clone.props)
        clone.dependencies = [by_id.get(id(d), d) for d in clone.dependencies]
        clone.parent = by_id.get(id(clone.parent), clone.parent)
    return name, list(by_id.values())


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_the_stacks_pass_every_policy(registered, policy_name):
    _, resources = registered
    assert violations(policy_name, resources) == []


def test_the_stacks_contain_what_the_policies_inspect(registered):
    """A policy that finds nothing to check passes vacuously; make sure it had something."""
    _, resources = registered
    types = {r.resource_type for r in resources}
    assert {rules.EKS_CLUSTER, rules.EKS_MANAGED_NODE_GROUP, rules.LAUNCH_TEMPLATE, rules.NAMESPACE,
            rules.RAY_SERVICE} <= types
    assert any(t in rules.HELM_CHART_TYPES for t in types)
    gpu_node_group(resources)  # exactly one EFA node group is recognised


# --- Each rule catches its violation --------------------------------------------------------------

def test_efa_node_group_across_two_azs_is_refused(stack):
    _, resources = stack
    group = gpu_node_group(resources)
    subnets = [r for r in resources if r.resource_type == rules.SUBNET and r.props.get("mapPublicIpOnLaunch") is False]
    other_az = next(s for s in subnets if s.props["availabilityZone"] not in
                    {d.props["availabilityZone"] for d in group.dependencies if d.resource_type == rules.SUBNET})
    group.dependencies.append(other_az)
    group.props["subnetIds"] = [*group.props["subnetIds"], "subnet-other-az"]
    group.props.pop("placementGroupAvailabilityZone", None)
    found = violations("efa-node-group-single-az", resources)
    assert len(found) == 1 and found[0][0] == group.urn and "one AZ" in found[0][1]


def test_efa_node_group_with_subnets_of_unknown_az_must_have_one_subnet():
    template = make_resource("dev", rules.LAUNCH_TEMPLATE, "lt", {"networkInterfaces": [{"interfaceType": "efa"}]})
    group = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "gpu", {"subnetIds": ["s-1", "s-2"]}, [template])
    assert "2 subnets" in violations("efa-node-group-single-az", [template, group])[0][1]
    group.props["subnetIds"] = ["s-1"]
    assert violations("efa-node-group-single-az", [template, group]) == []


def test_pulumi_eks_efa_support_counts_as_efa_and_its_placement_az_as_single_az():
    group = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "gpu",
                          {"enableEfaSupport": True, "subnetIds": ["s-1", "s-2", "s-3"]})
    assert len(violations("efa-node-group-single-az", [group])) == 1
    group.props["placementGroupAvailabilityZone"] = "us-west-2a"
    assert violations("efa-node-group-single-az", [group]) == []


def _serve_config(ray_service: PolicyResource) -> dict[str, Any]:
    return yaml.safe_load(ray_service.props["spec"]["serveConfigV2"])


@pytest.mark.parametrize("backends", [["UCX"], ["UCX", "LIBFABRIC"], None])
def test_efa_nodes_with_ucx_kv_transfer_are_refused(stack, backends):
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    config = _serve_config(service)
    transfer = config["applications"][0]["args"]["decode_config"]["engine_kwargs"]["kv_transfer_config"]
    if backends is None:  # no backends at all: vLLM's default, UCX
        del transfer["kv_connector_extra_config"]
    else:
        transfer["kv_connector_extra_config"]["backends"] = backends
    service.props["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    found = violations("efa-kv-transfer-libfabric", resources)
    assert len(found) == 1 and found[0][0] == service.urn
    assert "decode_config" in found[0][1] and "UCX" in found[0][1]


def test_ucx_is_not_the_policys_business_without_efa_nodes(stack):
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    config = _serve_config(service)
    for phase in ("prefill_config", "decode_config"):
        config["applications"][0]["args"][phase]["engine_kwargs"]["kv_transfer_config"][
            "kv_connector_extra_config"]["backends"] = ["UCX"]
    service.props["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    without_efa = [r for r in resources
                   if not (r.resource_type in rules.NODE_GROUP_TYPES and rules.node_group_uses_efa(r))]
    assert violations("efa-kv-transfer-libfabric", without_efa) == []
    assert len(violations("efa-kv-transfer-libfabric", resources)) == 2


def test_a_pd_phase_given_as_a_file_path_cannot_be_verified(stack):
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    config = _serve_config(service)
    config["applications"][0]["args"]["prefill_config"] = "/home/ray/prefill.yaml"
    service.props["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    assert "cannot be checked" in violations("efa-kv-transfer-libfabric", resources)[0][1]


def test_public_ips_on_nodes_are_refused(stack):
    _, resources = stack
    template = find(resources, rules.LAUNCH_TEMPLATE)
    interfaces = template.props.setdefault("networkInterfaces", [{"deviceIndex": 0}])
    interfaces[0]["associatePublicIpAddress"] = "true"
    found = violations("nodes-no-public-ip", resources)
    assert [urn for urn, _ in found] == [template.urn]


def test_node_group_in_a_public_subnet_is_refused(stack):
    _, resources = stack
    group = find(resources, rules.EKS_MANAGED_NODE_GROUP)
    group.dependencies.append(make_resource("dev", rules.SUBNET, "public-x", {"mapPublicIpOnLaunch": True}))
    assert [urn for urn, _ in violations("nodes-no-public-ip", resources)] == [group.urn]


def test_eks_default_node_group_with_public_ips_is_refused(stack):
    _, resources = stack
    cluster = find(resources, rules.EKS_CLUSTER)
    cluster.props["skipDefaultNodeGroup"] = False
    cluster.props.pop("nodeAssociatePublicIpAddress", None)
    assert [urn for urn, _ in violations("nodes-no-public-ip", resources)] == [cluster.urn]


def test_imdsv1_is_refused(stack):
    _, resources = stack
    template = find(resources, rules.LAUNCH_TEMPLATE)
    template.props["metadataOptions"] = {"httpTokens": "optional", "httpPutResponseHopLimit": 1}
    bare_group = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "bare", {"subnetIds": ["s-1"]})
    aws_group = make_resource("dev", rules.AWS_EKS_NODE_GROUP, "aws-bare", {"subnetIds": ["s-1"]})
    found = violations("imdsv2-required", [*resources, bare_group, aws_group])
    assert sorted(urn for urn, _ in found) == sorted([template.urn, bare_group.urn, aws_group.urn])
    assert "httpTokens" in dict(found)[template.urn]


def test_the_stacks_node_launch_templates_keep_imds_one_hop_away_from_pods(registered):
    """Both node groups launch from a template the rule checks, and it sets hop limit 1."""
    _, resources = registered
    groups = [r for r in resources if r.resource_type == rules.EKS_MANAGED_NODE_GROUP]
    assert len(groups) == 2
    for group in groups:
        [template] = rules.node_group_launch_templates(group)
        assert template.props["metadataOptions"]["httpPutResponseHopLimit"] == 1
        assert violations("imdsv2-required", [group, template]) == []


def test_imds_hop_limit_above_one_is_refused_on_the_stacks_templates(stack):
    _, resources = stack
    templates = [r for r in resources if r.resource_type == rules.LAUNCH_TEMPLATE]
    for template in templates:
        template.props["metadataOptions"]["httpPutResponseHopLimit"] = 2
    found = violations("imdsv2-required", resources)
    assert sorted(urn for urn, _ in found) == sorted(t.urn for t in templates)
    assert all("httpPutResponseHopLimit <= 1, got 2" in message for _, message in found)


@pytest.mark.parametrize("metadata_options, refused", [
    ({"httpTokens": "required", "httpPutResponseHopLimit": 2}, True),
    ({"httpTokens": "required"}, True),  # unset: the AMI's or account's default, 2 on AL2023
    ({"httpTokens": "required", "httpPutResponseHopLimit": "1"}, True),  # not a number the API takes
    ({"httpTokens": "required", "httpPutResponseHopLimit": 1}, False),
])
def test_imds_hop_limit_on_a_hand_made_launch_template(metadata_options, refused):
    template = make_resource("dev", rules.LAUNCH_TEMPLATE, "lt", {"metadataOptions": metadata_options})
    found = violations("imdsv2-required", [template])
    assert [message.split(",")[0] for _, message in found] == (
        ["launch template must set metadataOptions.httpPutResponseHopLimit <= 1"] if refused else [])


def test_pulumi_eks_enable_imdsv2_alone_is_refused():
    """pulumi-eks's enableIMDSv2 makes a launch template with hop limit 2 (nodes/nodegroup.ts)."""
    group = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "imdsv2-flag", {"enableIMDSv2": True})
    [(urn, message)] = violations("imdsv2-required", [group])
    assert urn == group.urn and "hop limit 1" in message


def test_unencrypted_secrets_are_refused(stack):
    _, resources = stack
    cluster = find(resources, rules.EKS_CLUSTER)
    cluster.props.pop("encryptionConfigKeyArn")
    aws_cluster = make_resource("dev", rules.AWS_EKS_CLUSTER, "c", {"encryptionConfig": {
        "resources": ["configmaps"], "provider": {"keyArn": "arn:aws:kms:us-west-2:1:key/1"}}})
    found = violations("eks-secrets-encrypted", [*resources, aws_cluster])
    assert sorted(urn for urn, _ in found) == sorted([cluster.urn, aws_cluster.urn])
    aws_cluster.props["encryptionConfig"]["resources"] = ["secrets"]
    assert [urn for urn, _ in violations("eks-secrets-encrypted", [aws_cluster])] == []


@pytest.mark.parametrize("endpoint", [
    {"publicAccessCidrs": ["0.0.0.0/0"]},
    {"publicAccessCidrs": ["203.0.113.0/24", "::/0"]},
    {"publicAccessCidrs": []},  # public endpoint, no list: EKS opens it to 0.0.0.0/0
    {"endpointPublicAccess": None, "publicAccessCidrs": None},  # all defaults
])
def test_world_open_api_endpoint_is_refused_in_production_only(stack, endpoint):
    stack_name, resources = stack
    cluster = find(resources, rules.EKS_CLUSTER)
    cluster.props.update({"endpointPublicAccess": True, **endpoint})
    cluster.props = {k: v for k, v in cluster.props.items() if v is not None}
    found = violations("prod-api-endpoint-not-public", resources)
    assert [urn for urn, _ in found] == ([cluster.urn] if stack_name == "prod" else [])


def test_production_stacks_are_configurable(stack):
    stack_name, resources = stack
    cluster = find(resources, rules.EKS_CLUSTER)
    cluster.props.update({"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]})
    found = violations("prod-api-endpoint-not-public", resources, {"productionStacks": [stack_name]})
    assert [urn for urn, _ in found] == [cluster.urn]


def test_private_endpoint_passes_in_production():
    cluster = make_resource("prod", rules.AWS_EKS_CLUSTER, "c", {"vpcConfig": {"endpointPublicAccess": False}})
    assert violations("prod-api-endpoint-not-public", [cluster]) == []


def test_privileged_container_outside_the_serving_namespace_is_refused(stack):
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    elsewhere = make_resource("dev", "kubernetes:apps/v1:Deployment", "debug", {
        "metadata": {"namespace": "default"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "shell", "image": "busybox:1.36", "securityContext": {"privileged": True}}]}}},
    })
    found = violations("privileged-pods-only-for-efa-serving", [*resources, elsewhere])
    assert [urn for urn, _ in found] == [elsewhere.urn]
    # The RayService moved away: the namespace labelled privileged for it no longer serves anything.
    service.props["metadata"]["namespace"] = "other"
    namespace = find(resources, rules.NAMESPACE, "inference")
    assert [urn for urn, _ in violations("privileged-pods-only-for-efa-serving", resources)] == [namespace.urn]


def test_privileged_head_pod_is_refused(stack):
    """In the serving namespace, only containers holding an EFA device may be privileged."""
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    head_container(service)["securityContext"] = {"privileged": True}
    found = violations("privileged-pods-only-for-efa-serving", resources)
    assert len(found) == 1 and "headGroupSpec" in found[0][1] and rules.EFA_RESOURCE in found[0][1]


def test_privileged_namespace_without_a_ray_service_is_refused(stack):
    _, resources = stack
    extra = make_resource("dev", rules.NAMESPACE, "tools", namespace_manifest("tools", "privileged"))
    assert [urn for urn, _ in violations("privileged-pods-only-for-efa-serving", [*resources, extra])] == [extra.urn]


@pytest.mark.parametrize("image, problem", [
    ("rayproject/ray", "no tag"),
    ("rayproject/ray:latest", "latest"),
    ("localhost:5000/ray", "no tag"),  # the registry port is not a tag
    ("", "no image"),
])
def test_floating_images_are_refused(stack, image, problem):
    _, resources = stack
    service = find(resources, rules.RAY_SERVICE)
    worker_container(service)["image"] = image
    found = violations("images-pinned", resources)
    assert len(found) == 1 and found[0][0] == service.urn and problem in found[0][1]


@pytest.mark.parametrize("image", ["rayproject/ray:2.60.0", "localhost:5000/ray:2.60.0",
                                   "rayproject/ray@sha256:" + "a" * 64])
def test_pinned_images_pass(image):
    assert rules.image_pin_problem(image) is None


def test_images_are_checked_in_every_workload_kind():
    pod_spec = {"containers": [{"name": "c", "image": "nginx"}]}
    workloads = [
        ("kubernetes:core/v1:Pod", {"spec": pod_spec}),
        ("kubernetes:apps/v1:DaemonSet", {"spec": {"template": {"spec": pod_spec}}}),
        ("kubernetes:batch/v1:CronJob", {"spec": {"jobTemplate": {"spec": {"template": {"spec": pod_spec}}}}}),
        ("kubernetes:ray.io/v1:RayCluster", {"spec": {"headGroupSpec": {"template": {"spec": pod_spec}}}}),
    ]
    resources = [make_resource("dev", t, f"w{i}", props) for i, (t, props) in enumerate(workloads)]
    assert len(violations("images-pinned", resources)) == len(workloads)


@pytest.mark.parametrize("version", [None, "", "latest", "^1.7.0", "~1.7", "1.x", ">=1.7.0", "1.7"])
def test_unpinned_helm_charts_are_refused(stack, version):
    _, resources = stack
    chart = next(r for r in resources if r.resource_type in rules.HELM_CHART_TYPES)
    chart.props["version"] = version
    assert [urn for urn, _ in violations("helm-charts-pinned", resources)] == [chart.urn]


def test_production_cluster_without_deletion_protection_is_refused(stack):
    stack_name, resources = stack
    cluster = find(resources, rules.EKS_CLUSTER)
    cluster.props["deletionProtection"] = False
    cluster.opts = Options(protect=False)
    found = violations("prod-deletion-protection", resources)
    assert [urn for urn, _ in found] == ([cluster.urn] if stack_name == "prod" else [])
    cluster.opts = Options(protect=True)  # the `protect` resource option is enough too
    assert violations("prod-deletion-protection", resources) == []


# --- The pack as a whole --------------------------------------------------------------------------

def test_every_rule_is_uniquely_named():
    assert len(set(POLICY_NAMES)) == len(POLICY_NAMES) == 11


def test_the_pack_shares_kubernetes_names_with_the_program():
    """The pack repeats these strings (it is published without the program's code)."""
    assert rules.EFA_RESOURCE == scheduling.EFA_RESOURCE
    labels = namespace_manifest("inference", "privileged")["metadata"]["labels"]
    assert labels[rules.PSA_ENFORCE_LABEL] == "privileged"


# Runs in .venv-policy: builds the pack's policies and runs each over resources read from stdin,
# in pulumi_policy's own argument objects, as the analyzer would.
_REAL_PACK_RUN = """
import json, sys
from pulumi_policy import (EnforcementLevel, PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions,
                           ResourceValidationArgs, StackValidationArgs, StackValidationPolicy)
from pack import PACK_NAME, policies

opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
given = json.load(sys.stdin)
resources = {r["urn"]: PolicyResource(r["type"], r["props"], r["urn"], r["name"], opts, None, None, [], {})
             for r in given}
for r in given:
    resources[r["urn"]].dependencies = [resources[d] for d in r["dependencies"] if d in resources]
found = {}
built = policies()
for policy in built:
    report = lambda message, urn=None, name=policy.name: found.setdefault(name, []).append(message)
    if isinstance(policy, StackValidationPolicy):
        policy.validate(StackValidationArgs(list(resources.values()), {}), report)
    else:
        for r in resources.values():
            policy.validate(ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, opts, None, {}), report)
print(json.dumps({
    "pack": PACK_NAME,
    "policies": {p.name: [type(p).__name__, p.enforcement_level == EnforcementLevel.MANDATORY] for p in built},
    "violations": found,
}))
"""


def run_real_pack(resources: Sequence[PolicyResource]) -> dict[str, Any]:
    if not POLICY_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{POLICY_PYTHON} missing: create it from policy/requirements.txt")
        pytest.skip(f"{POLICY_PYTHON} missing (created from policy/requirements.txt)")
    given = [{"type": r.resource_type, "props": r.props, "urn": r.urn, "name": r.name,
              "dependencies": [d.urn for d in r.dependencies]} for r in resources]
    done = subprocess.run([str(POLICY_PYTHON), "-c", _REAL_PACK_RUN], cwd=REPO / "policy", input=json.dumps(given),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_real_pack_passes_the_stack_and_catches_ucx_over_efa(stack):
    """pulumi_policy (in .venv-policy) takes every rule as a mandatory policy, and with its own
    argument objects the rules pass the registered stack and refuse a broken one."""
    _, resources = stack
    result = run_real_pack(resources)
    assert result["pack"] == "eks-pd-llm-guardrails"
    expected_type = {"resource": "ResourceValidationPolicy", "stack": "StackValidationPolicy"}
    assert result["policies"] == {rule.name: [expected_type[rule.scope], True] for rule in rules.RULES}
    assert result["violations"] == {}

    service = find(resources, rules.RAY_SERVICE)
    config = _serve_config(service)
    config["applications"][0]["args"]["prefill_config"]["engine_kwargs"]["kv_transfer_config"][
        "kv_connector_extra_config"]["backends"] = ["UCX"]
    service.props["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    violations_by_policy = run_real_pack(resources)["violations"]
    assert list(violations_by_policy) == ["efa-kv-transfer-libfabric"]
    assert "prefill_config" in violations_by_policy["efa-kv-transfer-libfabric"][0]


def test_rules_import_without_pulumi_policy():
    """The main environment cannot hold pulumi_policy; the rules must not need it."""
    blocked = "import sys; sys.modules['pulumi_policy'] = None; from policy import rules; print(len(rules.RULES))"
    done = subprocess.run([sys.executable, "-c", blocked], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(rules.RULES))


# --- GPU nodes bounded per environment ----------------------------------------------------------

def test_the_stacks_gpu_nodes_are_within_their_environments_bound(registered):
    name, resources = registered
    group = gpu_node_group(resources)
    assert rules.most_nodes(group) <= rules.max_gpu_nodes(name, {})
    assert violations("gpu-nodes-bounded-per-environment", resources) == []


def test_a_node_group_that_may_grow_past_the_bound_is_refused(stack):
    name, resources = stack
    group = gpu_node_group(resources)
    bound = rules.DEFAULT_MAX_GPU_NODES[name]
    group.props["scalingConfig"]["maxSize"] = bound + 1
    found = violations("gpu-nodes-bounded-per-environment", resources)
    assert len(found) == 1 and found[0][0] == group.urn
    assert f"may grow to {bound + 1} nodes" in found[0][1] and f"at most {bound}" in found[0][1]
    # Exactly at the bound passes.
    group.props["scalingConfig"]["maxSize"] = bound
    assert violations("gpu-nodes-bounded-per-environment", resources) == []


def test_the_gpu_node_bound_is_configurable_per_stack(stack):
    name, resources = stack
    gpu_node_group(resources).props["scalingConfig"]["maxSize"] = 6
    assert violations("gpu-nodes-bounded-per-environment", resources, {"maxGpuNodes": {name: 6}}) == []
    assert violations("gpu-nodes-bounded-per-environment", resources, {"maxGpuNodes": {name: 5}})
    # A stack the config does not name falls back to defaultMaxGpuNodes.
    assert violations("gpu-nodes-bounded-per-environment", resources,
                      {"maxGpuNodes": {}, "defaultMaxGpuNodes": 6}) == []


def test_an_offline_stack_with_the_node_autoscaler_is_bounded_too():
    resources = policy_resources(run_offline("dev", overrides={"gpuNodeMaxCount": "5", "decodeMaxReplicas": "4"}))
    (found,) = violations("gpu-nodes-bounded-per-environment", resources)
    assert "may grow to 5 nodes" in found[1] and "stack 'dev' allows at most 4" in found[1]


def test_a_gpu_node_group_without_a_maximum_cannot_be_checked():
    group = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "gpu", {"amiType": "AL2023_x86_64_NVIDIA"})
    (found,) = violations("gpu-nodes-bounded-per-environment", [group])
    assert "no known maximum size" in found[1]
    cpu = make_resource("dev", rules.EKS_MANAGED_NODE_GROUP, "cpu",
                        {"amiType": "AL2023_x86_64_STANDARD", "scalingConfig": {"maxSize": 50}})
    assert violations("gpu-nodes-bounded-per-environment", [cpu]) == []
