"""Head fault tolerance: the GCS store the stack creates (components/gcs_store.py) and how the
RayService points KubeRay at it. The RayService is checked against the KubeRay 1.7.0 CRD and against
the rules KubeRay's webhook-less validation applies (controllers/ray/utils/validation.go); the AWS
side through the program's offline run."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.gcs_store import AUTH_TOKEN_BYTES, NODE_COUNT, PORT
from components.inference import GcsStoreConnection, InferenceService, InferenceServiceArgs
from components.manifests.ray_service import GcsStoreRef, SecretKeyRef, ray_service_manifest

RAY_SERVICE = "kubernetes:ray.io/v1:RayService"
REPLICATION_GROUP = "aws:elasticache/replicationGroup:ReplicationGroup"
SUBNET_GROUP = "aws:elasticache/subnetGroup:SubnetGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SECRET = "kubernetes:core/v1:Secret"
STORE = GcsStoreRef("rediss://master.gcs.example.cache.amazonaws.com:6379",
                    SecretKeyRef("ray-llm-gcs-store", "password"))


def head_container(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]


@pytest.fixture(scope="module")
def manifest(settings_for: Any) -> dict[str, Any]:
    return ray_service_manifest(settings_for("prod").serving, gcs_store=STORE)


def test_the_rayservice_names_the_store_and_its_secret_in_gcs_fault_tolerance_options(manifest):
    assert manifest["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"] == {
        "redisAddress": STORE.address,
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "ray-llm-gcs-store", "key": "password"}}},
    }


def test_with_the_store_the_rayservice_matches_the_kuberay_crd(ray_service_crd_validator, manifest):
    assert [e.message for e in ray_service_crd_validator.iter_errors(manifest)] == []


@pytest.mark.parametrize("field", ["redisAdress", "password"])
def test_the_crd_refuses_a_misspelled_fault_tolerance_option(ray_service_crd_validator, manifest, field):
    broken = copy.deepcopy(manifest)
    broken["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"][field] = "x"
    assert list(ray_service_crd_validator.iter_errors(broken))


def test_the_head_follows_kuberays_rules_for_gcs_fault_tolerance(manifest):
    """KubeRay 1.7.0 refuses a RayCluster that also sets these itself (utils/validation.go)."""
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]
    env = {e["name"] for e in head_container(manifest)["env"]}
    assert not env & {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD", "REDIS_USERNAME"}
    assert not {"redis-password", "redis-username"} & set(head["rayStartParams"])
    assert "ray.io/ft-enabled" not in manifest["metadata"]["annotations"]


def test_the_head_checks_the_stores_certificate_only_when_there_is_a_store(settings_for, manifest):
    ca_bundle = {"name": "RAY_REDIS_CA_CERT", "value": "/etc/ssl/certs/ca-certificates.crt"}
    assert ca_bundle in head_container(manifest)["env"]
    without = ray_service_manifest(settings_for("dev").serving)
    assert "gcsFaultToleranceOptions" not in without["spec"]["rayClusterConfig"]
    assert "RAY_REDIS_CA_CERT" not in {e["name"] for e in head_container(without)["env"]}


def test_the_component_refuses_a_store_the_settings_do_not_ask_for(settings_for):
    with pytest.raises(ValueError, match="gcs_store"):
        InferenceService("inference", InferenceServiceArgs(
            provider=None, serving=settings_for("dev").serving, gcs_store=GcsStoreConnection("rediss://x:6379", "t")))
    with pytest.raises(ValueError, match="gcs_store"):
        InferenceService("inference", InferenceServiceArgs(provider=None, serving=settings_for("prod").serving))


# ── The AWS side: prod turns it on ─────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def prod(offline_run):
    return offline_run("prod")


def test_prod_turns_gcs_fault_tolerance_on_and_dev_does_not(offline_run, prod):
    assert prod.program["settings"].serving.gcs_fault_tolerance
    dev = offline_run("dev")
    assert not dev.program["settings"].serving.gcs_fault_tolerance
    assert not [r for r in dev.resources if r.type in (REPLICATION_GROUP, SUBNET_GROUP) or "gcs" in r.name]


def test_the_store_is_encrypted_authenticated_and_survives_an_az(prod):
    group = prod.one(REPLICATION_GROUP)
    inputs = group.inputs
    assert inputs["engine"] == "redis"
    assert inputs["numCacheClusters"] == NODE_COUNT == 2
    assert inputs["automaticFailoverEnabled"] is True and inputs["multiAzEnabled"] is True
    assert inputs["atRestEncryptionEnabled"] is True
    assert inputs["transitEncryptionEnabled"] is True and inputs["transitEncryptionMode"] == "required"
    assert inputs["port"] == PORT
    # The token is a secret, generated once and then kept (every run generates a candidate).
    assert "authToken" in group.secret_paths and "authToken" in group.additional_secret_outputs
    assert group.ignore_changes == ("authToken",)
    assert len(inputs["authToken"]) == 64 == AUTH_TOKEN_BYTES * 4 // 3
    assert not set(inputs["authToken"]) & set('@"/ ')


def mock_id(prefix: str, resource_type: str, name: str) -> str:
    """The id offline.mock_cloud gives an EC2 resource (what other resources refer to)."""
    from offline.mock_cloud import _digest

    return f"{prefix}-{_digest(resource_type, name)}"


def test_the_store_lives_in_the_private_subnets(prod):
    subnets = prod.all("aws:ec2/subnet:Subnet")
    private = {mock_id("subnet", s.type, s.name) for s in subnets if "-private-" in s.name}
    subnet_group = prod.one(SUBNET_GROUP)
    assert set(subnet_group.inputs["subnetIds"]) == private and len(private) == 3
    assert prod.depends_on(prod.one(REPLICATION_GROUP), subnet_group)


def test_only_the_ray_head_nodes_reach_the_store_and_only_on_redis(prod):
    store, clients = (mock_id("sg", SECURITY_GROUP, f"gcs-store-{n}") for n in ("store", "clients"))
    assert prod.one(REPLICATION_GROUP).inputs["securityGroupIds"] == [store]
    rules = [r for r in prod.all(INGRESS) if r.inputs["securityGroupId"] == store]
    assert [(r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
            for r in rules] == [("tcp", PORT, PORT, clients)]
    assert not [r for r in prod.all("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
                if r.inputs["securityGroupId"] == store]
    from offline.mock_cloud import _digest
    # A launch template that names security groups gets no others from EKS: the cluster's is named too.
    cluster_group = f"sg-{_digest('cluster', prod.one('eks:index:Cluster').inputs['name'])}"
    templates = {t.name: t.inputs for t in prod.all(LAUNCH_TEMPLATE)}
    assert templates["system-nodes-lt"]["vpcSecurityGroupIds"] == [cluster_group, clients]
    assert clients not in json.dumps(templates["gpu-nodes-lt"])


def test_dev_system_nodes_keep_only_the_security_group_eks_gives_them(offline_run):
    [system] = [t for t in offline_run("dev").all(LAUNCH_TEMPLATE) if t.name == "system-nodes-lt"]
    assert "vpcSecurityGroupIds" not in system.inputs


def test_the_rayservice_reaches_the_store_over_tls_with_the_token_from_a_secret(prod):
    group = prod.one(REPLICATION_GROUP)
    secret = prod.one(SECRET, "inference-gcs-store")
    assert secret.inputs["metadata"] == {"name": "ray-llm-gcs-store", "namespace": "inference"}
    assert secret.inputs["stringData"] == {"password": group.inputs["authToken"]}
    assert "stringData" in secret.secret_paths
    ray_service = prod.one(RAY_SERVICE)
    options = ray_service.inputs["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]
    address = options["redisAddress"]
    assert address.startswith(f"rediss://master.{group.name}-") and address.endswith(":6379")
    assert options["redisPassword"]["valueFrom"]["secretKeyRef"] == {"name": "ray-llm-gcs-store", "key": "password"}
    assert prod.depends_on(ray_service, secret) and prod.depends_on(ray_service, group)
