"""A fake AWS/EKS for running the real Pulumi program with no account: `CloudMocks(region)`.

Under `pulumi.runtime.set_mocks` the engine asks these mocks for every resource's id and outputs and
for every provider function (invoke) the program calls. The answers are shaped like the real ones,
so code that consumes them (subnet ids by AZ, the kubeconfig, the cluster security group, the
offering of a GPU type per AZ) runs as it would against AWS:

- ids and ARNs are derived from the resource name, so two runs of one stack register the same graph;
- `eks:index:Cluster` and `eks:index:ManagedNodeGroup` are pulumi-eks remote components: under
  mocks they are one resource each, with only the outputs returned here (kubeconfigJson,
  clusterSecurityGroupId, oidcProviderArn, core, …). No pulumi-eks validation runs.
- What EC2 says is recorded data: the regions of the (fake) account (`REGIONS`), each region's AZs
  by name and zone ID (`REGION_ZONES`: in us-east-1 the names map to IDs out of order and use1-az3,
  which EKS refuses for control planes, offers GPUs), the offering of each type per AZ (`OFFERINGS`:
  in us-west-2, g6.8xlarge is offered in only some AZs, so the AZ choice is exercised rather than
  trivially true) and each type's description (facts.instances.RECORDED_EC2_ANSWERS). A region the
  account does not have fails the invoke as AWS would; a type not recorded fails saying it is not
  recorded offline (the real EC2 may have it).
- The caller is account facts.aws.OFFLINE_ACCOUNT_ID, which tells the program it runs offline.
- What of the stack is deployed: nothing by default (a new stack). `CloudMocks(region, deployed=
  DeployedStack(...))` answers the program's questions about its deployed stack (subnets by the
  cluster tag, NAT gateways, the EKS cluster and its node groups) as EC2 and EKS would for a stack
  deployed like that; `offline.deployed.deployed_stack_from_plan` makes one from a saved plan.

A test passes its own answers: `CloudMocks(region, instance_types={...}, zones=..., offerings=...)`.
Unlisted invokes answer `{}` (what the mock engine does anyway); unlisted resource types echo their
inputs with an id.

Everything these mocks make up (ids, ARNs, generated names, AZ names, the account) is kept in
`CloudMocks.invented` (value -> what it stands for), so a plan can mark it as a stand-in for the
value AWS will give, not a value the stack decided.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

import pulumi

from components.config.names import INTERNAL_ELB_TAG, PUBLIC_ELB_TAG, cluster_tag
from components.discovery import DeployedStack
from components.scheduling import GPU_NODE_SELECTOR
from facts.aws import OFFLINE_ACCOUNT_ID, OFFLINE_REFUSAL
from facts.instances import RECORDED_AS_OF, RECORDED_EC2_ANSWERS, Ec2InstanceType

ACCOUNT_ID = OFFLINE_ACCOUNT_ID

# The regions `ec2:DescribeRegions` lists for the fake account: the commercial regions enabled by
# default, and those a real account must opt in to (af-south-1, ...), which the offline plan cannot
# know this account did: a real preview refuses one it did not.
REGIONS: tuple[str, ...] = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
    "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
    "ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2",
    # Opt-in regions.
    "af-south-1", "ap-east-1", "ap-south-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-7", "ca-west-1", "eu-central-2", "eu-south-1", "eu-south-2", "il-central-1", "me-central-1",
    "me-south-1", "mx-central-1",
)
# AZ name → zone ID per region (illustrative, shaped like `aws ec2 describe-availability-zones`).
# A region missing here gets AZs a, b and c with IDs in name order.
REGION_ZONES: dict[str, dict[str, str]] = {
    "us-west-2": {"us-west-2a": "usw2-az1", "us-west-2b": "usw2-az2", "us-west-2c": "usw2-az3",
                  "us-west-2d": "usw2-az4"},
    "us-east-1": {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1",
                  "us-east-1d": "use1-az2", "us-east-1e": "use1-az3", "us-east-1f": "use1-az5"},
    "us-east-2": {"us-east-2a": "use2-az1", "us-east-2b": "use2-az2", "us-east-2c": "use2-az3"},
}
# EC2's general-purpose (m), compute (c) and memory (r) families: GiB of memory per vCPU. A size is
# `large` (2 vCPUs) or `<n>xlarge` (4n); attributes after the generation: g Graviton (arm64), i Intel,
# a AMD, d local NVMe, n more network.
_GIB_PER_VCPU = {"m": 4, "c": 2, "r": 8}
_GENERAL_PURPOSE_NAME = re.compile(r"(?P<family>[mcr])\d+(?P<attributes>[a-z]*)\.(?P<size>large|\d*xlarge)")

# Which AZs offer each type (shaped like `aws ec2 describe-instance-type-offerings --location-type
# availability-zone`). A type missing from a region's table is offered in every AZ of it; a region
# missing here has no offerings on record, which the plan warns about (`CloudMocks.unrecorded`).
OFFERINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "us-west-2": {
        "g6.8xlarge": ("us-west-2b", "us-west-2c"),
        "g6.12xlarge": ("us-west-2b", "us-west-2c"),
        "g5.8xlarge": ("us-west-2a", "us-west-2b", "us-west-2c"),
        "p5.48xlarge": ("us-west-2b",),
    },
    "us-east-1": {
        "g6.8xlarge": ("us-east-1a", "us-east-1c", "us-east-1e"),
        "p5.48xlarge": ("us-east-1a",),
    },
}


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


# A launch template's inputs that are not part of a version: its identity (a new name is a new template)
# and what the provider sets on the template itself. Any other change makes the provider create a new
# version (docs/SOURCES.md#launch-template-versions).
_NOT_IN_A_VERSION = frozenset({"name", "namePrefix", "tags", "tagsAll", "defaultVersion", "updateDefaultVersion"})


def launch_template_version(inputs: Mapping[str, Any]) -> int:
    """The version number a launch template with these inputs stands at, offline: a number derived from
    the version's content, so the same content gives the same number and any change another one, as a
    new version does in EC2 (where the number counts up instead)."""
    content = {key: value for key, value in inputs.items() if key not in _NOT_IN_A_VERSION}
    return 1 + int(_digest(json.dumps(content, sort_keys=True, default=str), length=6), 16) % 999_999


def ec2_id(prefix: str, resource_type: str, name: str) -> str:
    """The id these mocks give an EC2 resource (`subnet-…` for a Subnet named `name`)."""
    return f"{prefix}-{_digest(resource_type, name)}"


def role_name(name: str, inputs: Mapping[str, Any]) -> str:
    """The name these mocks give an IAM role (its id): its own, else one generated from `name`."""
    return inputs.get("name") or f"{name}-{_digest(name, length=7)}"


# Output keys whose values are not made up here but derived from the inputs (the pulumi-eks core
# data, a Helm release's status) or secret as a whole (the kubeconfig).
_NOT_INVENTED_OUTPUTS = frozenset({"kubeconfig", "kubeconfigJson", "core", "status"})


def _strings(value: Any) -> list[str]:
    """Every non-empty string leaf of a nested value."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _default_zones(region: str) -> dict[str, str]:
    parts = region.split("-")
    prefix = parts[0] + "".join(part[0] for part in parts[1:-1]) + parts[-1]
    return {f"{region}{letter}": f"{prefix}-az{i + 1}" for i, letter in enumerate("abc")}


