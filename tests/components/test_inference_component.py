"""The add-on and serving components as the Pulumi engine receives them (mocks, preview=False).

The components run alone here (`offline.run_components`), on a mocked Kubernetes provider, fed the
dev stack's validated settings, with a monitor that records what each registration carries: inputs
(camelCase, as the engine gets them), parent, provider, dependencies, and the replace/timeout options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pytest
import yaml

from components.manifests import helm_values
from components.manifests.ray_service import ray_service_manifest
from components.manifests.serving_namespace import serving_network_policies
from front_door.keys import key_table_document
from offline import OfflineRun, run_components
from serve_app.config import PDAppConfig
from serve_app.errors import ConfigError
from serve_app.render import serve_config_v2

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
SECRET = "kubernetes:core/v1:Secret"
HF_SECRET = "inference-hf-token"
RAY_SERVICE = "kubernetes:ray.io/v1:RayService"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NODE_GROUP = "eks:index:ManagedNodeGroup"
TOKEN = "hf_not_a_real_token_0123456789"


def components_of(serving: Any, hf_token: str | None) -> Callable[[], Any]:
    """Register the provider, both add-on components and InferenceService the way build_stack does."""

    def register() -> Any:
        import pulumi_kubernetes as k8s

        from components.addons import GpuDevicePlugins, GpuDevicePluginsArgs, KubeRayOperator, KubeRayOperatorArgs
        from components.inference import InferenceService, InferenceServiceArgs

        provider = k8s.Provider("k8s", kubeconfig="{}")
        # Stand-ins for the node groups (NODE_GROUP); only their place in the graph matters here.
        system_nodes = pulumi.CustomResource(NODE_GROUP, "system-nodes", {})
        gpu_nodes = pulumi.CustomResource(NODE_GROUP, "gpu-nodes", {})
        plugins = GpuDevicePlugins("gpu-plugins", GpuDevicePluginsArgs(provider=provider),
                                   pulumi.ResourceOptions(depends_on=[gpu_nodes]))
        kuberay = KubeRayOperator("kuberay", KubeRayOperatorArgs(provider=provider),
                                  pulumi.ResourceOptions(depends_on=[system_nodes]))
        token = pulumi.Output.secret(hf_token) if hf_token is not None else None
        return InferenceService(
            "inference", InferenceServiceArgs(
                provider=provider, serving=serving, hf_token=token,
                # The front door's key table (a table of no key: every request refused) when the ingress checks keys.
                api_key_table=key_table_document("salt", {}, {}) if serving.app.config.ingress.api_keys else None),
            pulumi.ResourceOptions(depends_on=[kuberay, plugins, gpu_nodes]))

    return register


def urn_of(run: OfflineRun, name: str, type_: str | None = None) -> str:
    (found,) = [r.urn for r in run.resources if r.name == name and type_ in (None, r.type)]
    return found


@pytest.fixture(scope="module")
def run(settings_for: Any) -> OfflineRun:
    result = run_components(components_of(settings_for(hfToken=TOKEN).serving, TOKEN))
    assert result.error is None
    return result


# ── Helm releases ─────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("chart", "version", "repo", "namespace"), [
    ("nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin", "kube-system"),
    ("aws-efa-k8s-device-plugin", "v0.5.30", "https://aws.github.io/eks-charts", "kube-system"),
    ("kuberay-operator", "1.7.0", "https://ray-project.github.io/kuberay-helm/", "kuberay-system"),
])
def test_helm_releases_are_pinned_from_their_repositories(run: OfflineRun, chart: str, version: str, repo: str,
                                                          namespace: str) -> None:
    (release,) = [r for r in run.all(HELM_RELEASE) if r.inputs["chart"] == chart]
    assert release.inputs["version"] == version
    assert release.inputs["repositoryOpts"] == {"repo": repo}
    assert release.inputs["namespace"] == namespace
    assert release.inputs["name"] == chart
    assert release.inputs["atomic"] is True
    assert release.inputs["timeout"] == 600


def test_every_kubernetes_object_goes_through_the_explicit_provider(run: OfflineRun) -> None:
    provider_urn = urn_of(run, "k8s", "pulumi:providers:kubernetes")
    for resource in run.registered:
        if (resource.custom and resource.type.startswith("kubernetes:")
                and resource.type != "pulumi:providers:kubernetes"):
            assert resource.provider.startswith(provider_urn), resource.name


def test_helm_values_reach_the_engine_as_built(run: OfflineRun) -> None:
    by_chart = {r.inputs["chart"]: r.inputs["values"] for r in run.all(HELM_RELEASE)}
    assert by_chart["nvidia-device-plugin"] == helm_values.nvidia_device_plugin_values()
    assert by_chart["aws-efa-k8s-device-plugin"] == helm_values.efa_device_plugin_values()
    assert by_chart["kuberay-operator"] == {"nodeSelector": {"role": "system"}}


def test_kuberay_installs_into_its_restricted_namespace_after_creating_it(run: OfflineRun) -> None:
    namespace = run.one(NAMESPACE, "kuberay-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    release = next(r for r in run.all(HELM_RELEASE) if r.inputs["chart"] == "kuberay-operator")
    assert namespace.urn in release.dependencies
    assert "createNamespace" not in release.inputs


def test_releases_wait_for_the_nodes_they_schedule_on(run: OfflineRun) -> None:
    gpu_nodes, system_nodes = urn_of(run, "gpu-nodes"), urn_of(run, "system-nodes")
    by_chart = {r.inputs["chart"]: r for r in run.all(HELM_RELEASE)}
    assert gpu_nodes in by_chart["nvidia-device-plugin"].dependencies
    assert gpu_nodes in by_chart["aws-efa-k8s-device-plugin"].dependencies
    assert system_nodes in by_chart["kuberay-operator"].dependencies


def test_children_are_parented_to_their_components(run: OfflineRun) -> None:
    component_of = {r.name: r.urn for r in run.registered if not r.custom}
    plugins = [r for r in run.all(HELM_RELEASE) if r.name.startswith("gpu-plugins")]
    assert len(plugins) == 2 and all(r.parent == component_of["gpu-plugins"] for r in plugins)
    for name in ("inference-namespace", "inference-hf-token", "inference-rayservice"):
        assert next(r for r in run.registered if r.name == name).parent == component_of["inference"]
    assert all(r.parent == component_of["inference"] for r in run.all(NETWORK_POLICY))


# ── Network policies ──────────────────────────────────────────────────────────────────────────

def test_network_policies_reach_the_engine_as_built_in_the_serving_namespace(
        run: OfflineRun, settings_for: Any) -> None:
    expected = serving_network_policies(settings_for(hfToken=TOKEN).serving)
    registered = {r.name: r for r in run.all(NETWORK_POLICY)}
    assert set(registered) == {f"inference-netpol-{role}" for role in expected}
    namespace = urn_of(run, "inference-namespace", NAMESPACE)
    for role, body in expected.items():
        policy = registered[f"inference-netpol-{role}"]
        assert policy.inputs["metadata"] == body["metadata"]
        assert policy.inputs["spec"] == body["spec"]  # ports arrive as floats, and 8000.0 == 8000
        assert namespace in policy.dependencies, role


def test_rayservice_starts_only_behind_its_network_policies(run: OfflineRun) -> None:
    ray_service = run.one(RAY_SERVICE)
    policies = run.all(NETWORK_POLICY)
    assert len(policies) == 5
    assert all(policy.urn in ray_service.dependencies for policy in policies)
    # The policies select the pods the RayService's templates make.
    selector = next(p for p in policies if p.name == "inference-netpol-ray-internal").inputs["spec"]["podSelector"]
    cluster = ray_service.inputs["spec"]["rayClusterConfig"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert selector["matchLabels"].items() <= group["template"]["metadata"]["labels"].items()


# ── Serving namespace and Secret ──────────────────────────────────────────────────────────────

def test_only_the_serving_namespace_admits_privileged_pods(run: OfflineRun) -> None:
    privileged = [r.inputs["metadata"]["name"] for r in run.all(NAMESPACE)
                  if r.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"]
    assert privileged == ["inference"]


def test_hf_token_secret_holds_the_token_as_a_secret_in_the_serving_namespace(run: OfflineRun) -> None:
    secret = run.one(SECRET, HF_SECRET)
    assert secret.inputs["metadata"] == {"name": "hf-token", "namespace": "inference"}
    # The engine receives the token marked secret (so state stores it encrypted), outputs too.
    assert secret.inputs["stringData"] == {"token": TOKEN}
    assert "stringData" in secret.secret_paths
    assert {"data", "stringData"} <= set(secret.additional_secret_outputs)
    assert urn_of(run, "inference-namespace") in secret.dependencies


def test_the_token_value_never_appears_in_the_rayservice(run: OfflineRun) -> None:
    ray_service = run.one(RAY_SERVICE)
    assert TOKEN not in yaml.safe_dump(ray_service.inputs)
    workers = ray_service.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    volumes = {v["name"]: v for v in workers["template"]["spec"]["volumes"]}
    assert volumes["hf-token"]["secret"]["secretName"] == run.one(SECRET, HF_SECRET).inputs["metadata"]["name"]


# ── RayService ────────────────────────────────────────────────────────────────────────────────

def test_rayservice_spec_reaches_the_engine_unchanged(run: OfflineRun, settings_for: Any) -> None:
    ray_service = run.one(RAY_SERVICE)
    expected = ray_service_manifest(settings_for(hfToken=TOKEN).serving)
    assert ray_service.inputs["apiVersion"] == "ray.io/v1" and ray_service.inputs["kind"] == "RayService"
    # Keys such as "num-gpus" or "rayStartParams" must not be re-cased on the way; ints arrive as floats.
    assert ray_service.inputs["spec"] == yaml.safe_load(yaml.safe_dump(expected["spec"]))
    ingress = settings_for().serving.app.config.ingress  # the front door's keyed ingress (docs/FRONT_DOOR.md)
    # Each engine's KV cache fixed at the restart's size the plan computes (serve_app/capacity.py).
    assert yaml.safe_load(ray_service.inputs["spec"]["serveConfigV2"]) == serve_config_v2(
        PDAppConfig(ingress=ingress), {"prefill": 2_831_994_061, "decode": 2_831_994_061})
    assert ray_service.inputs["metadata"]["name"] == "ray-llm"
    assert ray_service.inputs["metadata"]["namespace"] == "inference"


def test_rayservice_reference_numbers_for_g6_8xlarge(run: OfflineRun) -> None:
    cluster = run.one(RAY_SERVICE).inputs["spec"]["rayClusterConfig"]
    # The reference's two GPU workers, now one fixed group per phase: prefill's pod and decode's pod.
    assert [(g["groupName"], g["replicas"], g["minReplicas"], g["maxReplicas"])
            for g in cluster["workerGroupSpecs"]] == [("prefill-workers", 1, 1, 1), ("decode-workers", 1, 1, 1)]
    workers = cluster["workerGroupSpecs"][0]
    limits = workers["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "30", "memory": "112Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1",
                      "hugepages-2Mi": "5120Mi"}
    env = {e["name"]: e for e in workers["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_SSM_CONV_STATE_LAYOUT"]["value"] == "DS"  # Qwen3.5 is hybrid (facts/models.py)
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"


def test_rayservice_waits_for_kuberay_device_plugins_namespace_and_secret(run: OfflineRun) -> None:
    ray_service = run.one(RAY_SERVICE)
    must_precede = [(NAMESPACE, "inference-namespace"), (SECRET, "inference-hf-token"), (HELM_RELEASE, "kuberay"),
                    (HELM_RELEASE, "gpu-plugins-nvidia"), (HELM_RELEASE, "gpu-plugins-efa"), (NODE_GROUP, "gpu-nodes")]
    for type_, name in must_precede:
        assert urn_of(run, name, type_) in ray_service.dependencies, name


def test_pulumi_up_waits_for_ready_a_little_longer_than_kuberay(run: OfflineRun) -> None:
    ray_service = run.one(RAY_SERVICE)
    assert ray_service.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    assert ray_service.inputs["metadata"]["annotations"]["ray.io/initializing-timeout"] == "30m"
    # 30 min KubeRay timeout + 10 min margin.
    assert ray_service.custom_timeouts.create == "2400s"


def test_cluster_spec_changes_replace_the_rayservice_under_upgrade_strategy_none(run: OfflineRun) -> None:
    ray_service = run.one(RAY_SERVICE)
    assert ray_service.inputs["spec"]["upgradeStrategy"] == {"type": "None"}
    assert ray_service.replace_on_changes == ("spec.rayClusterConfig",)
    assert ray_service.delete_before_replace is True


def test_component_attributes_for_stack_outputs(run: OfflineRun) -> None:
    service = run.program["result"]
    assert (service.namespace, service.ray_service_name, service.serve_service_name, service.serve_port) == (
        "inference", "ray-llm", "ray-llm-serve-svc", 8000)


# ── Other configurations ──────────────────────────────────────────────────────────────────────

def test_without_a_token_there_is_no_secret_and_no_token_env(settings_for: Any) -> None:
    result = run_components(components_of(settings_for().serving, None))
    assert result.error is None
    assert [s.name for s in result.all(SECRET)] == ["inference-api-keys"]  # the front door's, no token
    assert "hf-token" not in yaml.safe_dump(result.one(RAY_SERVICE).inputs)


def test_new_cluster_strategy_is_left_to_kuberay(settings_for: Any) -> None:
    serving = settings_for(upgradeStrategy="NewCluster", gpuNodeMaxCount="4").serving
    result = run_components(components_of(serving, None))
    ray_service = result.one(RAY_SERVICE)
    assert ray_service.inputs["spec"]["upgradeStrategy"] == {"type": "NewCluster"}
    assert ray_service.replace_on_changes == ()


# ── The real program (__main__.py) for the dev and prod stacks, through offline ──────────

@pytest.fixture(scope="module")
def dev() -> Any:
    from offline import run_offline

    return run_offline("dev", secrets={"hfToken": TOKEN})


@pytest.fixture(scope="module")
def prod() -> Any:
    from offline import run_offline

    return run_offline("prod")


def _release(offline: Any, chart: str) -> Any:
    (found,) = [r for r in offline.all(HELM_RELEASE) if r.inputs["chart"] == chart]
    return found


def test_dev_orders_addons_and_rayservice_after_the_nodes_they_need(dev: Any) -> None:
    gpu_nodes = dev.one("eks:index:ManagedNodeGroup", "gpu-nodes")
    system_nodes = dev.one("eks:index:ManagedNodeGroup", "system-nodes")
    ray_service = dev.one(RAY_SERVICE)
    for chart in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        assert dev.depends_on(_release(dev, chart), gpu_nodes), chart
    assert dev.depends_on(_release(dev, "kuberay-operator"), system_nodes)
    for prerequisite in (_release(dev, "kuberay-operator"), gpu_nodes,
                         dev.one("kubernetes:apps/v1:DaemonSet", "ray-image-prepull"),
                         dev.one("kubernetes:apps/v1:DaemonSet", "ray-image-prepull-system"),
                         dev.one(SECRET, HF_SECRET)):
        assert dev.depends_on(ray_service, prerequisite), prerequisite.name
    # The plugins' Helm wait proves them on the GPU nodes; the RayService's pods wait for the GPUs they advertise
    # themselves, so the RayService is created beside that wait, not after it (docs/PLAN.md#cold-start).
    for chart in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        assert not dev.depends_on(ray_service, _release(dev, chart)), chart


def test_dev_closes_the_ray_ports_before_the_rayservice_and_enforces_it(dev: Any) -> None:
    namespace = dev.one(NAMESPACE, "inference-namespace")
    ray_service = dev.one(RAY_SERVICE)
    policies = {r.inputs["metadata"]["name"]: r for r in dev.all(NETWORK_POLICY)}
    assert set(policies) == {"default-deny-ingress", "ray-llm-ray-internal", "ray-llm-serve",
                             "ray-llm-kuberay-operator", "ray-llm-metrics-scraper"}
    for policy in policies.values():
        assert policy.inputs["metadata"]["namespace"] == "inference"
        assert dev.depends_on(policy, namespace) and dev.depends_on(ray_service, policy)
    # Without the VPC CNI's network policy agent the objects above would be accepted and ignored.
    assert dev.one("eks:index:Cluster").inputs["vpcCniOptions"]["enableNetworkPolicy"] is True


def test_dev_kubernetes_objects_use_the_clusters_provider(dev: Any) -> None:
    provider = dev.one("pulumi:providers:kubernetes")
    for resource in dev.resources:
        if resource.custom and resource.type.startswith("kubernetes:"):
            assert resource.provider.startswith(provider.urn), resource.name


def test_dev_rayservice_is_the_reference_deployment(dev: Any) -> None:
    body = dev.one(RAY_SERVICE).inputs
    assert body["metadata"]["name"] == "ray-llm" and body["metadata"]["namespace"] == "inference"
    cluster = body["spec"]["rayClusterConfig"]
    assert cluster["rayVersion"] == "2.58.0"
    head, workers = cluster["headGroupSpec"], cluster["workerGroupSpecs"][0]
    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0"
    assert head["template"]["spec"]["containers"][0]["image"] == image
    assert workers["template"]["spec"]["containers"][0]["image"] == image
    assert sum(group["replicas"] for group in cluster["workerGroupSpecs"]) == 2
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "30", "memory": "112Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1", "hugepages-2Mi": "5120Mi"}
    apps = yaml.safe_load(body["spec"]["serveConfigV2"])["applications"]
    assert apps[0]["import_path"] == "ray.serve.llm:build_pd_openai_app"
    volumes = {v["name"]: v for v in workers["template"]["spec"]["volumes"]}
    assert volumes["hf-token"]["secret"]["secretName"] == dev.one(SECRET, HF_SECRET).inputs["metadata"]["name"]
    assert TOKEN not in yaml.safe_dump(body)


def test_dev_only_the_serving_namespace_is_privileged(dev: Any) -> None:
    levels = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
              for r in dev.all(NAMESPACE)}
    assert levels == {"inference": "privileged", "kuberay-system": "restricted", "monitoring": "baseline"}


def test_prod_waits_longer_for_the_first_start(prod: Any) -> None:
    ray_service = prod.one(RAY_SERVICE)
    assert ray_service.inputs["metadata"]["annotations"]["ray.io/initializing-timeout"] == "45m"
    # No hfToken in the prod stack file: the Secrets are the door's key hashes and the GCS store's token
    # (registered concurrently, so in either order).
    assert sorted(s.name for s in prod.all(SECRET)) == ["inference-api-keys", "inference-gcs-store"]


@pytest.mark.parametrize(("key", "value"), [
    ("rayServiceName", "r" * 48),
    ("initializingTimeout", "90s"),
    ("upgradeStrategy", "NewClusterWithIncrementalUpgrade"),
    ("namespace", "kuberay-system"),
])
def test_dev_with_a_bad_serving_setting_registers_nothing(key: str, value: str) -> None:
    from offline import try_run_offline

    failed = try_run_offline("dev", overrides={key: value})
    assert isinstance(failed.error, ConfigError) and failed.error.setting == key
    assert failed.registered == []
