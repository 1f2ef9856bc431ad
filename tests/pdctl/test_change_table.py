"""The common day-two changes, each planned offline before and after (pdctl/change_table.py): what each
replaces, rolls and costs in minutes, as docs/CHANGES.md shows it."""

from __future__ import annotations

import pytest

from pdctl.change_table import COMMON_CHANGES, NETWORK_AND_CLUSTER_TYPES, change_rows, change_table
from tools import readme_tables


@pytest.fixture(scope="module")
def rows():
    return {row.change.what: row for row in change_rows()}


def _row(rows, starts: str):
    [row] = [row for what, row in rows.items() if what.startswith(starts)]
    return row


def test_the_table_covers_the_common_changes():
    names = " | ".join(change.what for change in COMMON_CHANGES)
    assert len(COMMON_CHANGES) >= 10
    for needed in ("GPU type", "another model", "maxModelLen", "replica bounds", "Kubernetes minor",
                   "kuberay-operator chart", "nvidia-device-plugin chart", "aws-efa-k8s-device-plugin chart",
                   "kube-prometheus-stack chart", "dcgm-exporter chart", "cluster-autoscaler chart", "Ray image",
                   "user data", "GCS fault tolerance", "the previous release → now"):
        assert needed in names


def test_no_change_replaces_the_network_or_the_cluster_unless_its_row_says_why(rows):
    unexplained = {what: [f"{r.action} {r.name}" for r in row.network_replaced]
                   for what, row in rows.items() if row.network_replaced and not row.change.why_network}
    assert unexplained == {}, f"replaced without a reason: {unexplained} ({sorted(NETWORK_AND_CLUSTER_TYPES)})"


def test_new_node_user_data_rolls_every_gpu_node_with_its_surge_and_replaces_nothing(rows):
    row = _row(rows, "GPU node user data")
    assert row.replaced == []
    [rolled] = row.diff.rollouts
    assert rolled.name == "gpu-nodes" and rolled.rollout is not None
    assert (rolled.rollout.added_nodes, rolled.rollout.extra_vcpus, rolled.rollout.peak_vcpus) == (2, 64, 128)
    assert row.minutes == pytest.approx(rolled.rollout.minutes, abs=0.5)


def test_what_only_changes_the_serve_config_restarts_the_engines_and_touches_no_node(rows):
    row = _row(rows, "maxModelLen")
    assert row.replaced == [] and row.diff.rollouts == []
    assert 0 < row.minutes < 5  # the engines' restart on their own nodes


def test_fp8_weights_restart_the_engines_with_their_new_kv_cache_and_touch_no_node(rows):
    row = _row(rows, "FP8 weights")
    assert row.replaced == [] and row.diff.rollouts == []
    assert [(r.name, r.action) for r in row.diff.resources] == [("inference-rayservice", "update")]
    assert {c.path.split(".engine_kwargs.", 1)[-1] for r in row.diff.resources for c in r.changes} == {
        "quantization", "kv_cache_memory_bytes"}


def test_turning_on_node_growth_names_the_gpu_group_once_a_new_group_beside_the_old(rows):
    row = _row(rows, "GPU nodes may grow")
    [group] = [r for r in row.replaced if r.name == "gpu-nodes"]
    assert any(c.path == "nodeGroupName" for c in group.changes)
    assert group.rollout is not None and group.rollout.added_nodes == 2  # created before the old is deleted


def test_a_new_chart_version_may_replace_its_release_and_says_so(rows):
    row = _row(rows, "kube-prometheus-stack chart")
    [release] = row.replaced
    assert release.action == "update or replace" and release.loses  # Prometheus's volume


def test_the_last_release_to_now_replaces_nothing_stateful_and_the_previous_rolls_the_gpu_nodes(rows):
    last = _row(rows, "the last release")
    assert last.diff.stateful_losses == [] and last.diff.rollouts == []
    # The front door, on by default, changes the Ray pods: the RayService is replaced (docs/DELIVERY.md),
    # and with it each engine gets its fixed KV cache.
    [ray_service] = [r for r in last.replaced if r.action == "replace"]
    assert ray_service.name == "inference-rayservice"
    assert "kv_cache_memory_bytes" in {c.path.split(".engine_kwargs.", 1)[-1] for c in ray_service.changes}
    previous = _row(rows, "the previous release")
    assert [r.name for r in previous.diff.rollouts] == ["gpu-nodes"]
    assert previous.diff.stateful_losses == []


def test_docs_changes_shows_the_table_as_generated(rows):
    text = readme_tables.CHANGES_DOC.read_text()
    assert change_table(tuple(rows.values())) in text


def test_a_new_kubernetes_minor_rolls_every_node_group_after_the_control_plane(rows):
    row = _row(rows, "Kubernetes minor")
    assert row.replaced == [] and row.network_replaced == []
    assert sorted(r.name for r in row.diff.rollouts) == ["gpu-nodes", "system-nodes"]
    assert all(r.action == "update" for r in row.diff.rollouts)


# ── What each change does to traffic (pdctl/update_traffic.py), on dev (in place) and prod (blue/green)

def test_an_engine_argument_change_stops_dev_for_a_restart_and_keeps_prod_serving_on_a_priced_surge(rows):
    row = _row(rows, "maxModelLen")
    dev, prod = row.serving["dev"], row.serving["prod"]
    assert dev.seconds > 60 and dev.limits == ("upgradeStrategy None",)
    assert any(text.startswith("cut after 20 s") for text in dev.in_flight)
    assert prod.keeps_serving and prod.kinds == ("serve config or cluster, blue/green",)
    assert (prod.surge["gpu_nodes"], prod.surge["instance_type"], prod.surge["vcpus"]) == (2, "g6.8xlarge", 64)
    # The surge runs from the scale-up through the switch and the drain until the autoscaler removes it.
    assert prod.surge["minutes"] > 20 and 0 < prod.surge["dollars"] < 10
    assert any("finish on the old cluster" in text for text in prod.in_flight)


@pytest.mark.parametrize("change", ["another model", "the Ray image (", "decode replica bounds"])
def test_model_image_and_replica_bound_changes_keep_prod_serving(rows, change):
    row = _row(rows, change)
    assert not row.serving["dev"].keeps_serving
    assert row.serving["prod"].keeps_serving


def test_every_prod_outage_names_the_limit_that_causes_it(rows):
    """Where prod still drops traffic, the row says which AWS or upstream limit prevents it."""
    for what, row in rows.items():
        prod = row.serving["prod"]
        if isinstance(prod, str):
            assert prod == "already so on prod", what
        elif prod.kinds and not prod.keeps_serving:
            assert prod.limits == ("EKS drains a phase's only replica first",), what


def test_the_table_shows_both_stacks_serving(rows):
    table = change_table(tuple(rows.values()))
    header = table.splitlines()[0]
    assert "| serving, dev | serving, prod |" in header
    model = next(line for line in table.splitlines() if line.startswith("| another model"))
    assert "| 0 s (+2 × g6.8xlarge, +64 vCPUs for " in model