def describe_instance_type(answer: Ec2InstanceType) -> dict[str, Any]:
    """An `aws:ec2/getInstanceType` answer as the provider returns it (camelCase, the fields read)."""
    return {
        "id": answer.name,
        "instanceType": answer.name,
        "defaultVcpus": answer.vcpus,
        "memorySize": answer.memory_mib,
        "supportedArchitectures": list(answer.architectures),
        "gpuses": [{"name": g.name, "manufacturer": g.manufacturer, "count": g.count, "memorySize": g.memory_mib}
                   for g in answer.gpus],
        "totalGpuMemory": sum(g.count * g.memory_mib for g in answer.gpus),
        "efaSupported": answer.efa_supported,
        "efaMaximumInterfaces": answer.efa_maximum_interfaces,
        "maximumNetworkCards": len(answer.network_cards_gbps),
        "networkCards": [{"index": i, "baselineBandwidth": gbps, "peakBandwidth": gbps, "maximumInterfaces": 8,
                          "performance": f"{gbps:g} Gigabit"} for i, gbps in enumerate(answer.network_cards_gbps)],
        "instanceStorageSupported": answer.instance_storage_gb > 0,
        "totalInstanceStorage": answer.instance_storage_gb,
    }


class _Refused(Exception):
    """An invoke AWS would fail: the property it names and AWS's reason."""

    def __init__(self, property: str, reason: str) -> None:
        super().__init__(reason)
        self.property = property
        self.reason = reason


