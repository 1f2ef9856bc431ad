"""The observability and block-storage components as the whole dev and prod programs register them
(mocks, preview=False): what each waits for, where each runs, and what Prometheus is told to scrape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.manifests.monitoring import pd_dashboard

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CUSTOM = {"PodMonitor": "kubernetes:monitoring.coreos.com/v1:PodMonitor",
          "PrometheusRule": "kubernetes:monitoring.coreos.com/v1:PrometheusRule"}
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
ADDON = "aws:eks/addon:Addon"
ROLE = "aws:iam/role:Role"
NODE_GROUP = "eks:index:ManagedNodeGroup"
RAY_SERVICE = "kubernetes:ray.io/v1:RayService"


@pytest.fixture(scope="module", params=["dev", "prod"])
def each(request: Any, offline_run: Any) -> Any:
    return offline_run(request.param)


def release(run: Any, chart: str) -> Any:
    (found,) = [r for r in run.all(HELM_RELEASE) if r.inputs["chart"] == chart]
    return found


def test_monitoring_stack_waits_for_the_system_nodes_and_its_storage_class(each: Any) -> None:
    stack = release(each, "kube-prometheus-stack")
    assert stack.inputs["version"] == "88.5.3" and stack.inputs["namespace"] == "monitoring"
    assert stack.inputs["atomic"] is True
    assert each.depends_on(stack, each.one(NODE_GROUP, "system-nodes"))
    assert each.depends_on(stack, each.one(STORAGE_CLASS))
    claim = stack.inputs["values"]["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == each.one(STORAGE_CLASS).inputs["metadata"]["name"] == "gp3-encrypted"


def test_dcgm_exporter_waits_for_the_gpu_nodes_and_the_servicemonitor_crd(each: Any) -> None:
    dcgm = release(each, "dcgm-exporter")
    assert dcgm.inputs["version"] == "4.8.2" and dcgm.inputs["namespace"] == "kube-system"
    for prerequisite in (each.one(NODE_GROUP, "gpu-nodes"), release(each, "kube-prometheus-stack"),
                         release(each, "nvidia-device-plugin")):
        assert each.depends_on(dcgm, prerequisite), prerequisite.name


def test_pod_monitor_and_rules_wait_for_the_operator_crds(each: Any) -> None:
    stack = release(each, "kube-prometheus-stack")
    for kind, type_ in CUSTOM.items():
        (resource,) = each.all(type_)
        assert each.depends_on(resource, stack), kind
        assert resource.inputs["metadata"]["namespace"] == "monitoring"


def test_serving_does_not_wait_for_monitoring(each: Any) -> None:
    ray_service = each.one(RAY_SERVICE)
    for chart in ("kube-prometheus-stack", "dcgm-exporter"):
        assert not each.depends_on(ray_service, release(each, chart)), chart


def test_pod_monitor_scrapes_the_port_the_ray_pods_declare(each: Any) -> None:
    (monitor,) = each.all(CUSTOM["PodMonitor"])
    spec = monitor.inputs["spec"]
    ray_service = each.one(RAY_SERVICE).inputs
    assert spec["namespaceSelector"] == {"matchNames": [ray_service["metadata"]["namespace"]]}
    (endpoint,) = spec["podMetricsEndpoints"]
    cluster = ray_service["spec"]["rayClusterConfig"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        labels = group["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items())
        ports = {p["name"]: p["containerPort"] for p in group["template"]["spec"]["containers"][0]["ports"]}
        # ints arrive as floats through the mock engine
        assert int(ports[endpoint["port"]]) == int(group["rayStartParams"]["metrics-export-port"])


def test_rules_alert_on_the_job_the_pod_monitor_makes(each: Any) -> None:
    (monitor,) = each.all(CUSTOM["PodMonitor"])
    (rule,) = each.all(CUSTOM["PrometheusRule"])
    job = f"{monitor.inputs['metadata']['namespace']}/{monitor.inputs['metadata']['name']}"
    down = [r for g in rule.inputs["spec"]["groups"] for r in g["rules"] if r.get("alert") == "PDRayMetricsTargetDown"]
    assert f'job="{job}"' in down[0]["expr"]


def test_dashboard_reaches_grafanas_sidecar(each: Any) -> None:
    # The one ConfigMap in the monitoring namespace (the front door ships its code in another, beside the RayService).
    (config_map,) = [c for c in each.all(CONFIG_MAP) if c.inputs["metadata"]["namespace"] == "monitoring"]
    sidecar = release(each, "kube-prometheus-stack").inputs["values"]["grafana"]["sidecar"]["dashboards"]
    assert config_map.inputs["metadata"]["labels"] == {sidecar["label"]: sidecar["labelValue"]}
    assert config_map.inputs["metadata"]["namespace"] == sidecar["searchNamespace"] == "monitoring"
    (document,) = config_map.inputs["data"].values()
    assert json.loads(document) == pd_dashboard()


def test_ebs_csi_role_is_assumable_only_by_its_controller(each: Any) -> None:
    (addon,) = [a for a in each.all(ADDON) if a.inputs["addonName"] == "aws-ebs-csi-driver"]
    (role,) = [r for r in each.all(ROLE) if r.name == "block-storage-ebs-csi"]
    assert each.depends_on(addon, each.one(NODE_GROUP, "system-nodes"))
    policy = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = policy["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    conditions = statement["Condition"]["StringEquals"]
    subjects = [v for k, v in conditions.items() if k.endswith(":sub")]
    assert subjects == ["system:serviceaccount:kube-system:ebs-csi-controller-sa"]
    assert statement["Principal"]["Federated"].startswith("arn:aws:iam::")
    attachments = [a for a in each.all("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                   if a.name.startswith("block-storage-ebs-csi")]
    assert [a.inputs["policyArn"] for a in attachments] == [
        "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]


def test_storage_class_encrypts_and_binds_where_the_pod_lands(each: Any) -> None:
    storage_class = each.one(STORAGE_CLASS).inputs
    assert storage_class["provisioner"] == "ebs.csi.aws.com"
    assert storage_class["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
