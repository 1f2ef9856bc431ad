"""What AWS says, asked once at preview before any resource: `discover(query) -> CloudFacts`.

The region (is it one the account has?), its AZs by name and zone ID, which AZs offer the GPU type,
what EC2 says about the GPU and system node types, who the caller is, and what of the stack is
already deployed (`DeployedStack`: its subnets' CIDRs, the zones of its GPU nodes and NAT gateways,
its cluster's role), which the plan keeps. The settings are judged
against these answers (components/config/), the way `pulumi preview` on a real account would;
the offline plan gets the same invokes answered from recorded data (offline/mock_cloud.py).

An invoke that fails is a user's mistake here (a region the account does not have, a type EC2 does
not know): it becomes a ConfigError naming the setting, with the error AWS gave. pulumi_aws is
imported only when AWS is asked: the data classes travel where Pulumi is not installed (the lab).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from facts.aws import OFFLINE_ACCOUNT_ID, OFFLINE_REFUSAL
from facts.instances import Ec2Gpu, Ec2InstanceType, InstanceType, instance_type
from serve_app.config import Phase
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackField

Answer = TypeVar("Answer")


@dataclass(frozen=True)
class NodeTypeQuestion:
    """A node type (or the cluster) as the user wrote it (`name`) and the setting naming it, which a
    refusal names."""

    setting: StackField
    name: str


@dataclass(frozen=True)
class CloudQuery:
    """The settings discovery needs, as the user wrote them, each with the field naming it."""

    region: str
    region_setting: StackField
    gpu_node_type: NodeTypeQuestion
    system_node_type: NodeTypeQuestion
    # A phase's own GPU node type (prefillGpuNodeType: p5.48xlarge): described and offered like gpuNodeType.
    phase_gpu_node_types: Mapping[Phase, NodeTypeQuestion] = field(default_factory=dict)
    # The stack's EKS cluster name (clusterName), by which its deployed resources are found; None: not asked.
    cluster: NodeTypeQuestion | None = None


@dataclass(frozen=True)
class Zone:
    name: str  # account-specific: us-east-1a is not the same AZ in two accounts
    zone_id: str  # the same AZ in every account (use1-az3)

    def __str__(self) -> str:
        return f"{self.name} ({self.zone_id})"


@dataclass(frozen=True)
class DeployedSubnet:
    zone_id: str
    cidr: str
    public: bool  # tagged for internet-facing load balancers (components/network.py)


@dataclass(frozen=True)
class DeployedStack:
    """What AWS reports of the stack as deployed, found by its cluster's name; nothing for a new stack.

    Each of these replaces resources when the plan changes it, so the plan keeps them: a subnet's
    CIDR (a new one replaces the subnet), the zone of the GPU nodes (a node group's subnets are
    fixed), the zone of the NAT gateways, and the cluster's service role (EKS cannot change it).
    """

    cluster_name: str
    subnets: tuple[DeployedSubnet, ...] = ()
    gpu_zone_ids: frozenset[str] = frozenset()  # of the GPU node groups' subnets
    nat_zone_ids: frozenset[str] = frozenset()
    cluster_role_arn: str | None = None  # None: no cluster yet

    @property
    def zone_ids(self) -> frozenset[str]:
        """The zones the stack has subnets in."""
        return frozenset(s.zone_id for s in self.subnets)

    @property
    def earlier_iam_roles(self) -> bool:
        """The cluster runs with the role pulumi-eks made, at IAM's root path (`role/<name>`), as stacks
        created before the stack made its roles under a path of its own: it and the node role stay so."""
        return self.cluster_role_arn is not None and self.cluster_role_arn.split(":", 5)[-1].count("/") == 1


@dataclass(frozen=True)
class CloudFacts:
    region: str
    zones: tuple[Zone, ...]  # available AZs that need no opt-in, in EC2's order
    zones_offering_gpu: frozenset[str]  # names of the AZs that offer the GPU node type
    gpu_instance: InstanceType
    system_instance: InstanceType
    account_id: str
    # By the phase whose own GPU type each is (CloudQuery.phase_gpu_node_types).
    phase_gpu_instances: Mapping[Phase, InstanceType] = field(default_factory=dict)
    zones_offering_phase_gpu: Mapping[Phase, frozenset[str]] = field(default_factory=dict)
    deployed: DeployedStack | None = None  # None: a new stack (or the question was not asked)

    @property
    def offline(self) -> bool:
        """The caller is the offline mock cloud's account (facts/aws.py says why that is safe)."""
        return self.account_id == OFFLINE_ACCOUNT_ID