class CloudMocks(pulumi.runtime.Mocks):
    """Deterministic AWS answers for one region; a test may replace any of the recorded ones."""

    def __init__(self, region: str, *, instance_types: Mapping[str, Ec2InstanceType] | None = None,
                 zones: Mapping[str, str] | None = None, offerings: Mapping[str, tuple[str, ...]] | None = None,
                 regions: tuple[str, ...] = REGIONS, account_id: str = ACCOUNT_ID,
                 deployed: DeployedStack | None = None) -> None:
        self.region = region
        self.regions = regions
        self.instance_types = {**RECORDED_EC2_ANSWERS, **(instance_types or {})}
        self.zone_ids = dict(zones) if zones is not None else REGION_ZONES.get(region, _default_zones(region))
        self.offerings = {**OFFERINGS.get(region, {}), **(offerings or {})}
        self.account_id = account_id
        self.deployed = deployed
        # value -> what it stands for; first mention wins (an AZ is listed before it is offered).
        self.invented: dict[str, str] = {}
        # What these answers took for granted without a record, in the words of a warning.
        self.unrecorded: dict[str, None] = {}

    def _invent(self, values: list[str], what: str, *, known: frozenset[str] | set[str] = frozenset()) -> None:
        for value in values:
            if value not in known and value != self.region:
                self.invented.setdefault(value, what)

    # ── invokes ───────────────────────────────────────────────────────────────────────────────
    def zones(self) -> tuple[str, ...]:
        return tuple(self.zone_ids)

    def zones_offering(self, instance_type: str) -> tuple[str, ...]:
        return self.offerings.get(instance_type, self.zones())

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        """(the invoke's answer, no failures); a failed call answers ({}, [(property, reason)]), which the
        SDK raises in the program as `invoke of <token> failed: <reason>`, as it does a provider error."""
        try:
            return self._answer(args), []
        except _Refused as refused:
            return {}, [(refused.property, refused.reason)]

    def _answer(self, args: pulumi.runtime.MockCallArgs) -> dict:
        token, inputs = args.token, args.args
        if token == "aws:index/getRegions:getRegions":
            return {"id": "aws", "names": list(self.regions)}
        if self.region not in self.regions:
            # What the AWS provider answers for a region the account does not have.
            raise _Refused("region", f"invalid AWS Region: {self.region}")
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            self._invent(list(self.zone_ids), f"an AZ name of the offline mock's {self.region} "
                                              "(names map to zones per account)")
            self._invent(list(self.zone_ids.values()), f"a zone ID of the offline mock's {self.region}")
            return {
                "id": self.region,
                "names": list(self.zone_ids),
                "zoneIds": list(self.zone_ids.values()),
                "groupNames": [self.region] * len(self.zone_ids),
                "state": inputs.get("state"),
            }
        if token == "aws:ec2/getInstanceType:getInstanceType":
            name = inputs.get("instanceType", "")
            answer = self.instance_types.get(name) or self._named_general_purpose(name)
            if answer is None:
                # Offline, "unknown" means unrecorded, not nonexistent: the real EC2 may well have it.
                raise _Refused("instanceType", f"{OFFLINE_REFUSAL}{inputs.get('instanceType')} is not among the "
                                               f"{len(self.instance_types)} types of facts/instances.py (AWS data of "
                                               f"{RECORDED_AS_OF}); `pulumi preview` asks EC2 itself")
            return describe_instance_type(answer)
        if token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            return self._instance_type_offerings(inputs)
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            self._invent([self.account_id], "the offline mock's account id")
            return {
                "id": self.account_id,
                "accountId": self.account_id,
                "arn": f"arn:aws:iam::{self.account_id}:user/offline-plan",
                "userId": "AIDAOFFLINEPLAN000000",
            }
        if token in ("aws:index/getRegion:getRegion",):
            return {"id": self.region, "name": self.region, "region": self.region,
                    "endpoint": f"ec2.{self.region}.amazonaws.com",
                    "description": self.region}
        if token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com",
                    "reverseDnsPrefix": "com.amazonaws"}
        if token.startswith(("aws:ec2/getSubnet", "aws:ec2/getNatGateway", "aws:eks/")):
            return self._deployed_answer(token, inputs)
        return {}

    def _named_general_purpose(self, name: str) -> Ec2InstanceType | None:
        """An unrecorded general-purpose type (m6i.xlarge) as its name says it is: EC2 names its m, c and
        r families by their GiB per vCPU and its sizes by their vCPUs, so the system node checks can run;
        the plan warns that it is inferred. GPU types are never inferred: a name does not say the GPU."""
        found = _GENERAL_PURPOSE_NAME.fullmatch(name)
        if found is None:
            return None
        size = found["size"]
        vcpus = 2 if size == "large" else 4 * int(size.removesuffix("xlarge") or 1)
        gib = vcpus * _GIB_PER_VCPU[found["family"]]
        arch = "arm64" if "g" in found["attributes"] else "x86_64"
        self.unrecorded[f"{name} is not recorded offline (facts/instances.py): taken from its name as {vcpus} vCPUs, "
                        f"{gib} GiB, {arch}, no GPU; `pulumi preview` asks EC2"] = None
        return Ec2InstanceType(name=name, vcpus=vcpus, memory_mib=gib * 1024, architectures=(arch,))

    # ── the deployed stack, as EC2 and EKS describe it ───────────────────────────────────────
    def _deployed_subnets(self) -> dict[str, dict[str, Any]]:
        """describe-subnets answers by subnet id (none for a new stack)."""
        deployed = self.deployed
        if deployed is None:
            return {}
        names = {zone_id: name for name, zone_id in self.zone_ids.items()}
        subnets = {}
        for subnet in deployed.subnets:
            kind = "public" if subnet.public else "private"
            subnet_id = f"subnet-deployed-{kind}-{subnet.zone_id}"
            subnets[subnet_id] = {
                "id": subnet_id, "availabilityZone": names[subnet.zone_id], "availabilityZoneId": subnet.zone_id,
                "cidrBlock": subnet.cidr, "vpcId": "vpc-deployed",
                "tags": {"Name": f"{deployed.cluster_name}-{kind}-{names[subnet.zone_id]}",
                         PUBLIC_ELB_TAG if subnet.public else INTERNAL_ELB_TAG: "1",
                         cluster_tag(deployed.cluster_name): "shared"}}
        return subnets

    def _deployed_answer(self, token: str, inputs: dict) -> dict:
        deployed, subnets = self.deployed, self._deployed_subnets()
        filters = {f["name"]: list(f["values"]) for f in inputs.get("filters") or []}
        cluster = deployed.cluster_name if deployed is not None and deployed.cluster_role_arn else None
        by_zone = {(s["availabilityZoneId"], PUBLIC_ELB_TAG in s["tags"]): i for i, s in subnets.items()}
        nats = {f"nat-deployed-{zone_id}": by_zone[(zone_id, True)]
                for zone_id in sorted(deployed.nat_zone_ids if deployed else ())}
        gpu_subnets = [by_zone[(zone_id, False)] for zone_id in sorted(deployed.gpu_zone_ids if deployed else ())]
        if token == "aws:ec2/getSubnets:getSubnets":
            wanted = {(k.removeprefix("tag:"), v) for k, values in filters.items() for v in values}
            return {"id": self.region, "ids": [i for i, s in subnets.items() if wanted <= set(s["tags"].items())]}
        if token == "aws:ec2/getSubnet:getSubnet":
            return subnets[inputs["id"]]
        if token == "aws:ec2/getNatGateways:getNatGateways":
            wanted_subnets = filters.get("subnet-id", [])
            return {"id": self.region, "ids": [i for i, subnet in nats.items() if subnet in wanted_subnets]}
        if token == "aws:ec2/getNatGateway:getNatGateway":
            return {"id": inputs["id"], "subnetId": nats[inputs["id"]], "state": "available"}
        if token == "aws:eks/getClusters:getClusters":
            return {"id": self.region, "names": [cluster] if cluster else []}
        if token == "aws:eks/getCluster:getCluster" and deployed is not None:
            return {"id": cluster, "name": cluster, "roleArn": deployed.cluster_role_arn,
                    "vpcConfig": {"subnetIds": list(subnets), "vpcId": "vpc-deployed"}}
        if token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"id": cluster, "clusterName": cluster, "names": ["gpu-nodes"] if gpu_subnets else []}
        if token == "aws:eks/getNodeGroup:getNodeGroup":
            return {"id": f"{cluster}:gpu-nodes", "clusterName": cluster, "nodeGroupName": "gpu-nodes",
                    "labels": dict(GPU_NODE_SELECTOR), "subnetIds": gpu_subnets}
        return {}

    def _instance_type_offerings(self, inputs: dict) -> dict:
        filters = {f["name"]: list(f["values"]) for f in inputs.get("filters") or []}
        location_type = inputs.get("locationType", "region")
        types = filters.get("instance-type") or sorted(self.offerings)
        locations_filter = set(filters.get("location") or [])
        found_types, found_locations = [], []
        for name in types:
            if name not in self.instance_types:
                continue
            places = self.zones_offering(name) if location_type == "availability-zone" else (self.region,)
            for place in places:
                if not locations_filter or place in locations_filter:
                    found_types.append(name)
                    found_locations.append(place)
        self._invent(found_locations, f"an AZ the offline mock's offering data lists for {', '.join(types)}")
        if self.region not in OFFERINGS and location_type == "availability-zone":
            # Every type in every AZ would be a guess: GPU types are offered in few AZs, or none, of a region.
            self.unrecorded[f"which AZs of {self.region} offer {', '.join(types)} is not recorded offline (taken "
                            "as every AZ): `pulumi preview` asks EC2, and refuses an AZ or a type it does not "
                            "offer"] = None
        return {
            "id": self.region,
            "instanceTypes": found_types,
            "locations": found_locations,
            "locationTypes": [location_type] * len(found_types),
            "filters": inputs.get("filters"),
            "locationType": location_type,
        }

    # ── resources ─────────────────────────────────────────────────────────────────────────────
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        if not args.custom and not args.typ.startswith("eks:index:"):
            return "", dict(args.inputs)  # our own ComponentResources: nothing to fake
        handler = getattr(self, "_" + args.typ.replace(":", "_").replace("/", "_").replace(".", "_"), None)
        if handler is None and args.typ.startswith("kubernetes:"):
            handler = self._kubernetes_object
        outputs = dict(args.inputs)
        resource_id = f"{args.name}-{_digest(args.typ, args.name, length=8)}"
        if handler is not None:
            resource_id, extra = handler(args)
            outputs.update(extra)
            if args.typ.startswith(("aws:", "eks:")):
                known = set(_strings(args.inputs))
                self._invent([resource_id], f"the offline mock's id of {args.typ} {args.name}", known=known)
                for key, value in sorted(extra.items()):
                    if key not in _NOT_INVENTED_OUTPUTS:
                        self._invent(_strings(value), f"the offline mock's {key} of {args.typ} {args.name}",
                                     known=known)
        return resource_id, outputs

    def _arn(self, service: str, resource: str, *, region: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{ACCOUNT_ID}:{resource}"

    def _ec2_id(self, prefix: str, args: pulumi.runtime.MockResourceArgs) -> str:
        return ec2_id(prefix, args.typ, args.name)

    def _aws_ec2_vpc_Vpc(self, args):
        vpc_id = self._ec2_id("vpc", args)
        return vpc_id, {
            "arn": self._arn("ec2", f"vpc/{vpc_id}"),
            "defaultRouteTableId": f"rtb-{_digest('default', vpc_id)}",
            "mainRouteTableId": f"rtb-{_digest('main', vpc_id)}",
            "defaultSecurityGroupId": f"sg-{_digest('default', vpc_id)}",
            "ownerId": ACCOUNT_ID,
        }

    def _aws_ec2_subnet_Subnet(self, args):
        subnet_id = self._ec2_id("subnet", args)
        return subnet_id, {"arn": self._arn("ec2", f"subnet/{subnet_id}"), "ownerId": ACCOUNT_ID}

    def _aws_ec2_internetGateway_InternetGateway(self, args):
        igw_id = self._ec2_id("igw", args)
        return igw_id, {"arn": self._arn("ec2", f"internet-gateway/{igw_id}")}

    def _aws_ec2_eip_Eip(self, args):
        allocation = self._ec2_id("eipalloc", args)
        octets = bytes.fromhex(_digest(args.name, length=4))
        return allocation, {"allocationId": allocation, "publicIp": f"198.51.100.{octets[0] % 254 + 1}",
                            "arn": self._arn("ec2", f"elastic-ip/{allocation}")}

    def _aws_ec2_natGateway_NatGateway(self, args):
        return self._ec2_id("nat", args), {"privateIp": "10.0.0.10"}

    def _aws_ec2_routeTable_RouteTable(self, args):
        rtb = self._ec2_id("rtb", args)
        return rtb, {"arn": self._arn("ec2", f"route-table/{rtb}")}

    def _aws_ec2_routeTableAssociation_RouteTableAssociation(self, args):
        return self._ec2_id("rtbassoc", args), {}

    def _aws_ec2_vpcEndpoint_VpcEndpoint(self, args):
        vpce = self._ec2_id("vpce", args)
        return vpce, {"arn": self._arn("ec2", f"vpc-endpoint/{vpce}"),
                      "prefixListId": f"pl-{_digest('s3', self.region, length=8)}"}

    def _aws_ec2_securityGroup_SecurityGroup(self, args):
        sg = self._ec2_id("sg", args)
        return sg, {"arn": self._arn("ec2", f"security-group/{sg}"), "ownerId": ACCOUNT_ID}

    def _aws_vpc_securityGroupIngressRule_SecurityGroupIngressRule(self, args):
        rule = self._ec2_id("sgr", args)
        return rule, {"securityGroupRuleId": rule, "arn": self._arn("ec2", f"security-group-rule/{rule}")}

    _aws_vpc_securityGroupEgressRule_SecurityGroupEgressRule = (
        _aws_vpc_securityGroupIngressRule_SecurityGroupIngressRule)

    def _aws_ec2_placementGroup_PlacementGroup(self, args):
        name = args.inputs.get("name") or f"{args.name}-{_digest(args.name, length=7)}"
        return name, {"name": name, "placementGroupId": self._ec2_id("pg", args),
                      "arn": self._arn("ec2", f"placement-group/{name}")}

    def _aws_ec2_launchTemplate_LaunchTemplate(self, args):
        lt = self._ec2_id("lt", args)
        version = launch_template_version(args.inputs)
        return lt, {"arn": self._arn("ec2", f"launch-template/{lt}"), "latestVersion": version,
                    "defaultVersion": version,
                    "name": args.inputs.get("name") or f"{args.name}-{_digest(args.name, length=7)}"}

    def _aws_kms_key_Key(self, args):
        key_id = (f"{_digest(args.name, length=8)}-{_digest('a', args.name, length=4)}"
                  f"-4{_digest('b', args.name, length=3)}-8{_digest('c', args.name, length=3)}"
                  f"-{_digest('d', args.name, length=12)}")
        return key_id, {"keyId": key_id, "arn": self._arn("kms", f"key/{key_id}")}

    def _aws_kms_alias_Alias(self, args):
        name = args.inputs.get("name", f"alias/{args.name}")
        return name, {"arn": self._arn("kms", name)}

    def _aws_iam_role_Role(self, args):
        name = role_name(args.name, args.inputs)
        # As IAM writes it: the role's path is part of its ARN (role/eks-pd-llm/<name>).
        path = args.inputs.get("path") or "/"
        return name, {"name": name, "arn": self._arn("iam", f"role{path}{name}", region=False),
                      "uniqueId": f"AROA{_digest(name, length=17).upper()}"}

    def _aws_iam_rolePolicyAttachment_RolePolicyAttachment(self, args):
        return f"{args.inputs.get('role')}-{_digest(args.name, length=8)}", {}

    def _aws_cloudwatch_logGroup_LogGroup(self, args):
        name = args.inputs.get("name") or f"{args.name}-{_digest(args.name, length=7)}"
        return name, {"name": name, "arn": self._arn("logs", f"log-group:{name}")}

    def _aws_elasticache_subnetGroup_SubnetGroup(self, args):
        name = args.inputs.get("name") or f"{args.name}-{_digest(args.name, length=7)}"
        return name, {"name": name, "arn": self._arn("elasticache", f"subnetgroup:{name}")}

    def _aws_elasticache_replicationGroup_ReplicationGroup(self, args):
        group = args.inputs.get("replicationGroupId") or f"{args.name}-{_digest(args.name, length=7)}"
        suffix = f"{_digest('cache', group, length=6)}.{self.region.replace('-', '')[:4]}.cache.amazonaws.com"
        return group, {
            "replicationGroupId": group,
            "arn": self._arn("elasticache", f"replicationgroup:{group}"),
            "primaryEndpointAddress": f"master.{group}.{suffix}",
            "readerEndpointAddress": f"replica.{group}.{suffix}",
            "memberClusters": [f"{group}-00{i + 1}" for i in range(int(args.inputs.get("numCacheClusters") or 1))],
        }

    def _eks_index_Cluster(self, args):
        """pulumi-eks Cluster: the outputs a program reads (names follow the eks schema, camelCase)."""
        name = args.inputs.get("name") or f"{args.name}-eksCluster-{_digest(args.name, length=7)}"
        endpoint = f"https://{_digest('endpoint', name, length=32).upper()}.gr7.{self.region}.eks.amazonaws.com"
        oidc_id = _digest("oidc", name, length=32).upper()
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"
        cluster_sg = f"sg-{_digest('cluster', name)}"
        kubeconfig = _kubeconfig(name, endpoint, self.region)
        return f"{args.name}-{_digest(name, length=8)}", {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "clusterSecurityGroupId": cluster_sg,
            "nodeSecurityGroupId": f"sg-{_digest('node', name)}",
            "oidcProviderArn": self._arn("iam", f"oidc-provider/{issuer}", region=False),
            "oidcProviderUrl": f"https://{issuer}",
            "oidcIssuer": issuer,
            "clusterIngressRuleId": f"sgr-{_digest('ingress', name)}",
            "defaultNodeGroupAsgName": "",
            "fargateProfileId": "",
            "fargateProfileStatus": "",
            "autoModeNodeRoleName": "",
            # CoreData without its resource-typed fields (cluster, clusterIamRole, provider,
            # oidcProvider, …): the SDK refuses plain data in their place, and resource references
            # would be re-created by the mock engine on another event loop. They arrive as None.
            "core": {
                "endpoint": endpoint,
                "vpcId": args.inputs.get("vpcId"),
                "subnetIds": list(args.inputs.get("privateSubnetIds") or []) + list(
                    args.inputs.get("publicSubnetIds") or []),
                "privateSubnetIds": args.inputs.get("privateSubnetIds"),
                "publicSubnetIds": args.inputs.get("publicSubnetIds"),
                "instanceRoles": [],
                "nodeGroupOptions": {},
                "tags": args.inputs.get("tags") or {},
            },
        }

    def _eks_index_ManagedNodeGroup(self, args):
        group = args.inputs.get("nodeGroupName") or f"{args.name}-{_digest(args.name, length=8)}"
        return f"{args.inputs.get('clusterName', 'cluster')}:{group}", {"placementGroupName": ""}

    def _pulumi_providers_kubernetes(self, args):
        return f"{args.name}-{_digest(args.name, length=8)}", {}

    def _kubernetes_helm_sh_v3_Release(self, args):
        name = args.inputs.get("name") or args.name
        namespace = args.inputs.get("namespace", "default")
        return f"{namespace}/{name}", {
            "name": name,
            "status": {"name": name, "namespace": namespace, "chart": args.inputs.get("chart"),
                       "version": args.inputs.get("version"), "revision": 1, "status": "deployed",
                       "appVersion": args.inputs.get("version")},
        }

    def _kubernetes_core_v1_Service(self, args):
        resource_id, outputs = self._kubernetes_object(args)
        if (args.inputs.get("spec") or {}).get("type") != "LoadBalancer":
            return resource_id, outputs
        # What the AWS Load Balancer Controller writes back once it made the NLB: its DNS name.
        hostname = f"k8s-{_digest(args.name, length=10)}-{_digest('nlb', args.name, length=10)}.elb.{self.region}" \
                   ".amazonaws.com"
        self._invent([hostname], f"the offline mock's NLB hostname of Service {args.name}")
        return resource_id, {**outputs, "status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}}}

    def _kubernetes_object(self, args):
        metadata = dict(args.inputs.get("metadata") or {})
        metadata.setdefault("name", f"{args.name}-{_digest(args.name, length=8)}")
        metadata.setdefault("uid", _digest("uid", args.name, length=32))
        namespace = metadata.get("namespace")
        return (f"{namespace}/{metadata['name']}" if namespace else metadata["name"]), {"metadata": metadata}


def _kubeconfig(cluster_name: str, endpoint: str, region: str) -> dict[str, Any]:
    """A kubeconfig shaped like pulumi-eks's: exec auth through `aws eks get-token`."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kubernetes",
            "cluster": {"server": endpoint, "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
        }],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "current-context": "aws",
        "preferences": {},
        "users": [{
            "name": "aws",
            "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["--region", region, "eks", "get-token", "--cluster-name", cluster_name, "--output", "json"],
            }},
        }],
    }


class EchoMocks(pulumi.runtime.Mocks):
    """For a few components run alone: every resource's outputs are its inputs; every invoke answers {}."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []
