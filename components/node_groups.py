"""EKS managed node groups: the system group (CPU) and the EFA GPU group prefill and decode run on.

Both use a launch template this module creates, so what every node gets is in the Pulumi graph:
IMDSv2 required with a hop limit of 1 (host-network pods such as the VPC CNI and kube-proxy
still reach it; pods in their own network namespace cannot fetch the node role's credentials),
an encrypted gp3 root volume, and for GPU nodes the EFA interface, the cluster placement group and
node-local storage (`components/node_storage.py`: instance-store NVMe as RAID0 through nodeadm).

Why an explicit launch template + placement group + EFA security group, rather than pulumi-eks's
`enable_efa_support`: that option builds the same three things inside the remote ManagedNodeGroup
component, where a preview shows one opaque resource and mocked tests see nothing. Built here, each
piece is a resource of its own: a preview diff shows a change to the EFA interface or the placement
group, the offline plan lists them, and the tests assert them. (pulumi-eks refuses to combine a custom
`launch_template` with `enable_efa_support`/`enable_imd_sv2`, so it is one approach or the other.)

The node groups receive the cluster's core data (`Cluster.core`), `cluster_name` and `node_role_arn`
rather than the `eks.Cluster` and `aws.iam.Role` objects: a resource object travels as a resource
reference, which the mock engine re-creates on its own event loop, and the mocked run hangs
("attached to a different loop") once the kubeconfig is consumed. The values carry the same
dependencies, and an explicit `cluster_name` is known at preview time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components.cluster import Cluster
from components.config.nodes import GpuNodeGroupSpec, SystemNodeSettings
from components.network import Network
from components.node_boot import user_data
from components.node_storage import (
    GP3_IOPS_FOR_MAX_THROUGHPUT,
    GP3_MAX_THROUGHPUT_MIBPS,
    IMAGE_VOLUME_DEVICE,
    IMAGE_VOLUME_INITIALIZATION_MIBPS,
    NodeStorage,
)
from components.scheduling import (
    ACCELERATOR_LABEL,
    GPU_ROLE,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    SYSTEM_NODE_SELECTOR,
    SYSTEM_ROLE,
    accelerator_label_value,
)
from facts.instances import InstanceType
from serve_app.config import Phase

SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
CAPACITY_TYPE = "ON_DEMAND"
# AL2023 NVIDIA AMIs carry the NVIDIA driver and the EFA kernel driver (docs/SOURCES.md#al2023-nvidia-ami).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"
ROOT_DEVICE = "/dev/xvda"  # root volume of AL2023 AMIs
# 1: an IMDSv2 token cannot cross the extra hop into a pod's network namespace, so only
# host-network pods get the node role's credentials. Nothing this stack runs needs them in a pod.
IMDS_HOP_LIMIT = 1

# The EKS API spells taint effects in upper snake case; Kubernetes in camel case.
_EKS_TAINT_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def _launch_template(
    name: str,
    *,
    disk_gib: int,
    tags: dict[str, str],
    stack_tags: dict[str, str],
    parent: pulumi.Resource,
    network_interfaces: Sequence[aws.ec2.LaunchTemplateNetworkInterfaceArgs] | None = None,
    placement_group: pulumi.Input[str] | None = None,
    storage: NodeStorage | None = None,
    security_group_ids: Sequence[pulumi.Input[str]] = (),
) -> aws.ec2.LaunchTemplate:
    """A managed-node-group launch template, tagged `stack_tags` and `tags`, its nodes and their volumes
    `tags`: IMDSv2, encrypted gp3 root; EFA, placement, node-local
    storage and huge pages (boot user data, the root's IOPS and throughput) and security groups optional
    (security groups named here replace the cluster security group EKS would add, so pass it among
    them)."""
    return aws.ec2.LaunchTemplate(
        name,
        description=f"EKS managed nodes: {name}",
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=IMDS_HOP_LIMIT),
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=ROOT_DEVICE,
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=disk_gib, volume_type="gp3", encrypted="true", delete_on_termination="true",
                iops=storage.root_iops if storage else None,
                throughput=storage.root_throughput_mibps if storage else None),
        ), *_image_volume(storage)],
        network_interfaces=list(network_interfaces) if network_interfaces else None,
        vpc_security_group_ids=list(security_group_ids) or None,
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group) if placement_group else None,
        user_data=user_data(storage) if storage else None,
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
            for kind in ("instance", "volume")
        ],
        update_default_version=True,
        # The stack tag on the template only: in its tag specifications it would make a new version,
        # which rolls every node of the group (docs/SOURCES.md#launch-template-versions).
        tags={**stack_tags, **tags},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _image_volume(storage: NodeStorage | None) -> list[aws.ec2.LaunchTemplateBlockDeviceMappingArgs]:
    """The volume restored from gpuImageSnapshotId (containerd's state with the Ray image), if set: the
    snapshot's own size, at gp3's ceiling so the engine's first reads of the image are not throttled,
    and initialized from S3 at EBS's fastest rate where fast snapshot restore is off."""
    if storage is None or not storage.image_snapshot_id:
        return []
    return [aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
        device_name=IMAGE_VOLUME_DEVICE,
        ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
            snapshot_id=storage.image_snapshot_id, volume_type="gp3", encrypted="true",
            delete_on_termination="true", iops=GP3_IOPS_FOR_MAX_THROUGHPUT, throughput=GP3_MAX_THROUGHPUT_MIBPS,
            volume_initialization_rate=IMAGE_VOLUME_INITIALIZATION_MIBPS),
    )]


