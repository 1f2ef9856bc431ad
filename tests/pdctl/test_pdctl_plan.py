"""`pdctl plan` / `pdctl render` on the real program run offline (offline), dev and prod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from components.project import PROJECT_ENV
from facts import durations, prices
from offline import run_offline
from pdctl.cli import PIPED_WIDTH, app
from pdctl.plan import build_plan
from pdctl.render import registered_ray_service, to_yaml
from pdctl.views import RULE_WIDTH

CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
HELM = "kubernetes:helm.sh/v3:Release"
RAY_SERVICE = "kubernetes:ray.io/v1:RayService"


@pytest.fixture(scope="module")
def dev_run():
    return run_offline("dev")


@pytest.fixture(scope="module")
def dev_plan(dev_run):
    return build_plan(dev_run, stack="dev", config_region=dev_run.config["aws:region"]).to_dict()


@pytest.fixture(scope="module")
def prod_plan():
    run = run_offline("prod")
    document = build_plan(run, stack="prod", config_region=run.config["aws:region"]).to_dict()
    return json.loads(json.dumps(document, default=str))  # as `--output json` hands it over


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def cached_dev(dev_run, monkeypatch):
    """The CLI on the module's dev run: one real program run per module keeps this file fast."""
    monkeypatch.setattr("offline.run_offline", lambda stack, overrides=None, deployed=None: dev_run)


# ---------------------------------------------------------------------------- resources

def test_dev_creates_the_reference_system(dev_plan):
    counts = dev_plan["resources"]["by_type"]
    assert counts[CLUSTER] == 1
    assert counts[NODE_GROUP] == 2  # system + GPU
    # KubeRay, NVIDIA and EFA device plugins, kube-prometheus-stack, DCGM exporter, AWS Load Balancer Controller
    assert counts[HELM] == 6
    assert counts[RAY_SERVICE] == 1
    assert counts["aws:ec2/natGateway:NatGateway"] == 1  # natMode single
    assert counts["aws:ec2/subnet:Subnet"] == 4  # 2 AZs × private + public
    assert dev_plan["resources"]["total"] == sum(counts.values())


def test_prod_differs_where_its_stack_file_says(prod_plan, dev_plan):
    counts = prod_plan["resources"]["by_type"]
    assert counts["aws:ec2/natGateway:NatGateway"] == 3  # natMode perAz over 3 AZs
    assert counts["aws:ec2/subnet:Subnet"] == 6
    # Prod has a total, its GCS store's two ElastiCache nodes included, and costs more than dev.
    assert prod_plan["cost"]["complete"] and prod_plan["cost"]["missing"] == []
    assert prod_plan["cost"]["per_hour"] > dev_plan["cost"]["per_hour"]


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node["children"])


def test_tree_nests_resources_under_components_with_key_settings(dev_plan):
    roots = dev_plan["tree"]
    assert [r["type"] for r in roots] == ["pulumi:pulumi:Stack"]
    everything = list(_walk(roots))
    assert len(everything) == dev_plan["resources"]["total"]
    groups = {n["name"]: n["settings"] for n in everything if n["type"] == NODE_GROUP}
    gpu = next(s for s in groups.values() if s["instance types"] == ["g6.8xlarge"])
    assert gpu["desired"] == 2 and gpu["ami"] == "AL2023_x86_64_NVIDIA"
    assert any(t["key"] == "nvidia.com/gpu" for t in gpu["taints"])
    charts = {n["settings"]["chart"]: n["settings"]["version"] for n in everything if n["type"] == HELM}
    assert charts["kuberay-operator"] == "1.7.0"
    ray = next(n["settings"] for n in everything if n["type"] == RAY_SERVICE)
    for phase in ("prefill", "decode"):
        assert ray[phase]["backends"] == ["LIBFABRIC"]
        assert ray[phase]["model"] == "qwen3.5-9b"
    azs = {n["settings"]["az"] for n in everything if n["type"] == "aws:ec2/subnet:Subnet"}
    assert len(azs) == 2


