"""Region, AZs and instance types judged by what EC2 answers at preview, both ways.

Each test makes the EC2 answers it needs (`CloudMocks(..., instance_types=..., zones=...)`) and runs
the program's own discovery through Pulumi's mocks, or the whole program offline: never the network.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.config.declared import project_name
from components.config.nodes import GpuNodeSettings, SystemNodeSettings
from components.config.stack import settings_from_config
from components.config.zones import RegionSettings
from components.discovery import CloudQuery, NodeTypeQuestion
from facts.instances import RECORDED_EC2_ANSWERS, UNLISTED_GPU_USABLE_FRACTION, Ec2Gpu, Ec2InstanceType
from offline import ask_recorded_cloud, run_offline, stack_config, try_run_offline
from offline.mock_cloud import CloudMocks
from serve_app.errors import ConfigError

# Shaped like DescribeInstanceTypes answers, handed to the mock by the tests: a GPU type, and a few
# that lack what a role needs.
G6E_12XLARGE = Ec2InstanceType(
    name="g6e.12xlarge", vcpus=48, memory_mib=384 * 1024, gpus=(Ec2Gpu("L40S", "NVIDIA", 4, 45_776),),
    efa_supported=True, efa_maximum_interfaces=1, network_cards_gbps=(100.0,), instance_storage_gb=3_800)
M6I_XLARGE = Ec2InstanceType(name="m6i.xlarge", vcpus=4, memory_mib=16 * 1024, network_cards_gbps=(12.5,))
T3_MEDIUM = Ec2InstanceType(name="t3.medium", vcpus=2, memory_mib=4 * 1024, network_cards_gbps=(5.0,))
M7G_XLARGE = Ec2InstanceType(name="m7g.xlarge", vcpus=4, memory_mib=16 * 1024, architectures=("arm64",),
                             network_cards_gbps=(12.5,))
ANSWERS = {a.name: a for a in (G6E_12XLARGE, M6I_XLARGE, T3_MEDIUM, M7G_XLARGE)}


def settings(stack: str = "dev", *, mocks_args: dict[str, Any] | None = None, **overrides: str):
    raw, _ = stack_config(stack)
    raw.update(overrides)

    def ask(query: CloudQuery):
        return ask_recorded_cloud(query, mocks=CloudMocks(query.region, instance_types=ANSWERS, **(mocks_args or {})))

    return settings_from_config(raw, project=project_name(), stack=stack, ask_cloud=ask)


def refused(**overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        settings(**overrides)
    return caught.value


# ── Instance types ───────────────────────────────────────────────────────────────────────────

def test_an_efa_gpu_type_outside_any_list_is_sized_from_ec2s_answer():
    # Two nodes: prefill and decode each take a whole node (their own worker group).
    s = settings(gpuNodeType="g6e.12xlarge", gpuNodeCount="2")
    gpu = s.serving.gpu_instance
    assert (gpu.gpus, gpu.gpu_model, gpu.efa_interfaces, gpu.network_gbps) == (4, "L40S", 1, 100.0)
    # L40S has no CUDA total on record: the documented fraction of EC2's nominal size.
    assert gpu.gpu_memory_mib_usable == int(45_776 * UNLISTED_GPU_USABLE_FRACTION)
    assert (s.serving.worker.gpus, s.serving.worker.efa_interfaces) == (4, 1)
    assert s.serving.app.capacity["decode"].gpu_model == "L40S"


@pytest.mark.parametrize(("gpu_type", "why"), [
    ("m7i.xlarge", "EC2 says it has no NVIDIA GPU; the vLLM engines need one"),
    ("g6.4xlarge", "EC2 says it does not support EFA; prefill/decode KV transfer needs it"),
])
def test_a_gpu_type_without_a_gpu_or_efa_is_refused_saying_which(gpu_type, why):
    error = refused(gpuNodeType=gpu_type)
    assert error.setting == "gpuNodeType" and error.why == why


def test_a_type_the_offline_cloud_does_not_know_is_refused_as_not_recorded():
    error = refused(gpuNodeType="g9x.huge")
    assert error.setting == "gpuNodeType" and "not recorded offline: g9x.huge" in str(error)


def recorded_settings(**overrides: str):
    """The dev stack judged against the offline cloud's recorded types only (what `make plan` sees)."""
    raw, _ = stack_config("dev")
    raw.update(overrides)
    return settings_from_config(raw, project=project_name(), stack="dev",
                                ask_cloud=lambda query: ask_recorded_cloud(query, mocks=CloudMocks(query.region)))


@pytest.mark.parametrize(("gpu_type", "why"), [
    ("m7i.8xlarge", "EC2 says it has no NVIDIA GPU; the vLLM engines need one"),
    ("g5.xlarge", "EC2 says it does not support EFA; prefill/decode KV transfer needs it"),
])
def test_offline_a_real_type_without_a_gpu_or_efa_is_refused_for_that_not_as_unknown(gpu_type, why):
    with pytest.raises(ConfigError) as caught:
        recorded_settings(gpuNodeType=gpu_type)
    assert caught.value.setting == "gpuNodeType" and caught.value.why == why


def test_offline_a_type_not_recorded_is_refused_as_not_recorded_not_as_nonexistent():
    with pytest.raises(ConfigError) as caught:
        recorded_settings(gpuNodeType="p6-b200.48xlarge")
    said = str(caught.value)
    assert caught.value.setting == "gpuNodeType" and "not recorded offline: p6-b200.48xlarge is not among" in said
    assert "AWS says" not in said and "invoke of" not in said and said.endswith("`pulumi preview` asks EC2 itself)")