def _template_ref(template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroupLaunchTemplateArgs:
    return aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str))


def _scaling(count: int, most: int) -> aws.eks.NodeGroupScalingConfigArgs:
    # Created at its minimum; between min and max only the Cluster Autoscaler moves desired.
    return aws.eks.NodeGroupScalingConfigArgs(desired_size=count, min_size=count, max_size=most)


def gpu_node_group_resource_name(own_phase: Phase | None = None) -> str:
    """The Pulumi name of a GPU node group (and the prefix of its children): gpuNodeType's group is
    `gpu-nodes`, a phase's own `<phase>-gpu-nodes`."""
    return f"{own_phase}-gpu-nodes" if own_phase else "gpu-nodes"


def gpu_node_group_name_prefix(cluster_name: str, own_phase: Phase | None = None) -> str:
    """The readable part of a GPU managed node group's name: gpuNodeType's group is `<cluster>-gpu`, a
    phase's own `<cluster>-gpu-<phase>`."""
    return f"{cluster_name}-gpu" + (f"-{own_phase}" if own_phase else "")


def node_group_name(prefix: str, new_group_inputs: Mapping[str, Any]) -> str:
    """`<prefix>-<8 hex digits of the inputs that force a new group>`: the name changes exactly when EKS
    needs a new group, so Pulumi's replacement creates the new group (under its new name) before it
    deletes the old one, where a fixed name fails with "NodeGroup already exists"
    (docs/SOURCES.md#node-group-replacement), and keeps it otherwise. At most 61 characters
    (clusterName ≤ 40); EKS allows 63."""
    digest = hashlib.sha256(json.dumps(dict(new_group_inputs), sort_keys=True, default=str).encode()).hexdigest()
    return f"{prefix}-{digest[:8]}"


def _managed_node_group(
    name: str,
    *,
    cluster: Cluster,
    ami_type: str,
    instance_type: str,
    count: int,
    most: int,
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    labels: dict[str, str],
    launch_template: aws.ec2.LaunchTemplate,
    tags: dict[str, str],
    parent: pulumi.Resource,
    taints: Sequence[aws.eks.NodeGroupTaintArgs] | None = None,
    name_prefix: str | None = None,
) -> tuple[eks.ManagedNodeGroup, pulumi.Output[str] | None]:
    """An on-demand managed node group of `count` to `most` nodes, its nodes labelled `labels`, and its
    name when `name_prefix` asks for one (`node_group_name`); unnamed, Pulumi names it with a random
    suffix, new at each replacement."""
    # The inputs the node group takes that EKS cannot change in place (facts/replacements.py, the node
    # group's ForceNew list), keyed as there. A name is given, not left to Pulumi, only where another
    # resource must know it; create-before-delete then needs the name to change with these inputs,
    # since the option deleteBeforeReplace set on pulumi-eks's component never reaches the node group
    # it creates (docs/SOURCES.md#pulumi-eks-internals).
    new_group_inputs: dict[str, Any] = {
        "amiType": ami_type, "capacityType": CAPACITY_TYPE, "clusterName": cluster.cluster_name,
        "instanceTypes": [instance_type], "launchTemplate.id": launch_template.id,
        "nodeRoleArn": cluster.node_role.arn, "subnetIds": subnet_ids,
    }
    name_of_group = None if name_prefix is None else pulumi.Output.all(**new_group_inputs).apply(
        lambda values: node_group_name(name_prefix, values))
    group = eks.ManagedNodeGroup(
        name,
        node_group_name=name_of_group,
        cluster=cluster.core,
        cluster_name=new_group_inputs["clusterName"],
        node_role_arn=new_group_inputs["nodeRoleArn"],
        ami_type=ami_type,
        capacity_type=CAPACITY_TYPE,
        instance_types=new_group_inputs["instanceTypes"],
        scaling_config=_scaling(count, most),
        subnet_ids=subnet_ids,
        labels=labels,
        taints=taints,
        launch_template=_template_ref(launch_template),
        # Without it a group stays at the minor it was created with when the cluster moves on; with it
        # EKS rolls every node to the new minor's AMI (docs/SOURCES.md#managed-node-update-behavior).
        version=cluster.kubernetes_version,
        tags=tags,
        # The Cluster Autoscaler owns the desired size: `pulumi up` must not reset it under load. The
        # component's own switch, since ignore_changes on a remote component does not reach the node
        # group it creates (pulumi/pulumi-eks#1380; docs/SOURCES.md#pulumi-eks-ignore-scaling-changes).
        ignore_scaling_changes=True if most > count else None,
        # Nodes without their policies never become Ready; EKS would wait 20+ minutes to say so.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=cluster.node_role_policies),
    )
    return group, name_of_group


