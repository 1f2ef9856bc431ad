"""`pdctl image-snapshot`: an EBS snapshot of containerd's store with the Ray image pulled, the value of
`gpuImageSnapshotId` (docs/SOURCES.md#image-snapshot).

A builder instance of the GPU nodes' own AMI (the EKS-optimized AL2023 NVIDIA AMI for the cluster's
Kubernetes version, from its public SSM parameter: the same containerd the nodes run) boots with a
second, empty gp3 volume. Its user data (`builder_script`) formats that volume as XFS labelled
IMAGE_VOLUME_LABEL (the label the nodes mount it by), copies the AMI's own containerd state onto it
(the images EKS caches in its AMI), mounts it as /var/lib/containerd, pulls the Ray image into the
k8s.io namespace (the one the kubelet reads), writes one result line to the console and powers off.
The command waits for the instance to stop, reads that line from the console output, snapshots the
volume, turns fast snapshot restore on in the GPU AZ when asked (new volumes then read at full speed
at once; it is billed per hour and AZ), and terminates the instance and deletes the volume however it
ends. boto3 clients are passed in, so a local EC2/SSM API (moto) can stand in for AWS.

The caller needs ssm:GetParameter on the AMI parameter, ec2:RunInstances (with iam:PassRole for the
builder's instance profile), DescribeInstances, GetConsoleOutput, CreateSnapshot, DescribeSnapshots,
EnableFastSnapshotRestores, TerminateInstances, DeleteVolume and CreateTags on what it launches.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.config.names import AVAILABILITY_ZONE
from components.node_storage import CONTAINERD_STATE, IMAGE_VOLUME_DEVICE, IMAGE_VOLUME_LABEL

# The EKS-optimized AL2023 NVIDIA AMI the GPU node groups run (AMI type AL2023_x86_64_NVIDIA).
AMI_PARAMETER = "/aws/service/eks/optimized-ami/{version}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
# An ECR registry's host names its region; a pull from it needs a token (the instance profile's).
ECR_HOST = re.compile(r"^\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/")
RESULT_OK = "EKS-PD-LLM-IMAGE-SNAPSHOT OK"
RESULT_FAILED = "EKS-PD-LLM-IMAGE-SNAPSHOT FAILED"
BUILD_MOUNT = "/mnt/eks-pd-llm-images"
DEFAULT_SIZE_GIB = 100  # the Ray LLM image unpacked, with room for the containers' writable layers
DEFAULT_INSTANCE_TYPE = "m6i.2xlarge"  # no GPU needed to pull; network up to 12.5 Gbps
TAG_KEY = "eks-pd-llm/image-snapshot"


def builder_script(image: str) -> str:
    """The builder's user data: the volume prepared as a node will mount it, the image pulled into it,
    one result line on the console, then power off (the instance stops, as the command asks)."""
    device = f"/dev/disk/by-label/{IMAGE_VOLUME_LABEL}"
    ecr = ECR_HOST.match(image)
    credentials = (f'--user "AWS:$(aws ecr get-login-password --region {ecr[1]})" ' if ecr else "")
    return "\n".join((
        "#!/bin/bash",
        "set -uo pipefail",
        f"trap 'echo \"{RESULT_FAILED} line $LINENO\" > /dev/console; systemctl poweroff' ERR",
        "set -e",
        "for _ in $(seq 60); do [ -e /dev/nvme1n1 ] || [ -e /dev/xvdb ] && break; sleep 1; done",
        f"volume=$(readlink -f {IMAGE_VOLUME_DEVICE} 2>/dev/null || echo /dev/nvme1n1)",
        "systemctl stop kubelet containerd || true",
        f"mkfs.xfs -f -L {IMAGE_VOLUME_LABEL} \"$volume\"",
        "udevadm settle",
        f"mkdir -p {BUILD_MOUNT} && mount {device} {BUILD_MOUNT}",
        f"cp -a {CONTAINERD_STATE}/. {BUILD_MOUNT}/",
        f"umount {BUILD_MOUNT} && mount {device} {CONTAINERD_STATE}",
        "systemctl start containerd",
        f"ctr --namespace k8s.io images pull {credentials}{shlex.quote(image)}",
        f"ctr --namespace k8s.io images check | grep -F {shlex.quote(image)} | grep -q complete",
        "systemctl stop containerd",
        f"umount {CONTAINERD_STATE}",
        f"echo \"{RESULT_OK} {image}\" > /dev/console",
        "systemctl poweroff",
        "",
    ))


@dataclass(frozen=True)
class SnapshotRequest:
    image: str
    region: str
    kubernetes_version: str
    subnet_id: str
    instance_profile: str  # may pull from ECR (AmazonEC2ContainerRegistryReadOnly)
    fast_restore_az: str | None = None
    size_gib: int = DEFAULT_SIZE_GIB
    instance_type: str = DEFAULT_INSTANCE_TYPE

    def check(self) -> None:
        """ValueError, naming the option, for what AWS would refuse later or the nodes could not use."""
        if not self.subnet_id.startswith("subnet-"):
            raise ValueError(f"--subnet-id {self.subnet_id!r}: a subnet ID (subnet-…) with a route to the registry")
        if self.fast_restore_az is not None and not (AVAILABILITY_ZONE.match(self.fast_restore_az)
                                                    and self.fast_restore_az.startswith(self.region)):
            raise ValueError(f"--fast-restore-az {self.fast_restore_az!r}: an AZ of {self.region} by name (the GPU "
                             "nodes' gpuAvailabilityZone)")
        if not 20 <= self.size_gib <= 16384:
            raise ValueError(f"--size-gib {self.size_gib}: 20 to 16384 (gp3), room for the image unpacked")
        ecr = ECR_HOST.match(self.image)
        if ecr and ecr[1] != self.region:
            raise ValueError(f"--image {self.image!r}: its registry is in {ecr[1]}; use the stack region's copy "
                             f"({self.region})")


@dataclass(frozen=True)
class SnapshotResult:
    snapshot_id: str
    arn: str  # what to set gpuImageSnapshotId to
    fast_restore_az: str | None


def snapshot_arn(region: str, snapshot_id: str) -> str:
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    return f"arn:{partition}:ec2:{region}::snapshot/{snapshot_id}"


def build_image_snapshot(request: SnapshotRequest, *, ec2: Any, ssm: Any, timeout_s: float = 45 * 60,
                         poll_s: float = 15.0, log: Callable[[str], None] = print) -> SnapshotResult:
    """Build the snapshot (see the module note). RuntimeError when the builder did not report success."""
    request.check()
    ami = ssm.get_parameter(Name=AMI_PARAMETER.format(version=request.kubernetes_version))["Parameter"]["Value"]
    tags = [{"Key": TAG_KEY, "Value": request.image}, {"Key": "Name", "Value": "eks-pd-llm image snapshot builder"}]
    launched = ec2.run_instances(
        ImageId=ami, InstanceType=request.instance_type, MinCount=1, MaxCount=1, SubnetId=request.subnet_id,
        IamInstanceProfile={"Name": request.instance_profile}, UserData=builder_script(request.image),
        InstanceInitiatedShutdownBehavior="stop",
        MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled"},
        BlockDeviceMappings=[{"DeviceName": IMAGE_VOLUME_DEVICE, "Ebs": {
            "VolumeSize": request.size_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": False}}],
        TagSpecifications=[{"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume")])
    instance_id = launched["Instances"][0]["InstanceId"]
    log(f"builder {instance_id} ({ami}) pulling {request.image}")
    volume_id = None
    try:
        state = _wait_for_stop(ec2, instance_id, timeout_s, poll_s)
        volume_id = _image_volume(ec2, instance_id)
        console = ec2.get_console_output(InstanceId=instance_id, Latest=True).get("Output") or ""
        if state != "stopped" or f"{RESULT_OK} {request.image}" not in console:
            failed = [line for line in console.splitlines() if RESULT_FAILED in line]
            raise RuntimeError(f"the builder {instance_id} did not pull {request.image} "
                               f"({failed[-1].strip() if failed else f'state {state}, no result line'}): "
                               f"aws ec2 get-console-output --instance-id {instance_id} shows why")
        snapshot_id = ec2.create_snapshot(
            VolumeId=volume_id, Description=f"containerd store with {request.image} (pdctl image-snapshot)",
            TagSpecifications=[{"ResourceType": "snapshot", "Tags": tags[:1]}])["SnapshotId"]
        log(f"snapshot {snapshot_id} of {volume_id}")
        ec2.get_waiter("snapshot_completed").wait(SnapshotIds=[snapshot_id],
                                                  WaiterConfig={"Delay": int(poll_s), "MaxAttempts": 240})
        if request.fast_restore_az:
            ec2.enable_fast_snapshot_restores(AvailabilityZones=[request.fast_restore_az],
                                              SourceSnapshotIds=[snapshot_id])
        return SnapshotResult(snapshot_id, snapshot_arn(request.region, snapshot_id), request.fast_restore_az)
    finally:
        ec2.terminate_instances(InstanceIds=[instance_id])
        if volume_id is not None:
            ec2.get_waiter("instance_terminated").wait(InstanceIds=[instance_id],
                                                       WaiterConfig={"Delay": int(poll_s), "MaxAttempts": 60})
            ec2.delete_volume(VolumeId=volume_id)


def _wait_for_stop(ec2: Any, instance_id: str, timeout_s: float, poll_s: float) -> str:
    """The builder's state once it stopped (its script powers it off), or the last one seen at the timeout."""
    end, state = time.monotonic() + timeout_s, "pending"
    while time.monotonic() < end:
        state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
        if state in ("stopped", "terminated"):
            return state
        time.sleep(poll_s)
    return state


def _image_volume(ec2: Any, instance_id: str) -> str:
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    mappings = instance["BlockDeviceMappings"]
    (volume,) = [m["Ebs"]["VolumeId"] for m in mappings if m["DeviceName"] == IMAGE_VOLUME_DEVICE]
    return volume
