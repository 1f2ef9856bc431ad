"""The Kubernetes objects the cluster receives, checked as data (no Pulumi).

Numbers come from the reference deployment (docs/SOURCES.md#reference-deployment) or are computed by
hand in the test next to the assertion. The objects are built from the dev stack's settings (the
`settings_for` fixture) as the program builds them; the RayService body is also validated against the
KubeRay 1.7.0 CRD schema.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.nodes import GpuNodeSettings
from components.manifests import helm_values, serving_namespace
from components.manifests.ray_service import RAY_SERVICE_POD_LABEL, ray_service_manifest
from components.scheduling import (
    GPU_RESOURCE,
    GPU_ROLE,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    ROLE_LABEL,
    SYSTEM_ROLE,
)
from components.sizing import worker_resources
from facts.instances import RECORDED_EC2_ANSWERS, InstanceType, instance_type
from facts.models import known_model
from serve_app.config import PDAppConfig
from serve_app.errors import ConfigError
from serve_app.render import serve_config_v2

GPU_NODE_TYPE = GpuNodeSettings.field("instance_type")


def recorded(name: str) -> InstanceType:
    """A type as the offline cloud's recorded EC2 answer describes it."""
    return instance_type(RECORDED_EC2_ANSWERS[name])

G6_8XL = recorded("g6.8xlarge")
KUBERAY_DIR = Path(__file__).resolve().parents[1] / "data" / "kuberay-v1.7.0"
QWEN35_9B_BYTES = known_model("Qwen/Qwen3.5-9B").checkpoint_bytes  # 19,306,216,416 B ≈ 17.98 GiB

# The nodes the two node groups create (labels and taints as the node groups set them).
GPU_NODE = {
    "labels": {ROLE_LABEL: GPU_ROLE, "node.kubernetes.io/instance-type": "g6.8xlarge"},
    "taints": [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}],
}
SYSTEM_NODE = {"labels": {ROLE_LABEL: SYSTEM_ROLE, "node.kubernetes.io/instance-type": "m7i.xlarge"}, "taints": []}


@pytest.fixture(scope="module")
def manifest(settings_for: Any) -> dict[str, Any]:
    return ray_service_manifest(settings_for(hfToken="offline-token").serving)


