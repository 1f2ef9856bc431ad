"""The front door as the stack registers it (offline, Pulumi's mocks): refusals at preview, the NLB
Service, the Load Balancer Controller and its published policy, what the Ray pods mount, and the
outputs: nothing secret in them, no key anywhere but the encrypted config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from components.config.front_door import ADD_A_KEY
from components.manifests.ray_service import ray_pod_labels
from facts.charts import AWS_LOAD_BALANCER_CONTROLLER
from front_door.keys import KeyTable
from offline import run_offline, try_run_offline
from serve_app.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CHART_DATA = REPO / "tests" / "data" / "aws-load-balancer-controller-3.5.0"
KEYS = {"app-team": "x7" * 20, "batch": "q9" * 20}
SERVICE = "kubernetes:core/v1:Service"
SECRET = "kubernetes:core/v1:Secret"


@pytest.fixture(scope="module")
def keyed():
    return run_offline("dev", secrets={"apiKeys": json.dumps(KEYS)},
                       overrides={"apiKeyLimits": json.dumps({"batch": {"tokensPerMinute": 5000}})})


def one(run, type_: str, name: str):
    [found] = [r for r in run.resources if r.type == type_ and r.name == name]
    return found


@pytest.mark.parametrize(("key", "value", "named", "says"), [
    ("frontDoor", "internet-facing", "frontDoorAllowedCidrs", "needs an explicit list of callers"),
    ("apiKeyRequestsPerMinute", "0", "apiKeyRequestsPerMinute", "≥ 1"),
    ("apiKeyTokensPerMinute", "0", "apiKeyTokensPerMinute", "≥ 1"),
    ("apiKeyLimits", '{"app-team": {"requestsPerMinute": 0}}', "apiKeyLimits", "0 would refuse every request"),
    ("frontDoorCertificateArn", "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
     "frontDoorCertificateArn", "an ACM certificate of us-west-2"),
    ("frontDoorAllowedCidrs", '["10.0.0.0/33"]', "frontDoorAllowedCidrs", "not an IPv4 CIDR"),
    ("frontDoorCertificateArn", "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab",
     "frontDoorHostname", "not the load balancer's elb.amazonaws.com one"),
    ("frontDoorHostname", "llm_team.example", "frontDoorHostname", "the DNS name clients call"),
])
def test_a_door_setting_that_cannot_work_is_refused_before_any_resource(key, value, named, says):
    run = try_run_offline("dev", overrides={key: value})
    assert isinstance(run.error, ConfigError)
    message = str(run.error)
    assert message.startswith(f"{named}:") and says in message and "\n" not in message
    assert [r.type for r in run.resources] == ["pulumi:pulumi:Stack"]


def test_a_short_key_is_refused_without_echoing_it():
    with pytest.raises(ConfigError) as refused:
        run_offline("dev", secrets={"apiKeys": json.dumps({"app-team": "short-key"})})
    assert "shorter than 32" in str(refused.value) and "short-key" not in str(refused.value)


def test_the_door_is_internal_and_open_to_the_vpc_only_by_default(keyed):
    service = one(keyed, SERVICE, "front-door-service")
    annotations = service.inputs["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    spec = service.inputs["spec"]
    assert spec["type"] == "LoadBalancer" and spec["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert spec["loadBalancerSourceRanges"] == ["10.0.0.0/16"]
    assert spec["ports"] == [{"name": "http", "port": 80, "targetPort": 8000, "protocol": "TCP"}]
    # The pods KubeRay marks as serving, of this RayService only.
    assert spec["selector"] == {"ray.io/serve": "true", **ray_pod_labels("ray-llm")}


def test_a_public_door_with_cidrs_and_a_certificate_serves_tls_to_those_cidrs_only():
    arn = "arn:aws:acm:us-west-2:123456789012:certificate/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab"
    run = run_offline("dev", overrides={"frontDoor": "internet-facing", "frontDoorAllowedCidrs": '["198.51.100.0/24"]',
                                        "frontDoorCertificateArn": arn, "frontDoorHostname": "LLM.example.com"})
    service = one(run, SERVICE, "front-door-service")
    annotations = service.inputs["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == arn
    assert service.inputs["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    assert service.inputs["spec"]["ports"][0]["port"] == 443
    # Clients call the name the certificate covers, never the load balancer's own, which no certificate covers;
    # the output says where that name must point, and the preview says the NLB → pod hop is plain HTTP.
    assert run.outputs["endpointUrl"] == "https://llm.example.com:443/v1"
    assert run.outputs["loadBalancerHostname"].endswith(".elb.us-west-2.amazonaws.com")
    assert any("point it at the loadBalancerHostname output" in info for info in run.infos)
    assert any("TLS ends at the load balancer" in info for info in run.infos)


def test_no_door_is_the_stack_as_before():
    run = run_offline("dev", overrides={"frontDoor": "none"})
    assert not [r for r in run.resources if "front-door" in r.name]
    app = yaml.safe_load(one(run, "kubernetes:ray.io/v1:RayService",
                             "inference-rayservice").inputs["spec"]["serveConfigV2"])["applications"][0]
    assert "ingress_cls_config" not in app["args"]
    assert run.outputs["clientConfig"]["base_url"] == "http://localhost:8000/v1"


def test_a_door_without_a_key_says_at_preview_that_it_refuses_every_request_and_how_to_add_one(keyed):
    run = run_offline("dev")  # the shipped dev stack: no key yet
    [note] = [info for info in run.infos if "no apiKeys" in info]
    assert "refuses every request (401)" in note and ADD_A_KEY in note
    assert any("unencrypted" in info for info in run.infos)
    assert not run.warnings  # info, as `pulumi preview` lists it: `pdctl plan --strict` passes
    assert not [info for info in keyed.infos if "no apiKeys" in info]


def test_the_controller_runs_the_pinned_chart_with_awss_published_policy_on_its_own_identity(keyed):
    release = one(keyed, "kubernetes:helm.sh/v3:Release", "front-door-controller")
    assert release.inputs["chart"] == "aws-load-balancer-controller"
    assert release.inputs["version"] == AWS_LOAD_BALANCER_CONTROLLER.default_version
    assert yaml.safe_load((CHART_DATA / "Chart.yaml").read_text())["version"] == release.inputs["version"]
    # The published policy, as the bootstrap made it for this cluster (bootstrap/deploy_permissions/).
    policy = one(keyed, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "front-door-controller-policy")
    assert policy.inputs["policyArn"].endswith(":policy/eks-pd-llm/ray-llm-multinode-load-balancer-controller")
    trust = json.loads(one(keyed, "aws:iam/role:Role", "front-door-controller-role").inputs["assumeRolePolicy"])
    [condition] = [s["Condition"]["StringEquals"] for s in trust["Statement"]]
    assert "system:serviceaccount:kube-system:aws-load-balancer-controller" in condition.values()
    values = release.inputs["values"]
    assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]


def test_the_controllers_service_webhook_cannot_block_the_clusters_other_services(keyed):
    """Chart 3.5.0's mservice.elbv2.k8s.aws webhook takes every Service of the cluster and fails closed
    (failurePolicy Fail): with its one replica not Ready, KubeRay's and Prometheus' atomic releases could
    create no Service. Off; the door's Service names the controller's class itself, which is all it set."""
    chart_values = yaml.safe_load((CHART_DATA / "values.yaml").read_text())
    assert chart_values["enableServiceMutatorWebhook"] is True  # the chart's default: on, for every Service
    assert chart_values["serviceMutatorWebhookConfig"]["failurePolicy"] == "Fail"
    assert chart_values["serviceMutatorWebhookConfig"]["objectSelector"]["matchLabels"] == {}
    values = one(keyed, "kubernetes:helm.sh/v3:Release", "front-door-controller").inputs["values"]
    assert values["enableServiceMutatorWebhook"] is False
    assert one(keyed, SERVICE, "front-door-service").inputs["spec"]["loadBalancerClass"] == "service.k8s.aws/nlb"


def test_the_door_service_waits_for_the_rayservice_not_only_for_the_controller(keyed):
    """Pulumi waits at most 10 minutes for a Service's endpoints; the Serve proxies exist only once the
    RayService is Ready (a first model load takes longer), so the Service is created after it."""
    service = one(keyed, SERVICE, "front-door-service")
    assert keyed.depends_on(service, one(keyed, "kubernetes:ray.io/v1:RayService", "inference-rayservice"))
    assert keyed.depends_on(service, one(keyed, "kubernetes:helm.sh/v3:Release", "front-door-controller"))
    # The controller itself installs beside the RayService, not after it.
    assert not keyed.depends_on(one(keyed, "kubernetes:helm.sh/v3:Release", "front-door-controller"),
                                one(keyed, "kubernetes:ray.io/v1:RayService", "inference-rayservice"))


def test_every_controller_value_the_stack_sets_is_a_key_of_the_charts_values():
    chart_values = yaml.safe_load((CHART_DATA / "values.yaml").read_text())
    for path in AWS_LOAD_BALANCER_CONTROLLER.values_keys:
        node = chart_values
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, path
            node = node[part]


def test_the_ray_pods_mount_the_key_table_and_the_door_code_and_import_it(keyed):
    service = one(keyed, "kubernetes:ray.io/v1:RayService", "inference-rayservice")
    cluster = service.inputs["spec"]["rayClusterConfig"]
    app = yaml.safe_load(service.inputs["spec"]["serveConfigV2"])["applications"][0]
    ingress = app["args"]["ingress_cls_config"]
    assert ingress["ingress_cls"] == "front_door.ingress:KeyedOpenAiIngress"
    keys_file = ingress["ingress_extra_kwargs"]["keys_file"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        pod = group["template"]["spec"]
        [container] = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert keys_file.rsplit("/", 1)[0] in mounts
        assert {"name": "PYTHONPATH", "value": "/opt/eks-pd-llm"} in container["env"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts[keys_file.rsplit("/", 1)[0]]]["secret"]["secretName"] == "ray-llm-api-keys"
        assert not any("subPath" in m for m in container["volumeMounts"] if m["name"] in volumes)
    code = one(keyed, "kubernetes:core/v1:ConfigMap", "inference-front-door")
    assert set(code.inputs["data"]) == {"__init__.py", "keys.py", "ingress.py", "engine.py"}
    assert code.inputs["data"]["ingress.py"] == (REPO / "front_door" / "ingress.py").read_text()


def test_the_cluster_gets_salted_hashes_as_a_secret_and_no_key_appears_anywhere(keyed):
    secret = one(keyed, SECRET, "inference-api-keys")
    assert "stringData" in secret.secret_paths or any(p.startswith("stringData") for p in secret.secret_paths)
    table = KeyTable.from_document(secret.inputs["stringData"]["keys.json"])
    assert table.lookup(KEYS["app-team"]).name == "app-team"
    assert table.lookup(KEYS["batch"]).limits.tokens_per_minute == 5000
    everything = json.dumps([r.inputs for r in keyed.resources], default=str) + json.dumps(keyed.outputs, default=str)
    assert not any(key in everything for key in KEYS.values())


def test_outputs_say_where_the_key_is_and_nothing_secret(keyed):
    out = keyed.outputs
    assert keyed.secret_outputs == {"kubeconfig"}
    client = out["clientConfig"]
    assert set(client) == {"base_url", "model", "api_key_source"}
    assert client["base_url"] == out["endpointUrl"]
    assert out["endpointUrl"].startswith("http://") and ".elb.us-west-2.amazonaws.com:80/v1" in out["endpointUrl"]
    assert client["model"] == out["modelId"]
    assert "pulumi config get apiKeys --stack dev" in client["api_key_source"]
    assert out["apiKeyNames"] == ["app-team", "batch"]
    assert "inference/ray-llm-api-keys" in out["apiKeySecret"]
    hashes = json.loads(one(keyed, SECRET, "inference-api-keys").inputs["stringData"]["keys.json"])["keys"]
    assert not any(digest in json.dumps(out, default=str) for digest in hashes)


def test_keys_in_plain_text_are_refused_naming_the_secret_way():
    run = try_run_offline("dev", overrides={"apiKeys": json.dumps(KEYS)})
    assert isinstance(run.error, ConfigError) and run.error.setting == "apiKeys"
    assert "pulumi config set --secret apiKeys" in str(run.error)
    assert not any(key in str(run.error) for key in KEYS.values())