def test_capacity_is_what_the_programs_preview_check_computed(dev_plan, dev_run):
    capacity = dev_plan["capacity"]["per_phase"]
    assert set(capacity) == {"prefill", "decode"}
    checked = dev_run.program["stack"].settings.serving.app
    assert capacity == {phase: report.to_dict() for phase, report in checked.capacity.items()}
    decode = capacity["decode"]
    assert decode["instance_type"] == "g6.8xlarge" and decode["max_model_len"] == 4096
    assert decode["weights_fit"] and decode["max_concurrent_sequences"] > 0


# --------------------------------------------------------------------------------- cost

def test_cost_is_recomputed_from_the_price_data(dev_plan):
    table = prices.PRICES["us-west-2"]
    # dev: 2 × g6.8xlarge with 200 GiB gp3, 1 × m7i.xlarge with the system group's 50 GiB,
    # Prometheus's 50 GiB gp3 volume, one NAT gateway (and its public IPv4), one EKS control plane,
    # the front door's Network Load Balancer.
    expected = (2 * table.ec2_on_demand_per_hour["g6.8xlarge"]
                + table.ec2_on_demand_per_hour["m7i.xlarge"]
                + (2 * 200 + 50 + 50) * table.ebs_per_gb_month["gp3"] / prices.HOURS_PER_MONTH
                + table.nat_gateway_per_hour + table.public_ipv4_per_hour
                + table.eks_cluster_per_hour + (table.nlb_per_hour or 0))
    assert table.nlb_per_hour
    cost = dev_plan["cost"]
    assert cost["per_hour"] == pytest.approx(expected, abs=1e-4)
    assert cost["label"] == "estimate" and cost["region"] == "us-west-2" and cost["missing"] == []
    assert cost["per_month"] == pytest.approx(expected * prices.HOURS_PER_MONTH, abs=0.01)


def test_a_region_without_prices_says_not_recorded_never_a_zero_total():
    # eu-west-1 is a region EC2 knows (the offline cloud records it) and facts/aws_prices.json does not price.
    result = invoke("plan", "--set", "aws:region=eu-west-1")
    assert result.exit_code == 0, result.output
    total = next(line for line in result.stdout.splitlines() if line.lstrip("│ ").startswith("total"))
    assert "not recorded" in total and "$" not in total
    said = " ".join(result.stdout.split())
    cost = said[said.index("hourly cost ESTIMATE"):said.index("deploy critical path")]
    assert "not priced, not recorded in facts/aws_prices.json: region eu-west-1: no prices recorded" in cost
    assert "null" not in cost and "n/a" not in cost
    doc = json.loads(invoke("plan", "--set", "aws:region=eu-west-1", "--output", "json").stdout)
    assert doc["cost"]["per_hour"] is None and doc["cost"]["complete"] is False


# ------------------------------------------------------------------------ critical path

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


def test_critical_path_runs_cluster_then_gpu_nodes_then_image_prepull_then_rayservice(dev_plan):
    path = dev_plan["critical_path"]
    types = [s["type"] for s in path["steps"]]
    # The image pull (longer than the charts, beside them) is what the RayService waits for last.
    for earlier, later in [(CLUSTER, NODE_GROUP), (NODE_GROUP, DAEMON_SET), (DAEMON_SET, RAY_SERVICE)]:
        assert types.index(earlier) < types.index(later), types
    assert HELM not in types
    # The front door's Service waits for the RayService to be Ready (its endpoints are the Serve proxies).
    assert types[-2:] == [RAY_SERVICE, "kubernetes:core/v1:Service"]
    # A critical path has no gaps: each step starts when the one before it ends.
    for before, after in zip(path["steps"], path["steps"][1:], strict=False):
        assert after["starts_at"] == pytest.approx(before["starts_at"] + before["minutes"], abs=0.02)
    last = path["steps"][-1]
    assert path["minutes"] == pytest.approx(last["starts_at"] + last["minutes"], abs=0.02)
    ray_service = dev_plan["cold_start"]["ray_service_minutes"]
    floor = sum(durations.DURATIONS[t].minutes for t in (CLUSTER, NODE_GROUP, DAEMON_SET)) + ray_service
    assert floor <= path["minutes"] < path["sequential_minutes"]
    assert path["steps"][-2]["minutes"] == pytest.approx(ray_service, abs=0.01)


def test_the_ray_heads_image_is_pulled_beside_kuberay_and_counted_before_the_first_token():
    # With the GPU nodes' image on a snapshot volume, the Ray head's pull onto the system node is what the
    # RayService waits for last: the plan charges it there, not hidden inside the RayService's own time.
    run = run_offline("dev", overrides={"gpuImageSnapshotId": "snap-0123456789abcdef0"})
    plan = build_plan(run, stack="dev", config_region="us-west-2")
    names = [s.name for s in plan.critical_path.steps]
    assert names[-4:] == ["system-nodes", "ray-image-prepull-system", "inference-rayservice",
                          "front-door-service"], names
    pull = plan.critical_path.steps[-3]
    assert (pull.minutes, pull.source) == (durations.RAY_IMAGE_PULL_SECONDS / 60, "estimate")
    # The GPU nodes' pre-pull finds the image on the volume: it is charged the snapshot's seconds.
    gpu = next(r.urn for r in run.resources if r.name == "ray-image-prepull")
    assert plan.critical_path.finished_at[gpu] < plan.critical_path.finished_at[pull.urn]
    assert plan.cold_start.ray_service[0].name == "Ray head pod starts on a system node (its image pre-pulled there)"
    # A new GPU node joins a cluster whose head is up: its figure has no head step.
    assert all("head" not in s.name for s in plan.cold_start.new_node.steps)


def test_plan_shows_both_cold_start_figures_with_their_sources(dev_plan):
    start = dev_plan["cold_start"]
    assert "RAID0" in start["storage"] and "Hugging Face" in start["load_path"]
    new_node, restart = start["new_node"], start["pod_restart"]
    for figure in (new_node, restart):
        assert figure["seconds"] == pytest.approx(sum(s["seconds"] for s in figure["steps"]), abs=0.5)
        assert all(s["source"] in ("measured", "reference timing", "estimate") and s["where"] for s in figure["steps"])
    # Ray Serve LLM's replica start and vLLM's init are the lab's H200 measurements, and say where they were
    # taken: on a new node with the compile caches empty, on a pod restart with the node's caches.
    # A new node also compiles the image's Python once; a restart reads what that compile kept, and the weights
    # the old pod left in the node's page cache at the default loader's measured warm rate.
    bytecode = "Python's bytecode compiled by the node's first replica (kept on the node)"
    warm_weights = "weights read from the node's page cache (0 bytes downloaded)"
    for figure, first, init in ((new_node, [bytecode], "vLLM engine init, compile caches empty"),
                                (restart, [warm_weights], "vLLM engine init, compile caches on the node")):
        measured = [s for s in figure["steps"] if s["source"] == "measured"]
        assert [s["step"] for s in measured] == [*first, "Ray Serve LLM starts the replica (its processes and "
                                                 "engine-config tasks)", init]
        assert all("docs/PROVEN.md#serve-replica-start" in s["where"] for s in measured if s["step"] != warm_weights)
    assert "docs/PLAN.md#cold-start" in next(s["where"] for s in restart["steps"] if s["step"] == warm_weights)
    # A restart on the same node downloads nothing and skips the image pull and the node.
    assert any("0 bytes downloaded" in s["step"] for s in restart["steps"])
    assert restart["seconds"] < new_node["seconds"]


def test_plan_judges_each_start_target(dev_plan):
    start, path = dev_plan["cold_start"], dev_plan["critical_path"]
    restart = start["pod_restart"]
    assert restart["target"] == {"at_most": 60.0, "unit": "s", "met": restart["seconds"] <= 60,
                                 "missed_by": pytest.approx(max(restart["seconds"] - 60, 0), abs=0.1)}
    load = start["weight_load"]
    assert (load["loader"], load["source"]) == ("vLLM's default loader", "measured")
    assert "docs/PLAN.md#cold-start" in load["where"]
    assert load["target"] == {"at_least": 70.0, "unit": "%", "met": False, "missed_by": pytest.approx(20.6, abs=0.1)}
    assert path["target"] == {"at_most": 25.0, "unit": "min", "met": path["minutes"] <= 25,
                              "missed_by": pytest.approx(max(path["minutes"] - 25, 0), abs=0.1)}
    # The control plane's end to the RayService's, on the path: what follows the cluster on it.
    (cluster,) = [s for s in path["steps"] if s["type"] == CLUSTER]
    (ray_service,) = [s for s in path["steps"] if s["type"] == RAY_SERVICE]
    reach = path["control_plane_to_first_token"]
    assert reach["minutes"] == pytest.approx(ray_service["starts_at"] + ray_service["minutes"] - cluster["starts_at"]
                                             - cluster["minutes"], abs=0.02)
    assert reach["target"]["at_most"] == 6.0 and reach["target"]["met"] is (reach["minutes"] <= 6)


def test_rayservice_waits_for_kuberay_not_for_the_device_plugins_helm_wait(dev_run):
    """The graph, not luck, orders the RayService after the operator; it does not wait for the monitoring
    stack (serving does not need it) nor for the device plugins' Helm releases, whose wait for their pods on
    the GPU nodes would only delay it: its pods wait for the advertised GPUs themselves."""
    ray = dev_run.one(RAY_SERVICE)
    for release in dev_run.all(HELM):
        assert dev_run.depends_on(ray, release) is (release.inputs["chart"] == "kuberay-operator"), release.name


# ------------------------------------------------------------------------------- CLI

def test_plan_json_is_the_plan(dev_plan, cached_dev):
    result = invoke("plan", "--stack", "dev", "--output", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["resources"] == dev_plan["resources"]
    assert doc["cost"] == dev_plan["cost"]
    assert doc["critical_path"] == dev_plan["critical_path"]
    assert doc["outputs"]["kubeconfig"] == "[secret]"
    assert doc["outputs"]["modelId"] == "qwen3.5-9b"


def test_plan_text_shows_every_section(cached_dev):
    result = invoke("plan")
    assert result.exit_code == 0, result.output
    for heading in ("resources by component", "capacity per replica", "hourly cost ESTIMATE",
                    "deploy critical path", "while the Ray head restarts", "stack outputs"):
        assert heading in result.stdout
    assert "kubeconfig = [secret]" in result.stdout


def test_plan_text_states_each_start_target_beside_its_figure(dev_plan, cached_dev):
    text = invoke("plan", "--width", "1000").stdout  # each figure's paragraph on one line
    path, start = dev_plan["critical_path"], dev_plan["cold_start"]
    restart, reach, new_node = start["pod_restart"], path["control_plane_to_first_token"], start["new_node"]
    expected = [
        f"{path['minutes']:.1f} min with the graph's parallelism",
        f"goal ≤ 25 min: MISSED by {path['minutes'] - 25:.1f} min",
        f"EKS control plane ready → first token: {reach['minutes']:.1f} min on this path; "
        f"goal ≤ 6 min: MISSED by {reach['minutes'] - 6:.1f} min",
        "new GPU node → serving: 736 s (44% measured, 33% sourced, 23% estimated); goal ≤ 180 s: MISSED by 556 s",
        f"pod restart → serving: {restart['seconds']:.0f} s",
        f"goal ≤ 60 s: MISSED by {restart['seconds'] - 60:.0f} s",
        "weight load: vLLM's default loader at 49% of a local disk's sequential read (measured: "
        "docs/PLAN.md#cold-start",
        "goal ≥ 70%: MISSED by 21 points",
        "compile caches: kept on the node for a restart; a new node compiles (compileCacheInS3 false)",
        "image: pulled from the registry on each new node (763104351884.dkr.ecr.us-west-2.amazonaws.com/"
        "ray:serve-llm-cuda-v1.0); `pdctl image-snapshot` and gpuImageSnapshotId put it on the node instead",
    ]
    assert new_node["target"]["at_most"] == 180.0 and new_node["sourced_share"] == 0.33
    for line in expected:
        assert line in text, line
    # Each figure's verdict is on the figure's own line.
    for figure, verdict in (("with the graph's parallelism", "≤ 25 min"), ("pod restart → serving:", "≤ 60 s"),
                            ("new GPU node → serving:", "≤ 180 s"), ("weight load:", "≥ 70%")):
        (line,) = [line for line in text.splitlines() if figure in line]
        assert verdict in line


@pytest.mark.parametrize(("setting", "value", "rule"), [
    ("apiPublicAccessCidrs", '["0.0.0.0/0"]', "prod-api-endpoint-not-public"),
    ("deletionProtection", "false", "prod-deletion-protection"),
])
def test_a_policy_violation_fails_the_plan_naming_the_rule_and_the_resource(setting, value, rule):
    result = invoke("plan", "--stack", "prod", "--set", f"{setting}={value}")
    assert result.exit_code == 1
    assert f"policy {rule}: cluster-eks:" in result.stderr
    assert "Traceback" not in result.output


def test_the_stacks_as_shipped_pass_every_policy(dev_plan, prod_plan):
    assert dev_plan["policy"]["violations"] == [] and prod_plan["policy"]["violations"] == []


def test_bad_setting_exits_2_with_the_config_error():
    result = invoke("plan", "--set", "gpuNodeType=g6.xlarge")
    assert result.exit_code == 2
    assert "gpuNodeType: got 'g6.xlarge'" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_stack_exits_2_naming_the_stacks():
    result = invoke("plan", "--stack", "staging")
    assert result.exit_code == 2
    assert "allowed: dev, prod" in result.stderr


def test_unparsable_stack_file_exits_2(monkeypatch):
    def broken(stack, overrides=None, deployed=None):
        yaml.safe_load("config:\n  eks-pd-llm:azCount: [2\n")

    monkeypatch.setattr("offline.run_offline", broken)
    result = invoke("plan", "--stack", "dev")
    assert result.exit_code == 2
    assert "the stack file is not valid YAML" in result.stderr
    assert "Traceback" not in result.output


def test_malformed_set_is_refused():
    assert invoke("plan", "--set", "gpuNodeCount").exit_code == 2


# ------------------------------------------------------------------------------ render

def test_render_prints_the_serving_namespace_in_apply_order(dev_run, cached_dev, ray_service_crd_validator):
    result = invoke("render", "--stack", "dev")
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    kinds = [(d["kind"], d["metadata"]["name"]) for d in documents]
    # The namespace first, its network policies before any Ray pod exists, the RayService last;
    # nothing of other namespaces (kuberay-system) and no Secret (its value is a secret).
    assert kinds[0] == ("Namespace", "inference") and kinds[-1] == ("RayService", "ray-llm")
    assert {name for kind, name in kinds[1:-1] if kind == "NetworkPolicy"} == {
        "default-deny-ingress", "ray-llm-ray-internal", "ray-llm-serve", "ray-llm-kuberay-operator",
        "ray-llm-metrics-scraper"}
    assert len(kinds) == 7
    assert all(d["metadata"].get("namespace") == "inference" for d in documents[1:])
    manifest = documents[-1]
    assert manifest == registered_ray_service(dev_run)
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayService")
    assert manifest["metadata"]["name"] == "ray-llm"
    assert manifest["metadata"]["namespace"] == "inference"
    workers = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert isinstance(workers[0]["replicas"], int)  # not the engine's 2.0
    # What the API server would check: the KubeRay 1.7.0 CRD schema.
    assert list(ray_service_crd_validator.iter_errors(manifest)) == []
    serve = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    assert serve["applications"][0]["import_path"] == "ray.serve.llm:build_pd_openai_app"


def test_render_serve_config_only(dev_run, cached_dev):
    result = invoke("render", "--serve-config")
    assert result.exit_code == 0, result.output
    serve = yaml.safe_load(result.stdout)
    assert serve == yaml.safe_load(registered_ray_service(dev_run)["spec"]["serveConfigV2"])


def test_multiline_strings_render_as_blocks():
    assert to_yaml({"serveConfigV2": "a: 1\nb: 2\n"}) == "serveConfigV2: |\n  a: 1\n  b: 2\n"


def test_cost_counts_the_prometheus_volume_the_settings_size(dev_plan, prod_plan):
    for plan, gib in ((dev_plan, 50), (prod_plan, 200)):
        (line,) = [line for line in plan["cost"]["lines"] if "Prometheus" in line["item"]]
        assert (line["quantity"], line["unit"]) == (gib, "GiB")
        assert line["item"].startswith("EBS gp3 volume")


# ------------------------------------------------------------------- what a reviewer reads

REPO = Path(__file__).resolve().parents[2]


def _plan_text(stack: str, hash_seed: str) -> str:
    """`pdctl plan` as a pipe sees it (stdout not a terminal), in a fresh interpreter."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "pdctl", "plan", "--stack", stack], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def prod_texts() -> tuple[str, str]:
    """The prod text plan from two interpreters with different hash seeds."""
    return _plan_text("prod", "1"), _plan_text("prod", "2")


def test_text_plan_is_byte_identical_across_runs_and_fits_a_screen_when_piped(prod_texts):
    first, second = prod_texts
    assert first == second
    lines = first.splitlines()
    # Piped (a CI log, less), every line fits 100 columns (COLUMNS=80 is ignored); long values wrap.
    assert max(len(line) for line in lines) <= PIPED_WIDTH == 100
    assert not any(line.endswith(" ") for line in lines)
    # Long source citations are footnotes below their table, not cells.
    assert any(line.startswith("[1] ") for line in lines)
    # Section rules stop at RULE_WIDTH: an unwrapped plan would otherwise draw each across thousands of columns.
    rules = [line for line in lines if line.startswith("─")]
    assert len(rules) >= 8 and all(len(line) <= RULE_WIDTH for line in rules)
    # Maps the engine hands over unordered come out sorted.
    labels = first[first.index("pod-security.kubernetes.io/audit=baseline"):]
    assert labels.index("audit=") < labels.index("enforce=") < labels.index("enforce-version=") < labels.index("warn=")


def test_width_option_wraps_the_text_plan(cached_dev):
    result = invoke("plan", "--width", "80")
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_prod_protections_in_json_and_text(prod_plan, prod_texts):
    protections = prod_plan["protections"]
    assert {(p["type"], p["name"]) for p in protections["protected"]} == {
        (CLUSTER, "cluster-eks"), ("aws:kms/key:Key", "cluster-secrets"), ("aws:ec2/vpc:Vpc", "network-vpc")}
    [cluster] = protections["eks_clusters"]
    assert cluster["deletion_protection"] is True
    assert cluster["endpoint_private_access"] and cluster["public_access_cidrs"] == ["203.0.113.0/24"]
    [entry] = cluster["access_entries"]
    assert entry["principal_arn"] == "arn:aws:iam::111122223333:role/platform-admin"
    assert [(p["policy_arn"].rsplit("/", 1)[-1], p["scope"]) for p in entry["policies"]] == [
        ("AmazonEKSClusterAdminPolicy", "cluster")]
    protected = {n["name"] for n in _walk(prod_plan["tree"]) if n["options"]["protect"]}
    assert protected == {"cluster-eks", "cluster-secrets", "network-vpc"}
    text = " ".join(prod_texts[0].split())  # as read: lines wrap at 100 columns
    assert "EKS cluster-eks: deletion protection ON; API endpoint private on, public from 203.0.113.0/24" in text
    assert ("access entry arn:aws:iam::111122223333:role/platform-admin → AmazonEKSClusterAdminPolicy "
            "(cluster scope)") in text
    assert "cluster-eks eks:index:Cluster [protected]" in text


def test_dev_protects_nothing_and_says_so(dev_plan, cached_dev):
    [cluster] = dev_plan["protections"]["eks_clusters"]
    assert dev_plan["protections"]["protected"] == [] and cluster["deletion_protection"] is False
    assert cluster["public_access_cidrs"] == ["0.0.0.0/0"]
    text = invoke("plan").stdout
    assert "Pulumi protect (`pulumi destroy` and replacements refuse until it is turned off): none" in text
    assert "deletion protection OFF" in text and "access entries: none in the stack" in text


def test_values_the_offline_mock_made_up_are_marked_and_the_stacks_own_are_not(prod_plan, prod_texts):
    nodes = list(_walk(prod_plan["tree"]))
    cluster = next(n for n in nodes if n["type"] == CLUSTER)
    assert set(cluster["offline"]) == {"secrets KMS key"}  # not the CIDRs, version or name it was given
    gpu = next(n for n in nodes if n["type"] == NODE_GROUP and n["name"] == "gpu-nodes")
    assert set(gpu["offline"]) == {"subnets"} and "subnet" in gpu["offline"]["subnets"]
    subnets = [n for n in nodes if n["type"] == "aws:ec2/subnet:Subnet"]
    assert all(set(n["offline"]) == {"az"} for n in subnets)
    # The front door's URL is the NLB's DNS name, which only AWS gives.
    assert set(prod_plan["offline_outputs"]) == {"gpuAvailabilityZone", "gpuAvailabilityZoneId", "endpointUrl",
                                                 "clientConfig", "loadBalancerHostname"}
    text = prod_texts[0]
    assert f"gpuAvailabilityZone = {prod_plan['outputs']['gpuAvailabilityZone']} (offline)" in text
    assert "clusterName = ray-llm-prod\n" in text


def test_resource_options_and_masked_inputs_are_in_the_json(prod_plan):
    ray = next(n for n in _walk(prod_plan["tree"]) if n["type"] == RAY_SERVICE)
    # prod updates blue/green: KubeRay's NewCluster takes cluster changes, Pulumi replaces nothing.
    assert ray["options"] == {"protect": False, "replace_on_changes": [], "delete_before_replace": False}
    assert ray["inputs"]["metadata"]["name"] == "ray-llm"
    provider = next(n for n in _walk(prod_plan["tree"]) if n["type"] == "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"


def test_model_facts_nobody_can_read_warn_and_fail_only_a_strict_plan(hf_cache):
    unknown = ("--set", "modelSource=acme/not-anywhere", "--set", "modelId=x")
    relaxed = invoke("plan", *unknown)
    assert relaxed.exit_code == 0
    assert "warning: modelSource 'acme/not-anywhere'" in relaxed.stderr
    strict = invoke("plan", *unknown, "--strict")
    # The model's, and the alerts the program could not create without its capacity report.
    assert strict.exit_code == 1 and "--strict: 2 warning(s)" in strict.stderr
    assert "warning: alert not created: PDKvTransferSlowerThanPredicted" in strict.stderr
    assert invoke("plan", "--strict").exit_code == 0  # Qwen3.5-9B: the shipped facts are the fallback


def test_the_plan_shows_zone_ids_beside_names(dev_plan):
    zones = dev_plan["availability_zones"]
    assert zones["gpu"] == {"name": "us-west-2b", "id": "usw2-az2"}
    assert [(z["name"], z["id"], z["control_plane"]) for z in zones["network"]] == [
        ("us-west-2b", "usw2-az2", True), ("us-west-2a", "usw2-az1", True)]
def test_the_plan_states_what_a_head_restart_does_to_requests(dev_plan, prod_plan):
    """As Ray/KubeRay document it (facts/fault_tolerance.py): prod keeps its workers serving, dev loses them."""
    assert prod_plan["head_restart"]["basis"] == dev_plan["head_restart"]["basis"] == \
        "documented by Ray/KubeRay, not measured here"
    assert "continue" in prod_plan["head_restart"]["in_flight"]
    assert "KubeRay restarts every worker pod" in dev_plan["head_restart"]["in_flight"]
    assert all(s.startswith("https://docs.ray.io/") for s in prod_plan["head_restart"]["sources"])


def test_prods_gcs_store_is_priced_from_the_recorded_elasticache_price(prod_plan):
    [line] = [x for x in prod_plan["cost"]["lines"] if x["item"].startswith("ElastiCache")]
    node = prices.PRICES["us-west-2"].elasticache_node_per_hour["cache.t4g.small"]
    assert (line["quantity"], line["unit_price_per_hour"]) == (2, node)
    assert line["per_hour"] == pytest.approx(2 * node, abs=1e-4)


# ---------------------------------------------------------------------------- front door

def test_the_plan_shows_the_door_its_keys_and_what_a_caller_without_one_gets(dev_plan):
    door = dev_plan["front_door"]
    assert (door["scheme"], door["port"], door["tls"], door["key_names"]) == ("internal", 80, False, [])
    assert any("refuses every request (401)" in note for note in door["notes"])


def test_a_door_with_keys_lists_their_names_and_no_refusal_note():
    keys = {"app-team": "x7" * 20, "batch": "q9" * 20}
    run = run_offline("dev", secrets={"apiKeys": json.dumps(keys)})
    door = build_plan(run, stack="dev", config_region=run.config["aws:region"]).to_dict()["front_door"]
    assert door["key_names"] == ["app-team", "batch"]
    assert not any("refuses every request" in note for note in door["notes"])
    assert not any(key in json.dumps(door) for key in keys.values())


def test_no_door_no_door_section():
    run = run_offline("dev", overrides={"frontDoor": "none"})
    assert build_plan(run, stack="dev", config_region=run.config["aws:region"]).to_dict()["front_door"] is None


def test_plan_text_with_every_start_path_names_them_and_what_a_first_deploy_compiles():
    text = invoke("plan", "--stack", "dev", "--width", "1000", "--set", "modelSource=s3://acme-models/mirror/Qwen/Qwen3.5-9B",
                  "--set", "rayImageCarriesRunaiStreamer=true", "--set", "compileCacheInS3=true",
                  "--set", "gpuImageSnapshotId=snap-0123456789abcdef0").stdout
    assert "image: in containerd's store on a volume restored from snap-0123456789abcdef0 (gpuImageSnapshotId): " \
           "nothing pulled" in text
    assert "new GPU node → serving: 276 s (51% measured, 41% sourced, 7% estimated); goal ≤ 180 s: MISSED by 96 s" \
        in text
    (reach,) = [line for line in text.splitlines() if line.startswith("EKS control plane ready → first token")]
    assert reach.endswith("(the engines start on compile caches an earlier start saved in S3; the first deploy for "
                          "their key compiles: 3.0 min more)")


def test_a_key_set_as_the_readme_says_still_plans_offline(tmp_path, monkeypatch):
    """`pulumi config set --secret apiKeys …` leaves a `secure:` value in the stack file that no offline plan
    can decrypt: the plan (make plan, CI's plan job) stands a key table of its shape in for it, with the key
    names apiKeyLimits gives, instead of refusing the key."""
    for name in ("Pulumi.yaml", "__main__.py"):
        (tmp_path / name).write_text((REPO / name).read_text())
    (tmp_path / "dashboards").symlink_to(REPO / "dashboards")
    stack = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    stack["config"]["eks-pd-llm:apiKeys"] = {"secure": "v1:GtYJQkxx0eIAAAAAAAAAAA==:bm90IGEgcmVhbCBrZXk="}
    stack["config"]["eks-pd-llm:apiKeyLimits"] = json.dumps({"app-team": {"requestsPerMinute": 60}})
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    # `--project` names the project for the rest of the process: set here, monkeypatch takes it away after the
    # test, and the tests after this one plan this checkout again.
    monkeypatch.setenv(PROJECT_ENV, str(REPO))
    result = invoke("plan", "--project", tmp_path, "--stack", "dev", "--output", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outputs"]["apiKeyNames"] == ["app-team"]
