"""`pdctl plan --diff`: what a change does, judged on hand-made before/after plans, and through the
CLI on the real program's plan."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from typer.testing import CliRunner

from offline import run_offline
from pdctl.cli import app
from pdctl.money import usd
from pdctl.plan import build_plan
from pdctl.plan_diff import EXIT_CHANGED, diff_plans, flatten, render_diff

NODE_GROUP = "eks:index:ManagedNodeGroup"
RAY_SERVICE = "kubernetes:ray.io/v1:RayService"

SERVE_CONFIG = {"applications": [{"name": "llm", "import_path": "ray.serve.llm:build_pd_openai_app",
                                  "args": {"decode_config": {"engine_kwargs": {"max_model_len": 4096}},
                                           "prefill_config": {"engine_kwargs": {"max_model_len": 4096}}}}]}


def node(rtype: str, name: str, inputs: dict, *, protect=False, replace_on_changes=(), delete_before_replace=False,
         children=()) -> dict:
    return {"type": rtype, "name": name, "settings": {}, "offline": {}, "inputs": inputs,
            "options": {"protect": protect, "replace_on_changes": list(replace_on_changes),
                        "delete_before_replace": delete_before_replace},
            "children": list(children)}


def hand_made_plan(*, instance_type="g6.8xlarge", desired=2, max_model_len=4096, per_hour=5.16,
                   extra=()) -> dict:
    """A small plan shaped like `pdctl plan -o json`: a GPU node group, a RayService, cost, capacity."""
    serve = copy.deepcopy(SERVE_CONFIG)
    for phase in ("decode_config", "prefill_config"):
        serve["applications"][0]["args"][phase]["engine_kwargs"]["max_model_len"] = max_model_len
    group = node(NODE_GROUP, "gpu-nodes", {"instanceTypes": [instance_type], "subnetIds": ["subnet-1"],
                                           "scalingConfig": {"desiredSize": desired, "maxSize": desired,
                                                             "minSize": desired},
                                           "labels": {"role": "gpu-worker"}})
    ray = node(RAY_SERVICE, "inference-rayservice",
               {"metadata": {"name": "ray-llm", "namespace": "inference"},
                "spec": {"serveConfigV2": yaml.safe_dump(serve),
                         "rayClusterConfig": {"workerGroupSpecs": [{"replicas": desired}]}}},
               replace_on_changes=["spec.rayClusterConfig"], delete_before_replace=True)
    stack = node("pulumi:pulumi:Stack", "eks-pd-llm-dev", {}, children=[group, ray, *extra])
    return {
        "stack": "dev", "region": "us-west-2",
        "resources": {"total": 3 + len(extra), "by_type": {}},
        "tree": [stack],
        "protections": {"protected": [], "eks_clusters": []},
        "capacity": {"per_phase": {"decode": {"max_model_len": max_model_len,
                                              "max_concurrent_sequences": 24576 // max_model_len}},
                     "note": None},
        "cost": {"per_hour": per_hour, "per_month": round(per_hour * 730, 2), "complete": True,
                 "region": "us-west-2", "lines": [{"item": f"EC2 {instance_type} (gpu-nodes)", "per_hour": per_hour}]},
        "critical_path": {"minutes": 30.8, "sequential_minutes": 49.5, "steps": []},
        "outputs": {"modelId": "qwen3.5-9b"},
        "offline_outputs": {},
    }


def only(diff, name):
    [change] = [r for r in diff.resources if r.name == name]
    return change


# ------------------------------------------------------------------------- hand-made plans

def test_identical_plans_are_no_change():
    plan = hand_made_plan()
    diff = diff_plans(plan, copy.deepcopy(plan))
    assert not diff.changed and diff.resources == [] and diff.unchanged == 3
    assert "no change" in render_diff(diff)


def test_a_new_instance_type_replaces_the_node_group_and_says_why():
    diff = diff_plans(hand_made_plan(), hand_made_plan(instance_type="g6.12xlarge"))
    group = only(diff, "gpu-nodes")
    assert group.action == "replace"
    [change] = group.changes
    assert (change.path, change.before, change.after) == ("instanceTypes[0]", "g6.8xlarge", "g6.12xlarge")
    assert "instanceTypes forces a new resource" in group.replaced_because[0]
    text = render_diff(diff)
    assert "-/+ replace: gpu-nodes (eks:index:ManagedNodeGroup)" in text
    assert 'instanceTypes[0]: "g6.8xlarge" → "g6.12xlarge"  (forces replacement)' in text


def test_scaling_a_node_group_updates_it_in_place():
    diff = diff_plans(hand_made_plan(desired=2), hand_made_plan(desired=3))
    group = only(diff, "gpu-nodes")
    assert group.action == "update"
    assert {c.path for c in group.changes} == {"scalingConfig.desiredSize", "scalingConfig.maxSize",
                                               "scalingConfig.minSize"}
    assert not group.replaced_because
    # The same change grows the RayService's worker group: its replaceOnChanges replaces it, and
    # deleteBeforeReplace means a gap in service.
    ray = only(diff, "inference-rayservice")
    assert ray.action == "replace"
    assert ray.replaced_because == ["spec.rayClusterConfig is in the program's replaceOnChanges"]
    assert any("deleted before the new one exists" in note for note in ray.notes)


def test_a_changed_serve_config_is_compared_inside_its_yaml_and_updates_in_place():
    diff = diff_plans(hand_made_plan(), hand_made_plan(max_model_len=8192))
    ray = only(diff, "inference-rayservice")
    assert ray.action == "update"
    assert [(c.path, c.before, c.after) for c in ray.changes] == [
        ("spec.serveConfigV2:applications[0].args.decode_config.engine_kwargs.max_model_len", 4096, 8192),
        ("spec.serveConfigV2:applications[0].args.prefill_config.engine_kwargs.max_model_len", 4096, 8192),
    ]
    [decode_len, decode_seqs] = sorted(diff.capacity, key=lambda d: d.what)
    assert (decode_len.what, decode_len.difference) == ("decode.max_concurrent_sequences", -3)
    assert (decode_seqs.what, decode_seqs.difference) == ("decode.max_model_len", 4096)
    text = render_diff(diff)
    assert "~   update: inference-rayservice (kubernetes:ray.io/v1:RayService)" in text
    assert "decode.max_concurrent_sequences: 6 → 3 (-3, -50.0%)" in text


def test_a_cost_change_shows_its_delta_per_hour_and_month():
    diff = diff_plans(hand_made_plan(per_hour=5.16), hand_made_plan(per_hour=7.20))
    assert diff.changed and diff.resources == []
    per_hour = next(d for d in diff.cost if d.what == "per_hour")
    assert per_hour.difference == pytest.approx(2.04)
    text = render_diff(diff)
    # Money one way, as the plan writes it.
    assert "per_hour: $5.16 → $7.20 (+$2.04, +39.5%)" in text
    assert "per_month: $3,766.80 → $5,256.00 (+$1,489.20, +39.5%)" in text


def test_added_and_removed_resources_and_a_protected_deletion():
    extra = node("aws:ec2/vpc:Vpc", "network-vpc", {"cidrBlock": "10.0.0.0/16"}, protect=True)
    diff = diff_plans(hand_made_plan(extra=[extra]), hand_made_plan())
    [deleted] = diff.resources
    assert (deleted.action, deleted.name) == ("delete", "network-vpc")
    assert "protected" in deleted.notes[0]
    diff = diff_plans(hand_made_plan(), hand_made_plan(extra=[extra]))
    assert [(r.action, r.name) for r in diff.resources] == [("create", "network-vpc")]
    assert "+   create: network-vpc (aws:ec2/vpc:Vpc)" in render_diff(diff)


def test_replacing_a_protected_resource_warns_that_pulumi_refuses():
    before = node("aws:ec2/vpc:Vpc", "network-vpc", {"cidrBlock": "10.0.0.0/16"}, protect=True)
    after = node("aws:ec2/vpc:Vpc", "network-vpc", {"cidrBlock": "10.1.0.0/16"}, protect=True)
    vpc = only(diff_plans(hand_made_plan(extra=[before]), hand_made_plan(extra=[after])), "network-vpc")
    assert vpc.action == "replace"
    assert any("refuses to replace it" in note for note in vpc.notes)


def test_a_type_whose_replacement_rules_are_unknown_is_said_to_be_unknown():
    before = node("aws:eks/addon:Addon", "coredns", {"resolveConflictsOnCreate": "OVERWRITE"})
    after = node("aws:eks/addon:Addon", "coredns", {"resolveConflictsOnCreate": "NONE"})
    addon = only(diff_plans(hand_made_plan(extra=[before]), hand_made_plan(extra=[after])), "coredns")
    assert addon.action == "update or replace"
    assert "not known offline" in addon.notes[0]


def test_a_base_plan_from_an_older_pdctl_is_compared_on_key_settings():
    base = hand_made_plan()
    for resource in base["tree"][0]["children"]:
        del resource["inputs"], resource["options"]
        resource["settings"] = {"desired": 2}
    head = hand_made_plan(desired=3)
    head["tree"][0]["children"][0]["settings"] = {"desired": 3}
    diff = diff_plans(base, head)
    assert diff.notes[0].startswith("The base plan has no inputs")
    assert only(diff, "gpu-nodes").action == "update or replace"


def test_keys_with_dots_and_slashes_are_quoted_in_paths():
    assert flatten({"labels": {"kubernetes.io/os": "linux", "role": "gpu"}}) == {
        'labels["kubernetes.io/os"]': "linux", "labels.role": "gpu"}


def test_changes_inside_many_items_of_a_list_collapse_to_one_line_with_a_count():
    interfaces = [{"deviceIndex": i, "networkCardIndex": i, "interfaceType": "efa"} for i in range(32)]
    base = hand_made_plan()
    head = copy.deepcopy(base)
    for resource in (base, head):
        [group] = [n for n in resource["tree"][0]["children"] if n["name"] == "gpu-nodes"]
        group["inputs"]["networkInterfaces"] = copy.deepcopy(interfaces[:1] if resource is base else interfaces)
    lines = render_diff(diff_plans(base, head)).splitlines()
    collapsed = [line for line in lines if "networkInterfaces" in line]
    assert collapsed == ["      networkInterfaces[N]: 93 changes in 31 items (deviceIndex, interfaceType, "
                         "networkCardIndex)"]
    # A change in one item of a list keeps its own line (instanceTypes[0] above).


# ------------------------------------------------------------------------ the real plan

@pytest.fixture(scope="module")
def prod_run(offline_run):
    return offline_run("prod")


@pytest.fixture(scope="module")
def prod_plan(prod_run):
    return json.loads(json.dumps(build_plan(prod_run, stack="prod", config_region="us-west-2").to_dict(),
                                 sort_keys=True, default=str))


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def cached_prod(prod_run, monkeypatch):
    monkeypatch.setattr("offline.run_offline", lambda stack, overrides=None, deployed=None: prod_run)


def test_diff_against_its_own_plan_exits_0(prod_plan, cached_prod, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(prod_plan))
    result = invoke("plan", "--stack", "prod", "--diff", base)
    assert result.exit_code == 0, result.output
    assert "no change" in result.stdout


def test_diff_against_a_base_that_differs_exits_3_and_names_the_change(prod_plan, cached_prod, tmp_path):
    base = copy.deepcopy(prod_plan)
    groups = [n for n in _walk(base["tree"]) if n["type"] == NODE_GROUP and n["name"] == "gpu-nodes"]
    groups[0]["inputs"]["instanceTypes"] = ["g6.4xlarge"]  # the base branch ran a smaller type
    # Prod's total is n/a (its GCS store's ElastiCache nodes have no recorded price): a priced line moves.
    [gpu_line] = [line for line in base["cost"]["lines"] if line["item"] == "EC2 g6.8xlarge (gpu-nodes)"]
    gpu_line["per_hour"] = 3.0
    path = tmp_path / "base.json"
    path.write_text(json.dumps(base))
    result = invoke("plan", "--stack", "prod", "--diff", path)
    assert result.exit_code == EXIT_CHANGED == 3, result.output
    assert "-/+ replace: gpu-nodes (eks:index:ManagedNodeGroup)" in result.stdout
    after = next(line["per_hour"] for line in prod_plan["cost"]["lines"] if line["item"] == gpu_line["item"])
    assert f"lines[\"{gpu_line['item']}\"]: $3.00 → {usd(after)}" in result.stdout
    document = invoke("plan", "--stack", "prod", "--diff", path, "--output", "json")
    assert document.exit_code == 3
    data = json.loads(document.stdout)
    assert data["changed"] is True and data["counts"]["replace"] == 1


def test_diff_refuses_a_file_that_is_not_a_plan(tmp_path, cached_prod):
    path = tmp_path / "base.json"
    path.write_text('{"hello": 1}')
    result = invoke("plan", "--stack", "prod", "--diff", path)
    assert result.exit_code == 2
    assert "not a `pdctl plan --output json` document" in result.stderr


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n["children"])


def test_secret_inputs_never_reach_the_plan_or_its_diff(tmp_path, monkeypatch):
    token = "hf_plan_must_not_show_this"
    api_key = "plan-must-not-show-this-api-key-0123456789"
    run = run_offline("dev", secrets={"hfToken": token, "apiKeys": json.dumps({"app-team": api_key})})
    plan = json.loads(json.dumps(build_plan(run, stack="dev").to_dict(), sort_keys=True, default=str))
    text = json.dumps(plan)
    assert token not in text and api_key not in text
    # The HF token's and the front door's key table (salted hashes) Secrets.
    secrets = [n for n in _walk(plan["tree"]) if n["type"] == "kubernetes:core/v1:Secret"]
    assert len(secrets) == 2 and all("[secret]" in json.dumps(secret["inputs"]) for secret in secrets)
    base = copy.deepcopy(plan)
    base["outputs"]["modelId"] = "other"
    path = tmp_path / "base.json"
    path.write_text(json.dumps(base))
    monkeypatch.setattr("offline.run_offline", lambda stack, overrides=None, deployed=None: run)
    result = invoke("plan", "--stack", "dev", "--diff", path)
    assert result.exit_code == 3 and token not in result.stdout


# ---------------------------------------------------------------- identity (URN) and state

CACHE = "aws:elasticache/replicationGroup:ReplicationGroup"
GCS_STORE = "eks-pd-llm:gcs:GcsStore"


def cache_store(parent_type: str = GCS_STORE, name: str = "gcs-store", rtype: str = CACHE, **inputs) -> dict:
    return node(parent_type, "gcs", {}, children=[node(rtype, name, {"replicationGroupId": "ray-gcs",
                                                                    "nodeType": "cache.t4g.small", **inputs})])


def test_resources_are_keyed_by_urn_so_a_new_parent_type_is_a_stateful_delete_and_a_create():
    diff = diff_plans(hand_made_plan(extra=[cache_store()]),
                      hand_made_plan(extra=[cache_store(parent_type="eks-pd-llm:gcs:Store")]))
    actions = {(r.action, r.urn) for r in diff.resources if r.type == CACHE}
    assert actions == {("delete", f"{GCS_STORE}${CACHE}::gcs-store"),
                       ("create", f"eks-pd-llm:gcs:Store${CACHE}::gcs-store")}
    [gone] = diff.stateful_losses
    assert gone.action == "delete" and "GCS" in (gone.loses or "")
    assert any(note.startswith("moved under another parent: its URN changes") for note in gone.notes)
    assert render_diff(diff).splitlines()[2] == (f"DELETES A STATEFUL RESOURCE: gcs-store ({CACHE}) loses "
                                                 "the Ray head's cluster state (GCS fault tolerance)")


def test_a_renamed_stateful_resource_is_a_delete_the_diff_calls_a_rename():
    diff = diff_plans(hand_made_plan(extra=[cache_store()]), hand_made_plan(extra=[cache_store(name="gcs-cache")]))
    [gone] = diff.stateful_losses
    assert (gone.action, gone.name) == ("delete", "gcs-store")
    assert any(note.startswith("renamed to gcs-cache") for note in gone.notes)


def test_a_change_the_provider_may_replace_on_a_stateful_type_counts_as_a_loss_and_a_known_one_does_not():
    # transitEncryptionEnabled replaces below Redis 7.0.5 (a CustomizeDiff): not known offline.
    maybe = diff_plans(hand_made_plan(extra=[cache_store(transitEncryptionEnabled=False)]),
                       hand_made_plan(extra=[cache_store(transitEncryptionEnabled=True)]))
    [store] = maybe.stateful_losses
    assert store.action == "update or replace" and store.loss_verb == "MAY REPLACE"
    assert render_diff(maybe).splitlines()[2].startswith("MAY REPLACE A STATEFUL RESOURCE: gcs-store")
    # A bigger node is modified in place: no loss.
    resized = diff_plans(hand_made_plan(extra=[cache_store()]),
                         hand_made_plan(extra=[cache_store(nodeType="cache.m7g.large")]))
    assert [r.action for r in resized.resources] == ["update"] and resized.stateful_losses == []
    # A new port is a new replication group.
    moved = diff_plans(hand_made_plan(extra=[cache_store(port=6379)]), hand_made_plan(extra=[cache_store(port=6380)]))
    assert [r.action for r in moved.stateful_losses] == ["replace"]


def test_kms_keys_are_replaced_only_by_their_spec_and_usage():
    def key(**inputs):
        return node("aws:kms/key:Key", "secrets-key", {"description": "secrets", **inputs})

    rotated = diff_plans(hand_made_plan(extra=[key(enableKeyRotation=False)]),
                         hand_made_plan(extra=[key(enableKeyRotation=True)]))
    assert [r.action for r in rotated.resources] == ["update"]
    respec = diff_plans(hand_made_plan(extra=[key(customerMasterKeySpec="SYMMETRIC_DEFAULT")]),
                        hand_made_plan(extra=[key(customerMasterKeySpec="RSA_2048")]))
    assert [(r.action, bool(r.loses)) for r in respec.resources] == [("replace", True)]


def _with_launch_template_version(plan: dict, version: str, user_data: str) -> dict:
    [group] = [n for n in plan["tree"][0]["children"] if n["name"] == "gpu-nodes"]
    group["inputs"]["launchTemplate"] = {"id": "lt-1", "version": version}
    template = node("aws:ec2/launchTemplate:LaunchTemplate", "gpu-nodes-lt", {"userData": user_data})
    plan["tree"][0]["children"].append(template)
    plan["cold_start"] = {"new_node": {"seconds": 810.0}}
    return plan


def test_a_new_launch_template_version_rolls_every_node_with_its_surge_quota_and_minutes():
    base = _with_launch_template_version(hand_made_plan(), "17", "old")
    head = _with_launch_template_version(hand_made_plan(), "942", "new")
    diff = diff_plans(base, head)
    [group] = diff.rollouts
    assert (group.name, group.action) == ("gpu-nodes", "update")
    roll = group.rollout
    assert roll is not None and (roll.nodes, roll.added_nodes, roll.extra_vcpus, roll.peak_vcpus) == (2, 2, 64, 128)
    assert roll.minutes == pytest.approx(13.5)
    template = only(diff, "gpu-nodes-lt")
    assert template.action == "update" and "rolls every node" in template.notes[0]
    lines = render_diff(diff).splitlines()
    assert lines[2] == ("NODES: gpu-nodes rolls every GPU node: 2 × g6.8xlarge; up to 2 more node(s) while it runs: "
                        "+64 vCPUs of On-Demand quota, 128 at the peak; about 13.5 min until it serves again "
                        "(a new GPU node's cold start, 13.5 min)")


def test_scaling_or_labels_do_not_roll_the_nodes():
    diff = diff_plans(hand_made_plan(desired=2), hand_made_plan(desired=3))
    assert only(diff, "gpu-nodes").rollout is None and diff.rollouts == []


def _with_versions(plan: dict, cluster_version: str, group_version: str | None) -> dict:
    """`plan` with an EKS cluster at `cluster_version` and its GPU node group at `group_version` (None:
    no version set, as a group created before the program named one)."""
    plan = copy.deepcopy(plan)
    [stack] = plan["tree"]
    stack["children"].append(node("eks:index:Cluster", "cluster-eks", {"version": cluster_version}))
    if group_version is not None:
        [group] = [n for n in stack["children"] if n["name"] == "gpu-nodes"]
        group["inputs"]["version"] = group_version
    return plan


def test_naming_the_version_a_group_already_runs_changes_nothing():
    diff = diff_plans(_with_versions(hand_made_plan(), "1.34", None),
                      _with_versions(hand_made_plan(), "1.34", "1.34"))
    assert diff.resources == [] and diff.rollouts == []


def test_a_new_kubernetes_minor_upgrades_the_control_plane_and_rolls_the_nodes_after_it():
    diff = diff_plans(_with_versions(hand_made_plan(), "1.34", "1.34"),
                      _with_versions(hand_made_plan(), "1.35", "1.35"))
    assert only(diff, "cluster-eks").action == "update"
    [group] = diff.rollouts
    assert (group.name, group.action) == ("gpu-nodes", "update")
    assert group.rollout is not None and (group.rollout.nodes, group.rollout.added_nodes) == (2, 2)


def test_a_group_left_at_an_older_minor_rolls_when_the_program_names_the_clusters():
    diff = diff_plans(_with_versions(hand_made_plan(), "1.35", None),
                      _with_versions(hand_made_plan(), "1.35", "1.36"))
    assert [r.name for r in diff.rollouts] == ["gpu-nodes"]
