"""Critical path and cost arithmetic on hand-made graphs (no Pulumi)."""

from dataclasses import dataclass, field

import pytest

from facts import durations, prices
from pdctl.cost import CostInputs, NodeGroupCost, hourly_cost
from pdctl.critical_path import critical_path

CLUSTER = durations.DURATIONS["eks:index:Cluster"].minutes
NODE_GROUP = durations.DURATIONS["eks:index:ManagedNodeGroup"].minutes
HELM = durations.DURATIONS["kubernetes:helm.sh/v3:Release"].minutes
RAY_SERVICE = durations.DURATIONS["kubernetes:ray.io/v1:RayService"].minutes
SMALL = durations.DEFAULT_CUSTOM.minutes


@dataclass
class Res:
    type: str
    name: str
    parent: str | None = None
    dependencies: list[str] = field(default_factory=list)
    custom: bool = True

    @property
    def urn(self) -> str:
        return f"urn:{self.name}"


def component(name, parent=None, deps=()):
    return Res("eks-pd-llm:x:Component", name, parent, list(deps), custom=False)


def reference_like_graph():
    """The shape the SDK records: a dependency on a local component arrives expanded into its
    custom/remote descendants, and each child lists its own dependencies (a parent's are not
    passed on)."""
    net = ["urn:vpc", "urn:subnet", "urn:nat"]
    return [
        component("stack"),
        component("net", "urn:stack"),
        Res("aws:ec2/vpc:Vpc", "vpc", "urn:net"),
        Res("aws:ec2/subnet:Subnet", "subnet", "urn:net", ["urn:vpc"]),
        Res("aws:ec2/natGateway:NatGateway", "nat", "urn:net", ["urn:subnet"]),
        component("cluster", "urn:stack", net),
        Res("eks:index:Cluster", "eks", "urn:cluster", net, custom=False),  # remote component
        Res("pulumi:providers:kubernetes", "k8s", "urn:cluster", ["urn:eks"]),
        component("gpu", "urn:stack"),
        # The GPU launch template needs the cluster's security group: one step more than system.
        Res("aws:ec2/launchTemplate:LaunchTemplate", "gpu-lt", "urn:gpu", ["urn:eks"]),
        Res("eks:index:ManagedNodeGroup", "gpu-ng", "urn:gpu", ["urn:eks", "urn:gpu-lt"], custom=False),
        component("system", "urn:stack"),
        Res("eks:index:ManagedNodeGroup", "system-ng", "urn:system", ["urn:eks"], custom=False),
        component("addons", "urn:stack"),
        Res("kubernetes:helm.sh/v3:Release", "nvidia", "urn:addons", ["urn:k8s", "urn:gpu-lt", "urn:gpu-ng"]),
        component("kuberay", "urn:stack"),
        Res("kubernetes:helm.sh/v3:Release", "kuberay-operator", "urn:kuberay", ["urn:k8s", "urn:system-ng"]),
        component("inference", "urn:stack"),
        Res("kubernetes:core/v1:Namespace", "ns", "urn:inference", ["urn:k8s"]),
        Res("kubernetes:ray.io/v1:RayService", "ray-llm", "urn:inference",
            ["urn:ns", "urn:kuberay-operator", "urn:nvidia"]),
    ]


def test_longest_chain_follows_recorded_dependencies():
    path = critical_path(reference_like_graph())
    assert [s.name for s in path.steps] == ["vpc", "subnet", "nat", "eks", "gpu-lt", "gpu-ng", "nvidia",
                                           "ray-llm"]
    nat = durations.DURATIONS["aws:ec2/natGateway:NatGateway"].minutes
    vpc = durations.DURATIONS["aws:ec2/vpc:Vpc"].minutes
    lt = durations.DURATIONS["aws:ec2/launchTemplate:LaunchTemplate"].minutes
    expected = vpc + SMALL + nat + CLUSTER + lt + NODE_GROUP + HELM + RAY_SERVICE
    assert path.minutes == pytest.approx(expected)
    assert path.steps[-1].starts_at == pytest.approx(expected - RAY_SERVICE)


def test_sequential_sum_counts_every_step_once():
    graph = reference_like_graph()
    path = critical_path(graph)
    expected = sum(durations.create_duration(r.type, custom=r.custom).minutes for r in graph)
    assert path.sequential_minutes == pytest.approx(expected)
    # Two node groups and two charts overlap: parallel is shorter by at least one of each.
    assert path.sequential_minutes - path.minutes >= NODE_GROUP + HELM - 1e-9


def test_a_child_does_not_wait_for_its_parents_dependencies():
    # What the engine does (pulumi/runtime/rpc.py): depends_on on a component constrains the
    # component only; a child that lists nothing starts at once. The plan must show that race.
    graph = [
        component("stack"),
        component("slow", "urn:stack"),
        Res("eks:index:Cluster", "eks", "urn:slow", custom=False),
        component("late", "urn:stack", ["urn:eks"]),
        Res("aws:iam/role:Role", "role", "urn:late"),
        Res("aws:iam/role:Role", "role2", "urn:late", ["urn:eks"]),
    ]
    path = critical_path(graph)
    assert [s.name for s in path.steps] == ["eks", "role2"]
    starts = {s.name: s.starts_at for s in path.steps}
    assert starts["role2"] == pytest.approx(CLUSTER)