@pytest.mark.parametrize("gpu_type", ["g6e.12xlarge", "g6e.48xlarge", "g5.12xlarge", "p4d.24xlarge",
                                      "p5.48xlarge", "p5en.48xlarge"])
def test_offline_every_recorded_efa_gpu_type_is_accepted_with_its_efa_interfaces(gpu_type):
    answer = RECORDED_EC2_ANSWERS[gpu_type]
    worker = recorded_settings(gpuNodeType=gpu_type).serving.worker
    assert worker.efa_interfaces == answer.efa_maximum_interfaces >= 1


def test_any_x86_64_system_type_with_enough_cpu_and_memory_is_accepted():
    assert settings(systemNodeType="m6i.xlarge").system_nodes.instance_type == "m6i.xlarge"
    assert settings(systemNodeType="g6.8xlarge").system_nodes.instance_type == "g6.8xlarge"


@pytest.mark.parametrize(("system_type", "said"), [
    ("t3.medium", "EC2 says 2 vCPUs and 4 GiB"),
    ("m7g.xlarge", "EC2 says it is arm64; the node AMI is x86_64"),
])
def test_a_system_type_too_small_or_of_another_architecture_is_refused(system_type, said):
    error = refused(systemNodeType=system_type)
    assert error.setting == "systemNodeType" and said in str(error)


def test_the_whole_program_builds_the_new_types_launch_template_and_worker_from_ec2():
    mocks = CloudMocks("us-west-2", instance_types=ANSWERS)
    run = run_offline("dev", overrides={"gpuNodeType": "g6e.12xlarge", "gpuNodeCount": "2"}, mocks=mocks)
    template = run.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-nodes-lt")
    assert [nic["interfaceType"] for nic in template.inputs["networkInterfaces"]] == ["efa"]
    worker = run.one("kubernetes:ray.io/v1:RayService").inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "4" and limits["vpc.amazonaws.com/efa"] == "1"


# ── Region and AZs ───────────────────────────────────────────────────────────────────────────

def test_a_region_ec2_does_not_list_is_refused_before_any_resource():
    error = refused(**{"aws:region": "us-west-3"})
    assert error.setting == "aws:region" and "us-west-2" in error.allowed
    failed = try_run_offline("dev", overrides={"aws:region": "us-west-3"})
    assert isinstance(failed.error, ConfigError) and failed.registered == []


def test_a_region_ec2_lists_is_accepted():
    assert settings(**{"aws:region": "eu-west-1"}).region == "eu-west-1"


class _FailingZones(CloudMocks):
    """The account lists the region, but EC2 fails the AZ call (no access there, say)."""

    def call(self, args):
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {}, [("state", "UnauthorizedOperation: You are not authorized to perform this operation.")]
        return super().call(args)


def test_a_failing_zones_call_is_a_region_error():
    with pytest.raises(ConfigError) as caught:
        ask_recorded_cloud(CloudQuery("us-west-2", RegionSettings.field("region"),
                                      NodeTypeQuestion(GpuNodeSettings.field("instance_type"), "g6.8xlarge"),
                                      NodeTypeQuestion(SystemNodeSettings.field("instance_type"), "m7i.xlarge")),
                           mocks=_FailingZones("us-west-2"))
    assert caught.value.setting == "aws:region" and "UnauthorizedOperation" in str(caught.value)


def test_the_control_plane_skips_use1_az3_while_the_gpu_nodes_sit_there():
    # The recorded us-east-1: us-east-1e is use1-az3 and offers g6.8xlarge.
    run = run_offline("dev", overrides={"aws:region": "us-east-1", "gpuAvailabilityZone": "use1-az3",
                                        "azCount": "3"})
    subnets = run.all("aws:ec2/subnet:Subnet")
    assert {s.inputs["availabilityZone"] for s in subnets} == {"us-east-1e", "us-east-1c", "us-east-1d"}
    cluster = run.one("eks:index:Cluster")
    gpu_group = run.one("eks:index:ManagedNodeGroup", "gpu-nodes")
    # What each takes subnet ids from: the subnets it depends on directly.
    cluster_zones = {s.inputs["availabilityZone"] for s in subnets if s.urn in cluster.dependencies}
    gpu_zones = {s.inputs["availabilityZone"] for s in subnets if s.urn in gpu_group.dependencies}
    assert cluster_zones == {"us-east-1c", "us-east-1d"} and gpu_zones == {"us-east-1e"}
    assert len(cluster.inputs["privateSubnetIds"]) == len(cluster.inputs["publicSubnetIds"]) == 2
    assert run.outputs["gpuAvailabilityZoneId"] == "use1-az3"


def test_azs_are_chosen_by_zone_id():
    # In this account us-west-2d is usw2-az1: the first by ID, though last by name.
    zones = {"us-west-2a": "usw2-az3", "us-west-2b": "usw2-az4", "us-west-2c": "usw2-az2", "us-west-2d": "usw2-az1"}
    s = settings(mocks_args={"zones": zones, "offerings": {"g6.8xlarge": ("us-west-2a", "us-west-2d")}})
    assert (s.zones.gpu_zone.name, s.zones.gpu_zone.zone_id) == ("us-west-2d", "usw2-az1")
    assert [z.zone_id for z in s.zones.network_zones] == ["usw2-az1", "usw2-az2"]


def test_aws_reasons_reach_the_user_without_the_sdks_wrapping():
    from components.discovery import _first_line

    raised = Exception("invoke of aws:ec2/getInstanceType:getInstanceType failed: InvalidInstanceType: The "
                       "following supplied instance types do not exist: [g9x.huge] (instanceType)\ntraceback …")
    assert _first_line(raised) == "InvalidInstanceType: The following supplied instance types do not exist: [g9x.huge]"
    assert _first_line(Exception("no route to host")) == "no route to host"