def _first_line(error: Exception) -> str:
    """The provider's reason, without the SDK's `invoke of <token> failed: <reason> (<property>)` wrapping."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    wrapped = re.fullmatch(r"invoke of \S+ failed: (.*?)(?: \(\w+\))?", line)
    return (wrapped.group(1) if wrapped else line)[:300]


def _ask(setting: StackField, value: str, allowed: str, call: Callable[[], Answer]) -> Answer:
    try:
        return call()
    except ConfigError:
        raise
    except Exception as error:  # the provider's error, handed to the user in one line
        reason = _first_line(error)
        said = reason if reason.startswith(OFFLINE_REFUSAL) else f"AWS says: {reason}"
        raise setting.refuse(value, allowed, said) from None


def _get(item: Any, name: str) -> Any:
    """A field of an invoke result's nested object (typed output class or plain dict alike)."""
    return item.get(name) if isinstance(item, dict) and name in item else getattr(item, name, None)


def _ec2_instance_type(result: Any) -> Ec2InstanceType:
    return Ec2InstanceType(
        name=result.instance_type,
        vcpus=int(result.default_vcpus or 0),
        memory_mib=int(result.memory_size or 0),
        architectures=tuple(result.supported_architectures or ()),
        gpus=tuple(Ec2Gpu(name=str(_get(g, "name")), manufacturer=str(_get(g, "manufacturer")),
                          count=int(_get(g, "count") or 0), memory_mib=int(_get(g, "memory_size") or 0))
                   for g in result.gpuses or ()),
        efa_supported=bool(result.efa_supported),
        efa_maximum_interfaces=int(result.efa_maximum_interfaces or 0),
        network_cards_gbps=tuple(float(_get(c, "baseline_bandwidth") or 0) for c in result.network_cards or ()),
        instance_storage_gb=int(result.total_instance_storage or 0),
    )


def describe_instance_type(question: NodeTypeQuestion, region: str) -> InstanceType:
    import pulumi_aws as aws

    result = _ask(question.setting, question.name, f"an EC2 instance type offered in {region}",
                  lambda: aws.ec2.get_instance_type(instance_type=question.name))
    return instance_type(_ec2_instance_type(result))


def discover(query: CloudQuery) -> CloudFacts:
    """Ask AWS what the settings need; a failed answer is a ConfigError naming the setting."""
    import pulumi_aws as aws

    region, region_setting = query.region, query.region_setting
    regions = _ask(region_setting, region, "an AWS region", lambda: aws.get_regions().names)
    if region not in regions:
        raise region_setting.refuse(region, "a region enabled for this account: " + ", ".join(sorted(regions)),
                                    "EC2 does not list it")
    zones = _ask(region_setting, region, "a region enabled for this account", lambda: aws.get_availability_zones(
        state="available",
        # Local Zones and Wavelength Zones need opting in and have no GPU capacity to speak of.
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    ))
    gpu = describe_instance_type(query.gpu_node_type, region)
    system = describe_instance_type(query.system_node_type, region)
    offered = _zones_offering(query.gpu_node_type, region)
    phase_gpus = {phase: describe_instance_type(asked, region) for phase, asked in query.phase_gpu_node_types.items()}
    phase_offered = {phase: _zones_offering(asked, region) for phase, asked in query.phase_gpu_node_types.items()}
    identity = _ask(region_setting, region, "a region the caller's credentials reach", aws.get_caller_identity)
    deployed = deployed_stack(query.cluster) if query.cluster is not None else None
    return CloudFacts(
        region=region,
        zones=tuple(Zone(name, zone_id) for name, zone_id in zip(zones.names, zones.zone_ids, strict=True)),
        zones_offering_gpu=offered,
        gpu_instance=gpu,
        system_instance=system,
        account_id=identity.account_id,
        phase_gpu_instances=phase_gpus,
        zones_offering_phase_gpu=phase_offered,
        deployed=deployed,
    )