def head_of(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["rayClusterConfig"]["headGroupSpec"]


def worker_groups(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group["groupName"]: group for group in body["spec"]["rayClusterConfig"]["workerGroupSpecs"]}


def workers_of(body: dict[str, Any]) -> dict[str, Any]:
    """The decode worker group: the pod spec both phases' groups share (test_scaling.py checks what differs)."""
    return worker_groups(body)["decode-workers"]


def container(group: dict[str, Any]) -> dict[str, Any]:
    (only,) = group["template"]["spec"]["containers"]
    return only


def env_of(group: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container(group)["env"]}


# ── Kubernetes scheduling, enough of it to say where a pod can land ─────────────────────────────

def _tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("operator", "Equal") == "Equal" and t.get("value") == taint["value"]:
            return True
    return False


def _affinity_admits(affinity: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True

    def matches(expr: dict[str, Any]) -> bool:
        if expr["operator"] == "In":
            return labels.get(expr["key"]) in expr["values"]
        if expr["operator"] == "NotIn":
            return labels.get(expr["key"]) not in expr["values"]
        raise AssertionError(f"operator {expr['operator']} not modelled")

    return any(all(matches(e) for e in term.get("matchExpressions", [])) for term in required["nodeSelectorTerms"])


def schedulable(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    selector = pod.get("nodeSelector") or {}
    return (all(node["labels"].get(k) == v for k, v in selector.items())
            and _affinity_admits(pod.get("affinity"), node["labels"])
            and all(_tolerated(taint, pod.get("tolerations") or []) for taint in node["taints"]))


# ── Worker sizing ──────────────────────────────────────────────────────────────────────────────

def test_worker_resources_for_g6_8xlarge_and_qwen35_9b_by_hand() -> None:
    sizing = worker_resources(G6_8XL, QWEN35_9B_BYTES, GPU_NODE_TYPE)
    # 32 vCPUs − 2 for kubelet/containerd/DaemonSets = 30; 29 stay free beside the 1-CPU placement group.
    assert sizing.cpus == 30
    # The node's user data allocates 2560 × 2 MiB = 5,120 MiB of huge pages; the pod asks for them all.
    assert sizing.hugepages_2mi_mib == 5_120
    # 128 GiB − ceil(5% × 128 = 6.4) = 7 − 4 − ceil(5,120 MiB = 5 GiB) = 5 → 112 GiB.
    assert sizing.memory_gib == 112
    # /dev/shm = 112 // 8 = 14 GiB (within 4..32); Ray's object store gets 14 − 2 = 12 GiB of it.
    assert sizing.shm_gib == 14
    assert sizing.object_store_gib == 12
    # Checkpoint ceil(19,306,216,416 / 2^30 = 17.98) = 18 GiB.
    # The pod holds the checkpoint twice + runtime + shm: 2 × 18 + 8 + 14 = 58 GiB ≤ 112 GiB.
    assert sizing.memory_gib >= 2 * 18 + 8 + 14
    assert (sizing.gpus, sizing.efa_interfaces) == (1, 1)
    resources = sizing.container_resources()
    assert resources["limits"]["hugepages-2Mi"] == resources["requests"]["hugepages-2Mi"] == "5120Mi"


def test_a_node_without_efa_gets_no_huge_pages() -> None:
    sizing = worker_resources(recorded("g6.4xlarge"), QWEN35_9B_BYTES, GPU_NODE_TYPE)
    assert sizing.hugepages_2mi_mib == 0 and "hugepages-2Mi" not in sizing.container_resources()["limits"]


def test_worker_resources_follow_a_larger_instance() -> None:
    sizing = worker_resources(recorded("p5.48xlarge"), QWEN35_9B_BYTES, GPU_NODE_TYPE)
    # 192 − 2 = 190 CPUs; 2048 − ceil(102.4) = 103 − 4 − 5 (huge pages) = 1936 GiB; shm capped at 32 GiB.
    assert (sizing.cpus, sizing.memory_gib, sizing.shm_gib) == (190, 1936, 32)
    # The one worker pod on the node takes all 8 GPUs and all 32 EFA interfaces.
    assert (sizing.gpus, sizing.efa_interfaces) == (8, 32)


def test_a_checkpoint_the_node_cannot_cache_is_refused() -> None:
    # 60 GB = ceil(55.9) = 56 GiB → needs 2 × 56 + 8 + 14 = 134 GiB, the pod gets 112.
    with pytest.raises(ConfigError) as caught:
        worker_resources(G6_8XL, 60 * 10**9, GPU_NODE_TYPE)
    assert caught.value.setting == "gpuNodeType"
    assert "134" in str(caught.value) and "112" in str(caught.value)


def test_a_node_without_spare_cpus_beside_the_placement_group_is_refused() -> None:
    # g6.xlarge: 4 vCPUs − 2 reserved = 2, minus the engine's 1-CPU placement group leaves 1 < 4.
    with pytest.raises(ConfigError) as caught:
        worker_resources(recorded("g6.xlarge"), QWEN35_9B_BYTES, GPU_NODE_TYPE)
    assert caught.value.setting == "gpuNodeType"
    assert "ray#59764" in str(caught.value)


def test_unknown_model_size_skips_the_memory_floor() -> None:
    sizing = worker_resources(G6_8XL, None, GPU_NODE_TYPE)
    assert sizing.memory_gib == 112


# ── RayService: identity and lifecycle ─────────────────────────────────────────────────────────

def test_rayservice_identity_timeout_and_upgrade_strategy(manifest: dict[str, Any], settings_for: Any) -> None:
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayService"
    assert manifest["metadata"]["name"] == "ray-llm"
    assert manifest["metadata"]["namespace"] == "inference"
    assert manifest["metadata"]["annotations"]["ray.io/initializing-timeout"] == "30m"
    assert manifest["spec"]["upgradeStrategy"] == {"type": "None"}
    assert manifest["spec"]["rayClusterConfig"]["rayVersion"] == "2.58.0"
    assert settings_for().serving.serve_service_name == "ray-llm-serve-svc"


def test_serve_config_travels_as_yaml_text_of_the_rendered_app(manifest: dict[str, Any], settings_for: Any) -> None:
    text = manifest["spec"]["serveConfigV2"]
    assert isinstance(text, str)
    ingress = settings_for().serving.app.config.ingress  # the front door's keyed ingress (docs/FRONT_DOOR.md)
    # Each engine's KV cache fixed at the restart's size the plan computes (serve_app/capacity.py).
    assert yaml.safe_load(text) == serve_config_v2(PDAppConfig(ingress=ingress),
                                                   {"prefill": 2_831_994_061, "decode": 2_831_994_061})
    assert yaml.safe_load(text)["applications"][0]["import_path"] == "ray.serve.llm:build_pd_openai_app"


# ── RayService: head ───────────────────────────────────────────────────────────────────────────

def test_head_is_cpu_only_on_system_nodes_with_reference_ports_and_sizes(manifest: dict[str, Any]) -> None:
    head = head_of(manifest)
    # No GPU and no CPU for Ray to schedule on: no Serve replica may live (and die) with the head.
    assert head["rayStartParams"] == {"num-gpus": "0", "num-cpus": "0", "dashboard-host": "0.0.0.0",
                                      "metrics-export-port": "8080"}
    pod = head["template"]["spec"]
    assert schedulable(pod, SYSTEM_NODE)
    assert not schedulable(pod, GPU_NODE)
    ray_head = container(head)
    assert {p["containerPort"] for p in ray_head["ports"]} == {6379, 8265, 8000, 8080}
    assert {p["name"]: p["containerPort"] for p in ray_head["ports"]}["serve"] == 8000
    assert env_of(head)["HF_HOME"]["value"] == "/home/ray/hf-cache"
    assert ray_head["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"},
                                     "limits": {"cpu": "3", "memory": "12Gi"}}
    assert "ray stop" in " ".join(ray_head["lifecycle"]["preStop"]["exec"]["command"])
    assert GPU_RESOURCE not in str(ray_head["resources"])


# ── RayService: GPU workers ────────────────────────────────────────────────────────────────────

def test_one_fixed_worker_group_per_phase_lands_only_on_gpu_nodes(manifest: dict[str, Any]) -> None:
    groups = worker_groups(manifest)
    assert list(groups) == ["prefill-workers", "decode-workers"]
    for group in groups.values():
        # The dev stack: one replica per phase, fixed, one pod (one g6.8xlarge) each.
        assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 1
        assert group["rayStartParams"]["num-gpus"] == "1"
        pod = group["template"]["spec"]
        assert schedulable(pod, GPU_NODE)
        assert not schedulable(pod, SYSTEM_NODE)
    # Both phases' specs are the same pod but for the phase label: one sizing, one security posture.
    prefill, decode = (dict(g["template"]["spec"]) for g in groups.values())
    assert prefill == decode


def test_worker_resources_in_the_pod_match_the_hand_computed_sizing(manifest: dict[str, Any]) -> None:
    resources = container(workers_of(manifest))["resources"]
    expected = {"cpu": "30", "memory": "112Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1",
                "hugepages-2Mi": "5120Mi"}
    assert resources["limits"] == expected
    assert resources["requests"] == expected
    # Ray's object store must fit inside /dev/shm or Ray falls back to /tmp: 11 GiB.
    assert workers_of(manifest)["rayStartParams"]["object-store-memory"] == str(12 * 2**30)


def test_worker_env_for_efa_nixl_and_hybrid_models(manifest: dict[str, Any]) -> None:
    env = env_of(workers_of(manifest))
    assert env["FI_PROVIDER"]["value"] == "efa"
    assert env["VLLM_HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["HF_HOME"]["value"] == "/mnt/node-cache/huggingface"
    assert env["VLLM_SSM_CONV_STATE_LAYOUT"]["value"] == "DS"


def test_dense_models_do_not_get_the_hybrid_conv_state_layout(settings_for: Any) -> None:
    body = ray_service_manifest(settings_for(modelSource="meta-llama/Llama-3.1-8B-Instruct").serving)
    assert "VLLM_SSM_CONV_STATE_LAYOUT" not in env_of(workers_of(body))


def test_haproxy_front_reaches_the_head_and_every_worker_and_is_off_by_default(
        manifest: dict[str, Any], settings_for: Any) -> None:
    groups = [head_of(manifest), *worker_groups(manifest).values()]
    assert all("RAY_SERVE_ENABLE_HA_PROXY" not in env_of(group) for group in groups)
    body = ray_service_manifest(settings_for(hfToken="offline-token", httpFront="haproxy").serving)
    groups = [head_of(body), *worker_groups(body).values()]
    assert [env_of(group)["RAY_SERVE_ENABLE_HA_PROXY"] for group in groups] == [
        {"name": "RAY_SERVE_ENABLE_HA_PROXY", "value": "1"}] * 3
    # Nothing else changes: the serve config and the rest of each container are the default's.
    assert body["spec"]["serveConfigV2"] == manifest["spec"]["serveConfigV2"]
    for group in groups:
        container(group)["env"] = [e for e in container(group)["env"] if e["name"] != "RAY_SERVE_ENABLE_HA_PROXY"]
    assert body == manifest


def test_serve_proxy_front_renders_the_default_body_byte_for_byte(manifest: dict[str, Any], settings_for: Any) -> None:
    body = ray_service_manifest(settings_for(hfToken="offline-token", httpFront="serve-proxy").serving)
    assert yaml.safe_dump(body) == yaml.safe_dump(manifest)


def test_direct_streaming_rayservice_carries_its_switches_and_matches_the_crd(
        ray_service_crd_validator: Any, settings_for: Any) -> None:
    body = ray_service_manifest(settings_for(httpFront="haproxy", pdDirectStreaming="true", frontDoor="none").serving)
    (app,) = yaml.safe_load(body["spec"]["serveConfigV2"])["applications"]
    assert app["runtime_env"] == {"env_vars": {"RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1"}}
    assert env_of(head_of(body))["RAY_SERVE_ENABLE_HA_PROXY"]["value"] == "1"
    assert [f"{'/'.join(map(str, e.path))}: {e.message}" for e in ray_service_crd_validator.iter_errors(body)] == []


def test_worker_volumes_shm_in_memory_and_hf_cache(manifest: dict[str, Any]) -> None:
    group = workers_of(manifest)
    volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container(group)["volumeMounts"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "14Gi"}
    # The node's cache on the g6.8xlarge's instance-store RAID0 (not an emptyDir: it outlives the pod).
    assert volumes[mounts["/mnt/node-cache"]]["hostPath"] == {
        "path": "/mnt/k8s-disks/0/eks-pd-llm", "type": "DirectoryOrCreate"}


def _security_contexts(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "securityContext":
                yield f"{path}.{key}", value
            yield from _security_contexts(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _security_contexts(value, f"{path}[{index}]")


def test_privileged_only_on_the_gpu_worker_container(manifest: dict[str, Any]) -> None:
    privileged = [path for path, ctx in _security_contexts(manifest) if ctx.get("privileged")]
    assert privileged == [f".spec.rayClusterConfig.workerGroupSpecs[{i}].template.spec.containers[0].securityContext"
                          for i in (0, 1)]


def mounted_file(group: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume that provides `path` inside the group's container (longest matching mount)."""
    mounts = [m for m in container(group).get("volumeMounts", []) if path.startswith(m["mountPath"] + "/")]
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    (volume,) = [v for v in group["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    return {"mount": mount, "volume": volume, "relative": path[len(mount["mountPath"]) + 1:]}


def test_hf_token_reaches_the_pods_as_a_read_only_secret_file(manifest: dict[str, Any]) -> None:
    for group in (head_of(manifest), workers_of(manifest)):
        token_path = env_of(group)["HF_TOKEN_PATH"]["value"]
        found = mounted_file(group, token_path)
        assert found["mount"]["readOnly"] is True
        secret = found["volume"]["secret"]
        assert secret["secretName"] == "hf-token"
        assert {"key": "token", "path": found["relative"]} in secret["items"]
        # Never the value, and not as an env var every Ray/vLLM process would inherit.
        assert "HF_TOKEN" not in env_of(group)
        assert not any("value" in e and "hf_" in str(e["value"]) for e in container(group)["env"])


def test_no_token_configured_means_no_token_env_or_volume(settings_for: Any) -> None:
    body = ray_service_manifest(settings_for().serving)
    for group in (head_of(body), workers_of(body)):
        assert not {"HF_TOKEN", "HF_TOKEN_PATH"} & set(env_of(group))
        assert "hf-token" not in str(group["template"]["spec"].get("volumes", []))


def test_ray_pods_carry_no_service_account_token_and_default_seccomp(manifest: dict[str, Any]) -> None:
    for group in (head_of(manifest), workers_of(manifest)):
        pod = group["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    head_context = container(head_of(manifest))["securityContext"]
    assert head_context["allowPrivilegeEscalation"] is False
    assert "NET_RAW" in head_context["capabilities"]["drop"]


# ── Refused settings ───────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("name", ["a" * 48, "Ray-llm", "ray_llm", "1ray", "ray-llm-", ""])
def test_rayservice_names_kuberay_refuses_are_refused(name: str, settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(rayServiceName=name)
    assert caught.value.setting == "rayServiceName"


def test_a_47_character_name_is_accepted(settings_for: Any) -> None:
    assert ray_service_manifest(settings_for(rayServiceName="r" * 47).serving)["metadata"]["name"] == "r" * 47


@pytest.mark.parametrize("timeout", ["5m", "599", "30 minutes", "abc", "-30m"])
def test_initializing_timeouts_too_short_or_unparseable_are_refused(timeout: str, settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(initializingTimeout=timeout)
    assert caught.value.setting == "initializingTimeout"


@pytest.mark.parametrize("timeout", ["10m", "1h", "1h30m", "1800", "45m0s"])
def test_go_durations_and_seconds_are_accepted(timeout: str, settings_for: Any) -> None:
    body = ray_service_manifest(settings_for(initializingTimeout=timeout).serving)
    assert body["metadata"]["annotations"]["ray.io/initializing-timeout"] == timeout


def test_incremental_upgrade_is_refused_with_the_reason(settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(upgradeStrategy="NewClusterWithIncrementalUpgrade")
    assert caught.value.setting == "upgradeStrategy"
    assert "Gateway API" in str(caught.value)


def test_unknown_upgrade_strategy_is_refused_and_new_cluster_accepted(settings_for: Any) -> None:
    with pytest.raises(ConfigError):
        settings_for(upgradeStrategy="Recreate")
    serving = settings_for(upgradeStrategy="NewCluster", gpuNodeMaxCount="4").serving
    assert ray_service_manifest(serving)["spec"]["upgradeStrategy"] == {"type": "NewCluster"}


@pytest.mark.parametrize(("key", "value"), [
    ("rayVersion", "latest"),
    ("rayImage", "rayproject/ray"),
    ("gpuNodeCount", "0"),
])
def test_other_bad_values_name_their_setting(key: str, value: str, settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(**{key: value})
    assert caught.value.setting == key


# ── Namespaces ────────────────────────────────────────────────────────────────────────────────

def test_serving_namespace_admits_privileged_pods_and_still_records_them() -> None:
    labels = serving_namespace.serving_namespace_manifest("inference")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/audit"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "baseline"


def test_operator_namespace_is_restricted() -> None:
    body = serving_namespace.kuberay_namespace_manifest()
    assert body["metadata"]["name"] == "kuberay-system"
    assert body["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("name", ["default", "kube-system", "kuberay-system", "Inference", "x" * 64])
def test_serving_namespace_refuses_shared_or_invalid_names(name: str, settings_for: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_for(namespace=name)
    assert caught.value.setting == "namespace"


# ── Network policies ──────────────────────────────────────────────────────────────────────────

# Labels KubeRay 1.7.0 puts on the pods it makes (common/pod.go labelPod), beside the template's own.
KUBERAY_POD_LABELS = {"ray.io/is-ray-node": "yes", "ray.io/cluster": "ray-llm-x7k2p",
                      "app.kubernetes.io/created-by": "kuberay-operator"}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the evaluator below knows matchLabels only
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def admitted(policies: list[dict[str, Any]], *, namespace: str, pod: dict[str, str], port: int,
             source_namespace: str, source_pod: dict[str, str]) -> bool:
    """NetworkPolicy ingress semantics (networking.k8s.io/v1) for one TCP connection to `pod`."""
    selecting = [p for p in policies
                 if p["metadata"]["namespace"] == namespace and _selects(p["spec"]["podSelector"], pod)]
    if not selecting:
        return True
    for policy in selecting:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"].get("ingress", []):
            if "ports" in rule and not any(p == {"protocol": "TCP", "port": port} for p in rule["ports"]):
                continue
            if "from" not in rule:
                return True
            for peer in rule["from"]:
                namespace_ok = (_selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": source_namespace})
                                if "namespaceSelector" in peer else source_namespace == namespace)
                if namespace_ok and _selects(peer.get("podSelector", {}), source_pod):
                    return True
    return False


@pytest.fixture(scope="module")
def policies(settings_for: Any) -> list[dict[str, Any]]:
    return list(serving_namespace.serving_network_policies(settings_for().serving).values())


@pytest.fixture(scope="module")
def ray_pods(manifest: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The labels the head and a worker pod carry once KubeRay has made them from the templates."""
    return {group: {**spec["template"]["metadata"]["labels"], **KUBERAY_POD_LABELS}
            for group, spec in (("head", head_of(manifest)), *worker_groups(manifest).items())}


@pytest.mark.parametrize("port", [8265, 6379, 10001, 52365, 5600])
@pytest.mark.parametrize("source_namespace", ["default", "inference", "kube-system"])
def test_other_pods_cannot_reach_the_ray_dashboard_gcs_or_any_other_ray_port(
        policies, ray_pods, port: int, source_namespace: str) -> None:
    for pod in ray_pods.values():
        assert not admitted(policies, namespace="inference", pod=pod, port=port,
                            source_namespace=source_namespace, source_pod={"app": "debug"})


@pytest.mark.parametrize("source_namespace", ["default", "inference", "kuberay-system"])
def test_anyone_reaches_the_openai_endpoint_on_8000(policies, ray_pods, source_namespace: str) -> None:
    for pod in ray_pods.values():
        assert admitted(policies, namespace="inference", pod=pod, port=8000,
                        source_namespace=source_namespace, source_pod={"app": "client"})


def test_the_kuberay_operator_reaches_the_dashboard_and_serve_but_not_gcs(policies, ray_pods) -> None:
    operator = {"app.kubernetes.io/name": "kuberay-operator"}
    head = ray_pods["head"]
    for port, expected in ((8265, True), (8000, True), (6379, False), (10001, False)):
        assert admitted(policies, namespace="inference", pod=head, port=port,
                        source_namespace="kuberay-system", source_pod=operator) is expected, port


@pytest.mark.parametrize("port", [6379, 8265, 5600, 12345])
def test_ray_pods_reach_each_other_on_every_port(policies, ray_pods, port: int) -> None:
    for source in ray_pods.values():
        for pod in ray_pods.values():
            assert admitted(policies, namespace="inference", pod=pod, port=port,
                            source_namespace="inference", source_pod=source)


def test_pods_of_another_rayservice_are_not_ray_peers(policies, ray_pods) -> None:
    other = {**ray_pods["decode-workers"], RAY_SERVICE_POD_LABEL: "other-llm"}
    assert not admitted(policies, namespace="inference", pod=ray_pods["head"], port=6379,
                        source_namespace="inference", source_pod=other)


def test_network_policies_field_by_field(settings_for: Any) -> None:
    by_role = serving_namespace.serving_network_policies(settings_for().serving)
    ray_pods = {"matchLabels": {"eks-pd-llm/ray-service": "ray-llm"}}
    assert by_role == {
        "default-deny-ingress": {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny-ingress", "namespace": "inference"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
        },
        "ray-internal": {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "ray-llm-ray-internal", "namespace": "inference"},
            "spec": {"podSelector": ray_pods, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": ray_pods}]}]},
        },
        "serve": {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "ray-llm-serve", "namespace": "inference"},
            "spec": {"podSelector": ray_pods, "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"protocol": "TCP", "port": 8000}]}]},
        },
        "kuberay-operator": {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "ray-llm-kuberay-operator", "namespace": "inference"},
            "spec": {"podSelector": ray_pods, "policyTypes": ["Ingress"], "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}}}],
                "ports": [{"protocol": "TCP", "port": 8265}, {"protocol": "TCP", "port": 8000}]}]},
        },
        "metrics-scraper": {
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "ray-llm-metrics-scraper", "namespace": "inference"},
            "spec": {"podSelector": ray_pods, "policyTypes": ["Ingress"], "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                          "podSelector": {"matchLabels": {"eks-pd-llm/scraper": "prometheus"}}}],
                "ports": [{"protocol": "TCP", "port": 8080}]}]},
        },
    }


def test_policies_follow_the_rayservice_name_and_namespace(settings_for: Any) -> None:
    spec = settings_for(rayServiceName="qwen", namespace="serving").serving
    body = ray_service_manifest(spec)
    for policy in serving_namespace.serving_network_policies(spec).values():
        assert policy["metadata"]["namespace"] == "serving"
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        for group in (head_of(body), workers_of(body)):
            assert _selects({"matchLabels": selector}, group["template"]["metadata"]["labels"])


# ── Helm values ───────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("values", [helm_values.nvidia_device_plugin_values(), helm_values.efa_device_plugin_values()],
                         ids=["nvidia", "efa"])
def test_device_plugins_run_on_gpu_nodes_only(values: dict[str, Any]) -> None:
    assert schedulable(values, GPU_NODE)
    assert not schedulable(values, SYSTEM_NODE)


def test_nvidia_plugin_does_not_wait_for_node_feature_discovery_labels() -> None:
    # The chart's default affinity requires NFD labels EKS nodes lack; ours must admit a bare GPU node.
    affinity = helm_values.nvidia_device_plugin_values()["affinity"]
    assert "feature.node.kubernetes.io" not in str(affinity)
    assert _affinity_admits(affinity, GPU_NODE["labels"])


def test_kuberay_operator_runs_on_system_nodes() -> None:
    values = helm_values.kuberay_operator_values()
    assert schedulable(values, SYSTEM_NODE)
    assert not schedulable(values, GPU_NODE)


def test_kuberay_values_use_keys_the_chart_has() -> None:
    path = KUBERAY_DIR / "kuberay-operator-values.yaml"
    chart_keys = set(yaml.safe_load(path.read_text()))
    assert set(helm_values.kuberay_operator_values()) <= chart_keys


# ── KubeRay 1.7.0 CRD schema (tests/conftest.py's ray_service_crd_validator) ──────────────────

def test_rayservice_matches_the_kuberay_1_7_0_crd(ray_service_crd_validator: Any, manifest: dict[str, Any]) -> None:
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in ray_service_crd_validator.iter_errors(manifest)]
    assert errors == []


@pytest.mark.parametrize("mutate", [
    lambda body: workers_of(body).update(replica=2),                      # misspelled field
    lambda body: workers_of(body).update(replicas="2"),                   # wrong type
    lambda body: head_of(body).update(rayStartParams={"num-gpus": 0}),    # params are strings
    lambda body: body["spec"].update(serveConfigV2={"applications": []}),  # must be YAML text
], ids=["misspelled", "string-replicas", "int-param", "dict-serve-config"])
def test_crd_validation_catches_broken_bodies(
        ray_service_crd_validator: Any, manifest: dict[str, Any], mutate: Any) -> None:
    broken = copy.deepcopy(manifest)
    mutate(broken)
    assert list(ray_service_crd_validator.iter_errors(broken))


# ── The metrics scraper ───────────────────────────────────────────────────────────────────────

PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus", "eks-pd-llm/scraper": "prometheus"}


def test_ray_metrics_port_is_pinned_and_declared_on_head_and_workers(manifest: dict[str, Any]) -> None:
    for group in (head_of(manifest), workers_of(manifest)):
        assert group["rayStartParams"]["metrics-export-port"] == "8080"
        # KubeRay adds its own `metrics` port only when the template has none: ours names the same port.
        assert {"name": "metrics", "containerPort": 8080} in container(group)["ports"]


def test_the_scraper_reaches_the_metrics_port_of_every_ray_pod(policies, ray_pods) -> None:
    for pod in ray_pods.values():
        assert admitted(policies, namespace="inference", pod=pod, port=8080,
                        source_namespace="monitoring", source_pod=PROMETHEUS_POD)


@pytest.mark.parametrize("port", [6379, 8265, 10001, 52365, 5600])
def test_the_scraper_reaches_no_other_ray_port(policies, ray_pods, port: int) -> None:
    for pod in ray_pods.values():
        assert not admitted(policies, namespace="inference", pod=pod, port=port,
                            source_namespace="monitoring", source_pod=PROMETHEUS_POD)


@pytest.mark.parametrize(("source_namespace", "source_pod"), [
    ("monitoring", {"app.kubernetes.io/name": "grafana"}),   # another pod of the monitoring namespace
    ("default", PROMETHEUS_POD),                             # the scraper's label in another namespace
    ("kuberay-system", {"app.kubernetes.io/name": "kuberay-operator"}),
])
def test_only_the_scraper_reaches_the_metrics_port(policies, ray_pods, source_namespace: str,
                                                   source_pod: dict[str, str]) -> None:
    for pod in ray_pods.values():
        assert not admitted(policies, namespace="inference", pod=pod, port=8080,
                            source_namespace=source_namespace, source_pod=source_pod)


def test_the_scraper_label_is_the_one_prometheus_carries(settings_for: Any) -> None:
    settings = settings_for()
    values = helm_values.kube_prometheus_stack_values(settings.observability, "gp3-encrypted")
    labels = values["prometheus"]["prometheusSpec"]["podMetadata"]["labels"]
    (rule,) = serving_namespace.serving_network_policies(settings.serving)["metrics-scraper"]["spec"]["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"] == labels


# ── Monitoring charts ─────────────────────────────────────────────────────────────────────────

def test_monitoring_stack_runs_on_system_nodes_and_dcgm_on_gpu_nodes_only(settings_for: Any) -> None:
    values = helm_values.kube_prometheus_stack_values(settings_for().observability, "gp3-encrypted")
    for pod_values in (values["prometheus"]["prometheusSpec"], values["alertmanager"]["alertmanagerSpec"],
                       values["prometheusOperator"], values["prometheusOperator"]["admissionWebhooks"]["patch"],
                       values["grafana"], values["kube-state-metrics"]):
        assert schedulable(pod_values, SYSTEM_NODE) and not schedulable(pod_values, GPU_NODE)
    dcgm = helm_values.dcgm_exporter_values()
    assert schedulable(dcgm, GPU_NODE) and not schedulable(dcgm, SYSTEM_NODE)
    # node-exporter keeps the chart's tolerate-every-NoSchedule default: it reaches the GPU nodes too.
    assert "tolerations" not in values["prometheus-node-exporter"]
    assert values["prometheus-node-exporter"]["namespaceOverride"] == "kube-system"


def test_prometheus_volume_and_retention_follow_the_settings(settings_for: Any) -> None:
    settings = settings_for("prod")
    spec = helm_values.kube_prometheus_stack_values(settings.observability, "gp3-encrypted")["prometheus"][
        "prometheusSpec"]
    assert spec["retention"] == "30d"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "200Gi" and claim["storageClassName"] == "gp3-encrypted"
    # 80 % of 200 GiB; Prometheus's "GB" are GiB.
    assert spec["retentionSize"] == "160GB"


def test_prometheus_volume_goes_with_an_unprotected_stack_and_stays_with_a_protected_one(offline_run) -> None:
    """A StatefulSet's claims outlive it: without the retention policy `pulumi destroy` of dev leaves a
    billed EBS volume. Prod (deletionProtection) keeps its metrics when the StatefulSet is recreated;
    turning protection off for a destroy switches it to Delete on that `pulumi up`."""
    policies = {}
    for stack in ("dev", "prod"):
        [release] = [r for r in offline_run(stack).resources if r.type == "kubernetes:helm.sh/v3:Release"
                     and r.inputs["chart"] == "kube-prometheus-stack"]
        policies[stack] = release.inputs["values"]["prometheus"]["prometheusSpec"][
            "persistentVolumeClaimRetentionPolicy"]
    assert policies == {"dev": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                        "prod": {"whenDeleted": "Retain", "whenScaled": "Retain"}}


def _value_paths(values: Any, prefix: str = "") -> list[str]:
    if not isinstance(values, dict) or not values:
        return [prefix]
    return [p for key, value in values.items() for p in _value_paths(value, f"{prefix}.{key}" if prefix else key)]


@pytest.mark.parametrize(("chart", "values"), [
    ("KUBERAY_OPERATOR", lambda s: helm_values.kuberay_operator_values()),
    ("NVIDIA_DEVICE_PLUGIN", lambda s: helm_values.nvidia_device_plugin_values()),
    ("EFA_DEVICE_PLUGIN", lambda s: helm_values.efa_device_plugin_values()),
    ("KUBE_PROMETHEUS_STACK", lambda s: helm_values.kube_prometheus_stack_values(s.observability, "gp3-encrypted")),
    ("DCGM_EXPORTER", lambda s: helm_values.dcgm_exporter_values()),
])
def test_every_values_key_set_was_read_in_the_charts_values(chart: str, values: Any, settings_for: Any) -> None:
    from facts import charts

    recorded = getattr(charts, chart).values_keys
    for path in _value_paths(values(settings_for("prod"))):
        assert any(path == key or path.startswith(key + ".") for key in recorded), f"{chart}: {path} not recorded"


def test_the_kuberay_keys_recorded_are_in_its_values_file() -> None:
    from facts.charts import KUBERAY_OPERATOR

    chart_keys = set(yaml.safe_load((KUBERAY_DIR / "kuberay-operator-values.yaml").read_text()))
    assert set(KUBERAY_OPERATOR.values_keys) <= chart_keys