@dataclass(frozen=True)
class SystemNodeGroupArgs:
    """Inputs of `SystemNodeGroup`.

    settings: instance type and count (validated).
    cluster: the cluster to join (its node role and core data).
    network: nodes go to its private subnets, in every AZ.
    disk_gib: root volume size; default 50 GiB (operator, Ray head image, logs).
    extra_security_group_ids: further security groups of the nodes, beside the cluster's (the GCS
        store's client group, which lets the Ray head reach the store); none by default.
    """

    settings: SystemNodeSettings
    cluster: Cluster
    network: Network
    disk_gib: int = 50
    extra_security_group_ids: tuple[pulumi.Input[str], ...] = ()


class SystemNodeGroup(pulumi.ComponentResource):
    """CPU nodes labelled role=system for the KubeRay operator, the Ray head and cluster add-ons."""

    node_group: eks.ManagedNodeGroup
    launch_template: aws.ec2.LaunchTemplate

    def __init__(self, name: str, args: SystemNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:nodes:SystemNodeGroup", name, None, opts)
        cluster = args.cluster
        tags = {"eks-pd-llm/node-role": SYSTEM_ROLE}
        # EKS adds the cluster security group only to nodes whose launch template names none.
        security_groups = (cluster.cluster_security_group_id, *args.extra_security_group_ids) \
            if args.extra_security_group_ids else ()
        self.launch_template = _launch_template(
            f"{name}-lt", disk_gib=args.disk_gib, tags=tags, stack_tags=cluster.tags, parent=self,
            security_group_ids=security_groups)
        self.node_group, _ = _managed_node_group(
            name, cluster=cluster, ami_type=SYSTEM_AMI_TYPE, instance_type=args.settings.instance_type,
            count=args.settings.count, most=args.settings.count, subnet_ids=args.network.private_subnet_ids,
            labels=dict(SYSTEM_NODE_SELECTOR),
            launch_template=self.launch_template, tags=tags, parent=self)
        self.register_outputs({"launch_template_id": self.launch_template.id})


@dataclass(frozen=True)
class GpuFabric:
    """What every GPU node of the stack shares, so the KV transfer between any two runs over EFA at full
    bandwidth: the cluster placement group and the EFA security group (all traffic within itself)."""

    placement_group_name: pulumi.Input[str]
    efa_security_group_id: pulumi.Input[str]


@dataclass(frozen=True)
class GpuNodeGroupArgs:
    """Inputs of `GpuNodeGroup`.

    spec: the group as the settings built it: its phases, its GPU type as EC2 describes it (its EFA
        interfaces become the launch template's), its bounds and its worker pod (validated: an
        EFA-capable GPU type).
    disk_gib: the root volume of each node (gpuDiskGiB).
    cluster_name: the cluster's name (the settings'), which names the node group.
    cluster: the cluster to join; its EKS security group goes on the EFA interface.
    network: the node group takes the private subnet of `availability_zone` only.
    availability_zone: the one AZ of all GPU nodes (EFA does not cross AZs); it offers the type.
    fabric: the placement group and EFA security group of the stack's first GPU group, which a
        phase's own group joins; None: this group creates them (gpuNodeType's group).
    """

    spec: GpuNodeGroupSpec
    disk_gib: int
    cluster_name: str
    cluster: Cluster
    network: Network
    availability_zone: str
    fabric: GpuFabric | None = None


class GpuNodeGroup(pulumi.ComponentResource):
    """GPU nodes in one AZ and one cluster placement group, each with its EFA interface(s),
    labelled role=gpu-worker (and, holding one phase only, eks-pd-llm/phase=<it>), with the Cluster
    Autoscaler's k8s.amazonaws.com/accelerator=nvidia-<gpu> label, and tainted
    nvidia.com/gpu=true:NoSchedule so only GPU pods land there."""

    node_group: eks.ManagedNodeGroup
    launch_template: aws.ec2.LaunchTemplate
    fabric: GpuFabric
    availability_zone: str
    instance: InstanceType
    storage: NodeStorage
    node_group_name: pulumi.Output[str] | None  # named only when autoscaled
    autoscaled: bool

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:nodes:GpuNodeGroup", name, None, opts)
        cluster, spec = args.cluster, args.spec
        self.availability_zone = args.availability_zone
        self.instance = spec.instance
        self.storage = spec.storage
        self.autoscaled = spec.autoscaled
        tags = {"eks-pd-llm/node-role": GPU_ROLE}
        self.fabric = args.fabric or self._create_fabric(name, args.network, {**cluster.tags, **tags})

        self.launch_template = _launch_template(
            f"{name}-lt",
            disk_gib=args.disk_gib,
            tags=tags,
            stack_tags=cluster.tags,
            parent=self,
            network_interfaces=_efa_interfaces(
                self.instance, [cluster.cluster_security_group_id, self.fabric.efa_security_group_id]),
            placement_group=self.fabric.placement_group_name,
            storage=self.storage,
        )
        self.node_group, self.node_group_name = _managed_node_group(
            name, cluster=cluster, ami_type=GPU_AMI_TYPE, instance_type=self.instance.name,
            count=spec.count, most=spec.most,
            subnet_ids=[args.network.private_subnet_id_by_az[args.availability_zone]],
            labels={**spec.labels, **({ACCELERATOR_LABEL: accelerator_label_value(self.instance.gpu_model)}
                                      if self.instance.gpu_model else {})},
            launch_template=self.launch_template, tags=tags, parent=self,
            # Named only when the Cluster Autoscaler's policy and discovery must name it (EKS tags the
            # group's Auto Scaling group eks:nodegroup-name=<it>: cluster-autoscaler/cloudprovider/aws/
            # README.md): a group created without a name (a fixed size) keeps its random one.
            name_prefix=gpu_node_group_name_prefix(args.cluster_name, spec.own_phase) if self.autoscaled else None,
            taints=[aws.eks.NodeGroupTaintArgs(
                key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=_EKS_TAINT_EFFECT[GPU_TAINT_EFFECT])])
        self.register_outputs({
            "availability_zone": self.availability_zone,
            "placement_group": self.fabric.placement_group_name,
            "launch_template_id": self.launch_template.id,
        })

    def _create_fabric(self, name: str, network: Network, tags: dict[str, str]) -> GpuFabric:
        child = pulumi.ResourceOptions(parent=self)
        # A cluster placement group packs the nodes onto one low-latency segment: full EFA bandwidth.
        placement_group = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=tags, opts=child)

        # EFA traffic must be allowed to and from the group itself, all protocols (EFA's SRD is not
        # TCP/UDP). The default allow-all egress is not kept: the cluster security group on the same
        # interface covers ordinary egress.
        efa_security_group = aws.ec2.SecurityGroup(
            f"{name}-efa",
            description="EFA: all traffic between the GPU nodes",
            vpc_id=network.vpc_id,
            tags={**tags, "Name": f"{name}-efa"},
            opts=child,
        )
        for direction, rule in (("ingress", aws.vpc.SecurityGroupIngressRule),
                                ("egress", aws.vpc.SecurityGroupEgressRule)):
            rule(
                f"{name}-efa-{direction}",
                security_group_id=efa_security_group.id,
                referenced_security_group_id=efa_security_group.id,
                ip_protocol="-1",
                description=f"EFA {direction} within the GPU node group",
                tags=tags,
                opts=child,
            )
        return GpuFabric(placement_group.name, efa_security_group.id)


def _efa_interfaces(
    instance: InstanceType, security_group_ids: list[pulumi.Input[str]],
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """One EFA interface per network card: card 0 carries the primary (EFA + IP) interface at device
    index 0; further cards (p5 has 32) get EFA-only interfaces, also at device index 0 (EC2 user
    guide, "Maximize network bandwidth on Amazon EC2 instances with multiple network cards": the next
    unused network card index, device index 0, for an EFA-only interface; docs/SOURCES.md#efa-device-index)."""
    return [
        aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=0,
            interface_type="efa" if card == 0 else "efa-only",
            security_groups=security_group_ids,
            associate_public_ip_address="false",
            delete_on_termination="true",
        )
        for card in range(instance.efa_interfaces)
    ]