def _zones_offering(question: NodeTypeQuestion, region: str) -> frozenset[str]:
    """The AZs (by name) of `region` that offer the instance type asked about."""
    import pulumi_aws as aws

    name = question.name
    offerings = _ask(question.setting, name, f"an instance type offered in {region}",
                     lambda: aws.ec2.get_instance_type_offerings(
                         location_type="availability-zone",
                         filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[name])]))
    return frozenset(offerings.locations)


# What reading the deployed stack asks of AWS, by provider function: read-only actions the roles that
# run the program (preview and deploy) need. A new stack calls the two list functions only.
DEPLOYED_STACK_INVOKES: dict[str, tuple[str, ...]] = {
    "aws:ec2/getSubnets:getSubnets": ("ec2:DescribeSubnets",),
    "aws:ec2/getSubnet:getSubnet": ("ec2:DescribeSubnets",),
    "aws:ec2/getNatGateways:getNatGateways": ("ec2:DescribeNatGateways",),
    "aws:ec2/getNatGateway:getNatGateway": ("ec2:DescribeNatGateways",),
    "aws:eks/getClusters:getClusters": ("eks:ListClusters",),
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    "aws:eks/getNodeGroups:getNodeGroups": ("eks:ListNodegroups",),
    "aws:eks/getNodeGroup:getNodeGroup": ("eks:DescribeNodegroup",),
}
DEPLOYED_STACK_ACTIONS = tuple(dict.fromkeys(a for actions in DEPLOYED_STACK_INVOKES.values() for a in actions))


def deployed_stack(cluster: NodeTypeQuestion) -> DeployedStack | None:
    """What of the stack named `cluster` is deployed (None: nothing): its subnets, by the cluster tag
    every subnet of the stack carries; the NAT gateways in them; its EKS cluster's role and the
    subnets of its GPU node groups (by their role label)."""
    import pulumi_aws as aws

    from components.config.names import PUBLIC_ELB_TAG, cluster_tag
    from components.scheduling import GPU_ROLE, ROLE_LABEL

    name = cluster.name

    def ask(call: Callable[[], Answer]) -> Answer:
        return _ask(cluster.setting, name, "credentials that may describe the stack as deployed: grant "
                    + ", ".join(DEPLOYED_STACK_ACTIONS), call)

    found = ask(lambda: aws.ec2.get_subnets(filters=[aws.ec2.GetSubnetsFilterArgs(
        name=f"tag:{cluster_tag(name)}", values=["shared"])]))
    subnets = {subnet_id: ask(functools.partial(aws.ec2.get_subnet, id=subnet_id))
               for subnet_id in sorted(found.ids or ())}
    zone_of = {subnet_id: s.availability_zone_id for subnet_id, s in subnets.items()}
    public = sorted(i for i, s in subnets.items() if PUBLIC_ELB_TAG in (s.tags or {}))
    nat_zones: set[str] = set()
    if public:
        nats = ask(lambda: aws.ec2.get_nat_gateways(filters=[
            aws.ec2.GetNatGatewaysFilterArgs(name="subnet-id", values=public),
            aws.ec2.GetNatGatewaysFilterArgs(name="state", values=["pending", "available"])]))
        nat_zones = {zone_of[ask(functools.partial(aws.ec2.get_nat_gateway, id=nat_id)).subnet_id]
                     for nat_id in nats.ids or ()}
    role_arn, gpu_zones = None, set()
    if name in (ask(aws.eks.get_clusters).names or ()):
        role_arn = ask(lambda: aws.eks.get_cluster(name=name)).role_arn
        for group_name in ask(lambda: aws.eks.get_node_groups(cluster_name=name)).names or ():
            group = ask(functools.partial(aws.eks.get_node_group, cluster_name=name, node_group_name=group_name))
            if (group.labels or {}).get(ROLE_LABEL) == GPU_ROLE:
                gpu_zones |= {zone_of[i] for i in group.subnet_ids or () if i in zone_of}
    if not subnets and role_arn is None:
        return None
    return DeployedStack(
        cluster_name=name,
        subnets=tuple(DeployedSubnet(s.availability_zone_id, s.cidr_block, i in public) for i, s in subnets.items()),
        gpu_zone_ids=frozenset(gpu_zones), nat_zone_ids=frozenset(nat_zones), cluster_role_arn=role_arn)
