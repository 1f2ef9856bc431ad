"""`pdctl image-snapshot` against moto's EC2 API (never the network): the builder launched from the GPU
nodes' AMI with an empty volume and the script that fills it, the snapshot taken only when the builder
said it pulled the image, fast snapshot restore where asked, the builder and its volume removed however
it ends, and the value gpuImageSnapshotId takes. moto has no console output of our own nor fast snapshot
restore: a thin wrapper plays the builder's power-off and console line and records the restore call."""

from __future__ import annotations

import base64
from typing import Any

import boto3
import pytest
from moto import mock_aws

from components.config.names import SNAPSHOT_ARN
from components.node_storage import IMAGE_VOLUME_LABEL
from pdctl.image_snapshot import (
    AMI_PARAMETER,
    RESULT_FAILED,
    RESULT_OK,
    TAG_KEY,
    SnapshotRequest,
    build_image_snapshot,
    builder_script,
)

REGION = "us-west-2"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0"


class Builder:
    """moto's EC2 client, with what moto cannot play: the builder's script powering it off and its
    console line, and fast snapshot restore."""

    def __init__(self, ec2: Any, console: str) -> None:
        self.ec2, self.console, self.fast_restores = ec2, console, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ec2, name)

    def describe_instances(self, **kwargs: Any) -> dict:
        found = self.ec2.describe_instances(**kwargs)
        for instance in found["Reservations"][0]["Instances"]:
            if instance["State"]["Name"] == "running":  # the script powered it off
                self.ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
        return self.ec2.describe_instances(**kwargs)

    def get_console_output(self, **kwargs: Any) -> dict:
        return {"InstanceId": kwargs["InstanceId"], "Output": self.console}

    def enable_fast_snapshot_restores(self, **kwargs: Any) -> dict:
        self.fast_restores.append(kwargs)
        return {"Successful": [], "Unsuccessful": []}


class Parameters:
    """The public SSM parameter of the EKS AL2023 NVIDIA AMI (moto refuses names under /aws)."""

    def __init__(self, ami: str) -> None:
        self.ami, self.asked = ami, []

    def get_parameter(self, Name: str) -> dict:
        self.asked.append(Name)
        return {"Parameter": {"Name": Name, "Value": self.ami}}


@pytest.fixture
def cloud():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-west-2b")["Subnet"]
        ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        boto3.client("iam", region_name=REGION).create_instance_profile(InstanceProfileName="image-builder")
        yield ec2, subnet["SubnetId"], ami


def request(subnet: str, **changes: Any) -> SnapshotRequest:
    return SnapshotRequest(**{"image": IMAGE, "region": REGION, "kubernetes_version": "1.34", "subnet_id": subnet,
                              "instance_profile": "image-builder", **changes})


def test_the_snapshot_is_of_the_builders_volume_once_it_pulled_the_image(cloud):
    ec2, subnet, ami = cloud
    builder, parameters = Builder(ec2, f"boot\n{RESULT_OK} {IMAGE}\n"), Parameters(ami)
    result = build_image_snapshot(request(subnet, fast_restore_az="us-west-2b"), ec2=builder, ssm=parameters,
                                  poll_s=0, log=lambda _: None)
    # The GPU nodes' AMI: the EKS AL2023 NVIDIA one of the cluster's Kubernetes version.
    assert parameters.asked == [AMI_PARAMETER.format(version="1.34")]
    assert parameters.asked[0].endswith("/amazon-linux-2023/x86_64/nvidia/recommended/image_id")
    # The value to set: the snapshot's ARN in the stack's region, which the setting accepts.
    arn = SNAPSHOT_ARN.match(result.arn)
    assert arn is not None and (arn[1], arn[2]) == (REGION, result.snapshot_id)
    (snapshot,) = ec2.describe_snapshots(SnapshotIds=[result.snapshot_id])["Snapshots"]
    assert snapshot["VolumeSize"] == 100 and IMAGE in snapshot["Description"]
    assert builder.fast_restores == [{"AvailabilityZones": ["us-west-2b"], "SourceSnapshotIds": [result.snapshot_id]}]
    # Nothing left behind: the builder terminated, its volume deleted.
    (instance,) = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert instance["State"]["Name"] == "terminated"
    assert instance["ImageId"] == ami and instance["InstanceType"] == "m6i.2xlarge"
    assert ec2.describe_volumes(Filters=[{"Name": "tag-key", "Values": [TAG_KEY]}])["Volumes"] == []
    assert snapshot["VolumeId"] not in {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]}
    user_data = ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
    assert base64.b64decode(user_data["UserData"]["Value"]).decode() == builder_script(IMAGE)


def test_no_snapshot_when_the_builder_did_not_pull_and_nothing_is_left(cloud):
    ec2, subnet, ami = cloud
    builder = Builder(ec2, f"boot\n{RESULT_FAILED} line 14\n")
    with pytest.raises(RuntimeError, match=r"did not pull .*\(EKS-PD-LLM-IMAGE-SNAPSHOT FAILED line 14\): aws ec2 "
                                           "get-console-output"):
        build_image_snapshot(request(subnet), ec2=builder, ssm=Parameters(ami), poll_s=0, log=lambda _: None)
    ours = [{"Name": "tag-key", "Values": [TAG_KEY]}]
    assert ec2.describe_snapshots(Filters=ours)["Snapshots"] == []
    (instance,) = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert instance["State"]["Name"] == "terminated"
    assert ec2.describe_volumes(Filters=ours)["Volumes"] == []
    assert builder.fast_restores == []


@pytest.mark.parametrize(("changes", "says"), [
    ({"subnet_id": "vpc-123"}, "--subnet-id 'vpc-123': a subnet ID"),
    ({"fast_restore_az": "eu-west-1a"}, "--fast-restore-az 'eu-west-1a': an AZ of us-west-2"),
    ({"size_gib": 10}, "--size-gib 10: 20 to 16384"),
    ({"image": IMAGE.replace("us-west-2", "eu-west-1")}, "its registry is in eu-west-1; use the stack region's copy"),
])
def test_bad_options_are_refused_before_anything_is_launched(cloud, changes, says):
    ec2, subnet, ami = cloud
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        build_image_snapshot(request(subnet, **changes), ec2=Builder(ec2, ""), ssm=Parameters(ami), poll_s=0)
    assert ec2.describe_instances()["Reservations"] == []


def test_the_builder_prepares_the_volume_as_a_node_mounts_it():
    script = builder_script(IMAGE)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    # The label the nodes mount by, the AMI's own cached images kept, the image in the kubelet's namespace
    # with an ECR token of the image's region, and the result line the command reads.
    assert f"mkfs.xfs -f -L {IMAGE_VOLUME_LABEL} \"$volume\"" in lines
    assert "cp -a /var/lib/containerd/. /mnt/eks-pd-llm-images/" in lines
    assert (f'ctr --namespace k8s.io images pull --user "AWS:$(aws ecr get-login-password --region us-west-2)" '
            f"{IMAGE}") in lines
    assert f'echo "{RESULT_OK} {IMAGE}" > /dev/console' in lines and lines[-1] == "systemctl poweroff"
    public = builder_script("public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda")
    assert "ctr --namespace k8s.io images pull public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda" in public
