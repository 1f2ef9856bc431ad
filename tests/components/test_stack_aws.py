"""The AWS side of the real program, run per stack under mocks (preview=False) the way the CLI would
feed it: VPC, NAT, cluster security, both node groups, dependencies, protection and outputs.
Each stack runs once per module; a wrong setting must stop the run with nothing registered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from offline import OfflineRun, RegisteredResource, run_offline, try_run_offline
from offline.mock_cloud import OFFERINGS, launch_template_version
from serve_app.errors import ConfigError

VPC = "aws:ec2/vpc:Vpc"
SUBNET = "aws:ec2/subnet:Subnet"
EIP = "aws:ec2/eip:Eip"
NAT = "aws:ec2/natGateway:NatGateway"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
ASSOCIATION = "aws:ec2/routeTableAssociation:RouteTableAssociation"
IGW = "aws:ec2/internetGateway:InternetGateway"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
KMS_KEY = "aws:kms/key:Key"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
EKS = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
K8S_PROVIDER = "pulumi:providers:kubernetes"
ADDON = "aws:eks/addon:Addon"

# Where g6.8xlarge can be had in us-west-2 according to the mock account (only some AZs).
G6_ZONES = sorted(OFFERINGS["us-west-2"]["g6.8xlarge"])


class Run:
    """An offline run with the questions these tests ask of it."""

    def __init__(self, run: OfflineRun) -> None:
        self.run = run
        self.protected = {r.urn for r in run.resources if r.protect}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.run, name)

    def private_subnets(self) -> list[RegisteredResource]:
        return [s for s in self.run.all(SUBNET) if "internal-elb" in json.dumps(s.inputs["tags"])]

    def public_subnets(self) -> list[RegisteredResource]:
        return [s for s in self.run.all(SUBNET) if "kubernetes.io/role/elb" in s.inputs["tags"]]

    def waits_for(self, resource: RegisteredResource, other: RegisteredResource) -> bool:
        return self.run.depends_on(resource, other)


def run_stack(stack: str, **kwargs: Any) -> Run:
    return Run(run_offline(stack, **kwargs))


@pytest.fixture(scope="module")
def dev() -> Run:
    return run_stack("dev")


@pytest.fixture(scope="module")
def prod() -> Run:
    return run_stack("prod")


@pytest.fixture(scope="module", params=["dev", "prod"])
def each(request, dev, prod) -> Run:
    return {"dev": dev, "prod": prod}[request.param]


# ── Network ───────────────────────────────────────────────────────────────────────────────────

def test_vpc_has_dns_and_the_configured_cidr(dev, prod):
    for run, cidr in ((dev, "10.0.0.0/16"), (prod, "10.20.0.0/16")):
        vpc = run.one(VPC)
        assert vpc.inputs["cidrBlock"] == cidr
        assert vpc.inputs["enableDnsSupport"] is True and vpc.inputs["enableDnsHostnames"] is True


@pytest.mark.parametrize(("stack", "az_count"), [("dev", 2), ("prod", 3)])
def test_one_public_and_one_private_subnet_per_az(stack, az_count, dev, prod):
    run = {"dev": dev, "prod": prod}[stack]
    private, public = run.private_subnets(), run.public_subnets()
    assert len(private) == len(public) == az_count == len(run.all(SUBNET)) // 2
    zones = {s.inputs["availabilityZone"] for s in private}
    assert zones == {s.inputs["availabilityZone"] for s in public}
    assert len(zones) == az_count
    # The GPU AZ is always one of the VPC's AZs.
    assert run.outputs["gpuAvailabilityZone"] in zones


def test_subnet_tags_let_eks_and_load_balancers_find_them(each):
    cluster_tag = f"kubernetes.io/cluster/{each.outputs['clusterName']}"
    for subnet in each.private_subnets():
        assert subnet.inputs["tags"][cluster_tag] == "shared"
        assert subnet.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert "kubernetes.io/role/elb" not in subnet.inputs["tags"]
    for subnet in each.public_subnets():
        assert subnet.inputs["tags"][cluster_tag] == "shared"
        assert subnet.inputs["tags"]["kubernetes.io/role/elb"] == "1"
    assert not any(s.inputs["mapPublicIpOnLaunch"] for s in each.all(SUBNET))


def test_dev_has_one_nat_gateway_in_the_gpu_az_for_every_private_subnet(dev):
    nat = dev.one(NAT)
    assert len(dev.all(EIP)) == 1
    nat_subnet = next(s for s in dev.public_subnets() if dev.waits_for(nat, s))
    assert nat_subnet.inputs["availabilityZone"] == dev.outputs["gpuAvailabilityZone"]
    private_tables = [t for t in dev.all(ROUTE_TABLE) if "private" in t.name]
    assert len(private_tables) == 2
    for table in private_tables:
        [route] = table.inputs["routes"]
        assert route == {"cidrBlock": "0.0.0.0/0", "natGatewayId": route["natGatewayId"]}
        assert dev.waits_for(table, nat)


def test_prod_has_a_nat_gateway_per_az_each_serving_its_own_az(prod):
    nats = prod.all(NAT)
    assert len(nats) == len(prod.all(EIP)) == 3
    for zone in {s.inputs["availabilityZone"] for s in prod.private_subnets()}:
        nat = next(n for n in nats if n.name.endswith(zone))
        table = prod.one(ROUTE_TABLE, f"network-private-{zone}")
        assert prod.waits_for(table, nat)
        assert not any(prod.waits_for(table, other) for other in nats if other is not nat)
        public = prod.one(SUBNET, f"network-public-{zone}")
        assert prod.waits_for(nat, public)


def test_public_subnets_route_to_the_internet_gateway(each):
    table = each.one(ROUTE_TABLE, "network-public")
    assert table.inputs["routes"][0]["cidrBlock"] == "0.0.0.0/0" and "gatewayId" in table.inputs["routes"][0]
    assert each.waits_for(table, each.one(IGW))
    associations = [a for a in each.all(ASSOCIATION) if "public" in a.name]
    assert len(associations) == len(each.public_subnets())
    assert all(each.waits_for(a, table) for a in associations)


def test_s3_gateway_endpoint_serves_every_private_route_table(each):
    endpoint = each.one(ENDPOINT)
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-west-2.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    private_tables = [t for t in each.all(ROUTE_TABLE) if "private" in t.name]
    assert len(endpoint.inputs["routeTableIds"]) == len(private_tables)
    assert all(each.waits_for(endpoint, t) for t in private_tables)


# ── Cluster ───────────────────────────────────────────────────────────────────────────────────

def test_cluster_is_private_by_default_and_encrypts_secrets(each):
    cluster = each.one(EKS).inputs
    assert cluster["skipDefaultNodeGroup"] is True
    assert cluster["nodeAssociatePublicIpAddress"] is False
    assert cluster["endpointPrivateAccess"] is True
    assert cluster["authenticationMode"] == "API"
    assert cluster["createOidcProvider"] is True
    assert set(cluster["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:us-west-2:")
    assert each.waits_for(each.one(EKS), each.one(KMS_KEY))
    assert each.one(KMS_KEY).inputs["enableKeyRotation"] is True
    # Nodes and control plane only in the VPC's subnets.
    assert len(cluster["privateSubnetIds"]) == len(each.private_subnets())
    assert cluster["version"] == "1.35"


def test_control_plane_logs_expire(each):
    logs = each.one("aws:cloudwatch/logGroup:LogGroup")
    assert logs.inputs["name"] == f"/aws/eks/{each.outputs['clusterName']}/cluster"
    assert logs.inputs["retentionInDays"] == 90.0
    assert logs.urn in each.one(EKS).dependencies  # exists before EKS would create it without expiry


def test_api_endpoint_exposure_per_stack(dev, prod):
    assert dev.one(EKS).inputs["publicAccessCidrs"] == ["0.0.0.0/0"]
    assert prod.one(EKS).inputs["endpointPublicAccess"] is True
    assert prod.one(EKS).inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_private_only_endpoint_when_no_cidrs_are_given_and_the_deploy_runs_inside_the_vpc():
    run = run_offline("dev", overrides={"apiPublicAccessCidrs": "[]", "deployFromInsideVpc": "true"})
    cluster = run.one(EKS).inputs
    assert cluster["endpointPublicAccess"] is False and cluster["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in cluster


def test_admins_get_cluster_admin_through_access_entries(dev, prod):
    assert dev.one(EKS).inputs["accessEntries"] == {}
    entries = prod.one(EKS).inputs["accessEntries"]
    (entry,) = entries.values()
    assert entry["principalArn"] == "arn:aws:iam::111122223333:role/platform-admin"
    (policy,) = entry["accessPolicies"].values()
    assert policy["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert policy["accessScope"] == {"type": "cluster"}


def test_node_role_has_the_standard_node_policies(each):
    role = each.one(ROLE, "cluster-node")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    policies = {a.inputs["policyArn"].rsplit("/", 1)[1] for a in each.all(ATTACHMENT) if each.waits_for(a, role)}
    assert policies == {"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                        "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"}


def test_the_stack_makes_the_clusters_own_role_and_hands_it_to_eks(each):
    """pulumi-eks would make its own cluster role, under no path and with no boundary."""
    role = each.one(ROLE, "cluster-eks")
    assert json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "eks.amazonaws.com"}
    cluster = each.one(EKS)
    assert cluster.inputs["serviceRole"].startswith("cluster-eks-")  # the role, by the id the mock gave it
    assert each.waits_for(cluster, role)
    attachments = [a for a in each.all(ATTACHMENT) if a.inputs["role"].startswith("cluster-eks-")]
    assert [a.inputs["policyArn"] for a in attachments] == ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]
    assert all(each.waits_for(cluster, a) for a in attachments)


def test_every_role_the_stack_creates_sits_under_its_path_without_a_boundary_by_default(each):
    roles = each.all(ROLE)
    # prod's GPU group may grow (room for a blue/green update's second cluster): the autoscaler's role too.
    autoscaler = {"cluster-autoscaler-role"} if each.program["settings"].gpu_nodes.autoscaled else set()
    assert {r.name for r in roles} == {"cluster-eks", "cluster-node", "block-storage-ebs-csi",
                                       "front-door-controller-role", *autoscaler}
    assert all(r.inputs["path"] == "/eks-pd-llm/" and "permissionsBoundary" not in r.inputs for r in roles)


def test_a_configured_permissions_boundary_bounds_every_role_the_stack_creates():
    boundary = "arn:aws:iam::123456789012:policy/eks-pd-llm/workload-boundary"
    run = run_stack("dev", overrides={"iamPermissionsBoundaryArn": boundary})
    assert {r.name: r.inputs["permissionsBoundary"] for r in run.all(ROLE)} == {
        "cluster-eks": boundary, "cluster-node": boundary, "block-storage-ebs-csi": boundary,
        "front-door-controller-role": boundary}


def test_one_kubernetes_provider_from_the_secret_kubeconfig(each):
    provider = each.one(K8S_PROVIDER)
    assert "kubeconfig" in provider.secret_paths
    assert json.loads(provider.inputs["kubeconfig"])["kind"] == "Config"
    assert each.waits_for(provider, each.one(EKS))
    kubernetes_objects = [r for r in each.resources if r.type.startswith("kubernetes:")]
    assert kubernetes_objects and all(r.provider.startswith(provider.urn + "::") for r in kubernetes_objects)


def test_prod_protects_cluster_vpc_and_key_and_dev_protects_nothing(dev, prod):
    protected_types = {prod.by_urn(urn).type for urn in prod.protected}
    assert protected_types == {VPC, KMS_KEY, EKS}
    assert prod.one(EKS).inputs["deletionProtection"] is True
    assert dev.protected == set()
    assert dev.one(EKS).inputs["deletionProtection"] is False


# ── Node groups ───────────────────────────────────────────────────────────────────────────────

def launch_template_of(run: Run, group: RegisteredResource) -> RegisteredResource:
    (template,) = [t for t in run.all(LAUNCH_TEMPLATE) if run.waits_for(group, t)]
    # The group rides the template's latest version (the offline mock numbers it by its content).
    assert group.inputs["launchTemplate"]["version"] == str(launch_template_version(template.inputs))
    return template


def assert_imdsv2_and_encrypted_root(template: RegisteredResource, disk_gib: int,
                                     performance: dict[str, float] | None = None) -> None:
    assert template.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0}
    (root,) = template.inputs["blockDeviceMappings"]
    assert root["deviceName"] == "/dev/xvda"
    assert root["ebs"] == {"volumeSize": float(disk_gib), "volumeType": "gp3", "encrypted": "true",
                           "deleteOnTermination": "true", **(performance or {})}


def test_system_node_group(dev, prod):
    for run, instance_type, count in ((dev, "m7i.xlarge", 1), (prod, "m7i.2xlarge", 2)):
        group = run.one(NODE_GROUP, "system-nodes").inputs
        assert group["amiType"] == "AL2023_x86_64_STANDARD"
        assert group["instanceTypes"] == [instance_type]
        assert group["scalingConfig"] == {"desiredSize": float(count), "minSize": float(count), "maxSize": float(count)}
        assert group["labels"] == {"role": "system"}
        assert "taints" not in group
        assert group["clusterName"] == run.outputs["clusterName"]
        assert group["nodeRoleArn"].startswith("arn:aws:iam::")
        ng = run.one(NODE_GROUP, "system-nodes")
        assert all(s.urn in ng.dependencies for s in run.private_subnets())
        assert len(group["subnetIds"]) == len(run.private_subnets())
        template = launch_template_of(run, ng)
        assert_imdsv2_and_encrypted_root(template, 50)
        assert "networkInterfaces" not in template.inputs  # EKS attaches the cluster security group


@pytest.mark.parametrize(("stack", "disk", "most"), [("dev", 200, 2.0), ("prod", 300, 4.0)])
def test_gpu_node_group(stack, disk, most, dev, prod):
    run = {"dev": dev, "prod": prod}[stack]
    ng = run.one(NODE_GROUP, "gpu-nodes")
    group = ng.inputs
    assert group["amiType"] == "AL2023_x86_64_NVIDIA"
    assert group["instanceTypes"] == ["g6.8xlarge"]
    # prod may grow by a blue/green update's second cluster (two nodes), dev is fixed.
    assert group["scalingConfig"] == {"desiredSize": 2.0, "minSize": 2.0, "maxSize": most}
    # The Cluster Autoscaler's GPU label: g6.8xlarge holds one L4.
    assert group["labels"] == {"role": "gpu-worker", "k8s.amazonaws.com/accelerator": "nvidia-l4"}
    assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    # The root keeps the OS and logs only (images and the model cache are on the NVMe RAID0): gp3's
    # included 3,000 IOPS / 125 MiB/s, stated.
    assert_imdsv2_and_encrypted_root(launch_template_of(run, ng), disk, {"iops": 3000.0, "throughput": 125.0})
    assert "diskSize" not in group  # the launch template carries the disk (EKS refuses both)


def test_gpu_nodes_sit_in_one_az_that_offers_the_type(each):
    ng = each.one(NODE_GROUP, "gpu-nodes")
    assert len(ng.inputs["subnetIds"]) == 1
    (subnet,) = [s for s in each.private_subnets() if s.urn in ng.dependencies]
    zone = subnet.inputs["availabilityZone"]
    assert zone == each.outputs["gpuAvailabilityZone"] == G6_ZONES[0]


def test_gpu_launch_template_has_the_efa_interface_and_placement_group(each):
    ng = each.one(NODE_GROUP, "gpu-nodes")
    template = launch_template_of(each, ng)
    (interface,) = template.inputs["networkInterfaces"]
    assert interface["interfaceType"] == "efa"
    assert (interface["deviceIndex"], interface["networkCardIndex"]) == (0.0, 0.0)
    assert interface["associatePublicIpAddress"] == "false"
    # Cluster security group (control plane + other nodes) and the EFA group, in that order.
    assert len(interface["securityGroups"]) == 2
    efa_group = each.one(SECURITY_GROUP, "gpu-nodes-efa")
    assert each.waits_for(template, efa_group) and each.waits_for(template, each.one(EKS))
    placement = each.one(PLACEMENT_GROUP)
    assert placement.inputs["strategy"] == "cluster"
    assert template.inputs["placement"]["groupName"]
    assert each.waits_for(template, placement)


def test_efa_security_group_allows_all_traffic_within_itself(each):
    group = each.one(SECURITY_GROUP, "gpu-nodes-efa")
    assert "ingress" not in group.inputs and "egress" not in group.inputs  # rules are their own resources
    for rule in (each.one(INGRESS, "gpu-nodes-efa-ingress"), each.one(EGRESS, "gpu-nodes-efa-egress")):
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.inputs["referencedSecurityGroupId"] == rule.inputs["securityGroupId"]
        assert each.waits_for(rule, group)


def test_node_groups_join_the_cluster_after_it_and_after_their_role_policies(each):
    cluster = each.one(EKS)
    role = each.one(ROLE, "cluster-node")
    for ng in each.all(NODE_GROUP):
        assert each.waits_for(ng, cluster)
        node_role_policies = [a for a in each.all(ATTACHMENT) if a.name.startswith("cluster-node-")]
        assert node_role_policies and all(each.waits_for(ng, a) for a in node_role_policies)
        assert each.waits_for(ng, role)
        # The cluster's core data as the provider reads it (camelCase), not a resource reference.
        assert ng.inputs["cluster"]["vpcId"].startswith("vpc-")
        assert "instance_roles" not in ng.inputs["cluster"]


def test_coredns_becomes_a_managed_addon_once_the_system_nodes_can_run_it(each):
    (addon,) = [a for a in each.all(ADDON) if a.inputs["addonName"] == "coredns"]
    assert addon.inputs["clusterName"] == each.outputs["clusterName"]
    # Adopts the self-managed CoreDNS Deployment EKS bootstrapped at cluster creation.
    assert addon.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
    # Created before any node exists, the add-on would sit DEGRADED until its creation timed out.
    assert each.waits_for(addon, each.one(NODE_GROUP, "system-nodes"))
    # CoreDNS cannot run on the tainted GPU nodes, so it does not wait for GPU capacity either.
    assert not each.waits_for(addon, each.one(NODE_GROUP, "gpu-nodes"))
    # pulumi-eks makes no coredns add-on of its own without a default node group; asking it to
    # would create a second one, before any node.
    assert "corednsAddonOptions" not in each.one(EKS).inputs


def test_vpc_cni_enforces_network_policies(each):
    assert each.one(EKS).inputs["vpcCniOptions"]["enableNetworkPolicy"] is True


def test_every_resource_belongs_to_a_project_component(each):
    components = {r.urn: r for r in each.resources if r.type.startswith("eks-pd-llm:")}
    assert {r.type for r in components.values()} >= {
        "eks-pd-llm:network:Network", "eks-pd-llm:cluster:Cluster",
        "eks-pd-llm:nodes:SystemNodeGroup", "eks-pd-llm:nodes:GpuNodeGroup"}
    for resource in each.resources:
        if resource.custom or resource.type.startswith("eks:index:"):
            assert resource.parent in components, f"{resource.type} {resource.name} is not in a component"


def test_helm_releases_wait_for_the_nodes_they_run_on(each):
    # The node groups themselves, not their project components: waiting on a sibling such as the
    # GPU placement group would also count as "inside the component" without any node existing.
    gpu = each.one(NODE_GROUP, "gpu-nodes")
    system = each.one(NODE_GROUP, "system-nodes")
    releases = {r.name: r for r in each.all("kubernetes:helm.sh/v3:Release")}
    assert each.waits_for(releases["gpu-device-plugins-nvidia"], gpu)
    assert each.waits_for(releases["gpu-device-plugins-efa"], gpu)
    assert each.waits_for(releases["kuberay"], system)


# ── Outputs ───────────────────────────────────────────────────────────────────────────────────

def test_outputs_a_client_can_use(each):
    out = each.outputs
    assert set(out) == {"region", "clusterName", "kubeconfig", "namespace", "rayServiceName", "serveServiceName",
                        "servePort", "modelId", "tokenizerSource", "portForwardCommand", "clientConfig",
                        "gpuAvailabilityZone", "prometheusPortForwardCommand", "grafanaPortForwardCommand",
                        "gpuAvailabilityZoneId", "endpointUrl", "loadBalancerHostname", "apiKeySecret", "apiKeyNames"}
    assert out["region"] == "us-west-2"
    assert out["serveServiceName"] == f"{out['rayServiceName']}-serve-svc"
    assert out["servePort"] == 8000
    assert out["modelId"] == "qwen3.5-9b"
    assert out["tokenizerSource"] == "Qwen/Qwen3.5-9B"  # the model source: no separate tokenizer set
    assert out["portForwardCommand"] == (
        f"kubectl --namespace {out['namespace']} port-forward service/{out['serveServiceName']} 8000:8000")
    client = out["clientConfig"]
    # Through the front door (docs/FRONT_DOOR.md; tests/components/test_front_door.py): its NLB, not a port-forward.
    assert client["base_url"] == out["endpointUrl"] and client["model"] == out["modelId"]
    assert ".elb.us-west-2.amazonaws.com" in client["base_url"]
    assert out["loadBalancerHostname"] in client["base_url"]
    assert json.loads(out["kubeconfig"])["kind"] == "Config"
    # What `pdctl top` reads by default (http://localhost:9090) and where Grafana serves its dashboards.
    assert out["prometheusPortForwardCommand"] == (
        "kubectl --namespace monitoring port-forward service/prometheus-operated 9090:9090")
    assert out["grafanaPortForwardCommand"] == (
        "kubectl --namespace monitoring port-forward service/kube-prometheus-stack-grafana 3000:80")


def test_only_the_kubeconfig_is_secret(each):
    assert each.secret_outputs == {"kubeconfig"}


def test_dev_outputs_name_the_reference_deployment(dev):
    assert (dev.outputs["clusterName"], dev.outputs["namespace"], dev.outputs["rayServiceName"]) == (
        "ray-llm-multinode", "inference", "ray-llm")


def test_a_separate_tokenizer_source_is_the_one_clients_are_told():
    run = run_offline("dev", overrides={"tokenizerSource": "Qwen/Qwen3-8B"})
    assert run.outputs["tokenizerSource"] == "Qwen/Qwen3-8B"


# ── Choices and refusals that need EC2's answers ──────────────────────────────────────────────

def test_configured_gpu_az_pins_the_node_group_and_leads_the_vpc():
    run = run_offline("dev", overrides={"gpuAvailabilityZone": G6_ZONES[-1]})
    assert len(run.one(NODE_GROUP, "gpu-nodes").inputs["subnetIds"]) == 1
    assert run.outputs["gpuAvailabilityZone"] == G6_ZONES[-1]
    nat_zone = run.one(NAT).name.rsplit("-nat-", 1)[1]
    assert nat_zone == G6_ZONES[-1]  # single NAT sits in the GPU AZ


BAD_RUNS = [
    ("gpuAvailabilityZone", "us-west-2a"),  # a real AZ, but g6.8xlarge is not offered there
    ("azCount", "5"),  # us-west-2 has four
    ("gpuNodeType", "g6.4xlarge"),
    ("natMode", "none"),
    ("clusterName", "Bad_Name"),
    ("hfToken", "hf_plaintext_token"),  # set without --secret
    ("gpuNodeTyp", "g6.8xlarge"),
]


@pytest.mark.parametrize(("key", "value"), BAD_RUNS, ids=[k for k, _ in BAD_RUNS])
def test_bad_setting_stops_the_run_before_any_resource(key, value):
    run = try_run_offline("dev", overrides={key: value})
    assert isinstance(run.error, ConfigError), run.error
    assert run.error.setting == key
    assert run.registered == []


def test_secret_hf_token_is_accepted():
    run = run_offline("dev", secrets={"hfToken": "hf_secret_token"})
    assert run.all("kubernetes:core/v1:Secret")


def test_a_type_with_several_network_cards_gets_efa_only_interfaces_at_device_index_0():
    """EC2's guide for instances with multiple network cards: the primary interface (EFA) on card 0,
    device 0; on every further card an EFA-only interface at device index 0."""
    from components.node_groups import _efa_interfaces
    from facts.instances import InstanceType

    p5 = InstanceType("p5.48xlarge", vcpus=192, memory_gib=2048, network_gbps=3200, efa_interfaces=32, gpus=8)
    interfaces = _efa_interfaces(p5, ["sg-1"])
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in interfaces] == [
        (0, 0, "efa"), *((card, 0, "efa-only") for card in range(1, 32))]