def test_depending_on_a_component_urn_waits_for_all_its_children():
    graph = [
        component("group"),
        Res("eks:index:Cluster", "eks", "urn:group", custom=False),
        Res("aws:iam/role:Role", "after", None, ["urn:group"]),
    ]
    path = critical_path(graph)
    assert [s.name for s in path.steps] == ["eks", "after"]
    assert path.minutes == pytest.approx(CLUSTER + durations.DURATIONS["aws:iam/role:Role"].minutes)


def test_components_and_providers_take_no_time_but_remote_components_do():
    assert durations.create_duration("eks-pd-llm:x:Network", custom=False).minutes == 0
    assert durations.create_duration("pulumi:providers:aws", custom=True).minutes == 0
    assert durations.create_duration("eks:index:Cluster", custom=False).minutes == CLUSTER
    assert durations.create_duration("aws:ec2/routeTable:RouteTable", custom=True) == durations.DEFAULT_CUSTOM


def test_reference_timings_are_within_the_reference_ranges():
    assert 15 <= CLUSTER <= 20
    assert 3 <= NODE_GROUP <= 5
    assert 1 <= HELM <= 2
    assert RAY_SERVICE > 145 / 60  # several minutes plus the first model load


def test_cycle_is_reported():
    graph = [Res("aws:a:A", "a", None, ["urn:b"]), Res("aws:b:B", "b", None, ["urn:a"])]
    with pytest.raises(ValueError, match="cycle"):
        critical_path(graph)


def test_empty_graph():
    assert critical_path([]).minutes == 0


# ------------------------------------------------------------------------------------ cost

def test_hourly_cost_recomputed_from_price_table():
    inputs = CostInputs(
        region="us-west-2",
        node_groups=[NodeGroupCost("gpu", "g6.8xlarge", 2, 200.0),
                     NodeGroupCost("system", "m7i.xlarge", 1, 20.0)],
        nat_gateways=1, eks_clusters=1,
    )
    table = prices.PRICES["us-west-2"]
    estimate = hourly_cost(inputs)
    expected = (2 * table.ec2_on_demand_per_hour["g6.8xlarge"]
                + table.ec2_on_demand_per_hour["m7i.xlarge"]
                + 420 * table.ebs_per_gb_month["gp3"] / prices.HOURS_PER_MONTH
                + table.nat_gateway_per_hour + table.public_ipv4_per_hour
                + table.eks_cluster_per_hour)
    assert estimate.per_hour == pytest.approx(expected)
    assert estimate.missing == []
    doc = estimate.to_dict()
    assert doc["label"] == "estimate" and doc["as_of"] == prices.AS_OF and doc["source"] and doc["complete"]
    # Against the public list prices themselves: 2 × $2.0144 + $0.2016 + ... ≈ $4.40/h.
    assert 4.3 < estimate.per_hour < 4.5


def test_unknown_type_or_region_is_reported_not_guessed():
    estimate = hourly_cost(CostInputs("us-west-2", [NodeGroupCost("x", "g7.huge", 1, 10.0)], 0, 1))
    assert estimate.missing == ["EC2 g7.huge in us-west-2"]
    # No total at all: a sum without the GPU nodes would read as the stack's price.
    assert estimate.per_hour is None
    doc = estimate.to_dict()
    assert doc["complete"] is False and doc["per_hour"] is None and doc["per_month"] is None
    assert doc["lines"][0]["per_hour"] is None  # the unpriced line itself
    nowhere = hourly_cost(CostInputs("mars-north-1", [], 1, 1))
    assert nowhere.per_hour is None
    assert nowhere.missing == ["region mars-north-1: no prices recorded (recorded: us-east-1, us-east-2, us-west-2; "
                               "`python -m tools.refresh_prices --region mars-north-1` records it)"]


def test_every_priced_instance_type_is_a_known_instance_type():
    from facts.instances import RECORDED_EC2_ANSWERS

    for region, table in prices.PRICES.items():
        assert set(table.ec2_on_demand_per_hour) <= set(RECORDED_EC2_ANSWERS), region


def test_every_gpu_type_the_preview_accepts_offline_has_a_price_in_every_recorded_region():
    from facts.instances import RECORDED_EC2_ANSWERS, instance_type

    accepted = {name for name, answer in RECORDED_EC2_ANSWERS.items()
                if instance_type(answer).has_gpu and instance_type(answer).efa_capable}
    assert {"g6.8xlarge", "g6e.12xlarge", "p5.48xlarge", "p5en.48xlarge"} <= accepted
    unpriced = set(prices.SNAPSHOT.ec2_without_on_demand_price)  # Capacity Blocks only, said so in the plan
    for region, table in prices.PRICES.items():
        assert accepted - set(table.ec2_on_demand_per_hour) == unpriced, region
