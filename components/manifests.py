"""The Kubernetes objects and Helm values this stack applies, as plain data.

Pure functions, no Pulumi: the Pulumi components hand these dicts to the provider, `pdctl render`
prints them for `kubectl apply`, and tests check them field by field (and against the KubeRay CRD
schema). Every user-facing mistake is refused here with a `ConfigError` naming the stack setting.

The RayService follows the reference deployment (REFERENCE.md §1): a CPU-only head on the system
nodes and one worker group with one pod per GPU node, holding all that node's GPUs and EFA
interfaces. Numbers that the reference does not fix (worker CPU/memory, /dev/shm, HF cache size)
are derived from the instance type by `worker_resources`, so a different GPU type gets a pod that
fits it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from components.scheduling import (
    EFA_RESOURCE,
    GPU_NODE_SELECTOR,
    GPU_RESOURCE,
    GPU_TOLERATION,
    SYSTEM_NODE_SELECTOR,
)
from facts.instances import InstanceType
from facts.models import known_model
from serve_app.errors import ConfigError
from serve_app.render import SERVE_HTTP_PORT, serve_config_v2

if TYPE_CHECKING:  # settings imports this module's validators
    from components.settings import ServingSettings

GIB = 1024**3

# --- RayService identity and lifecycle -------------------------------------------------------

RAY_SERVICE_API_VERSION = "ray.io/v1"
RAY_SERVICE_KIND = "RayService"
# KubeRay's ValidateRayServiceMetadata: at most 47 characters and a DNS-1035 label, because it
# derives Service and RayCluster names from it.
MAX_RAY_SERVICE_NAME_LENGTH = 47
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

INITIALIZING_TIMEOUT_ANNOTATION = "ray.io/initializing-timeout"
# The first start pulls a multi-GB Ray LLM image on three nodes and loads the checkpoint (about
# 145 s for the reference model); past the timeout the RayService is terminal until recreated.
DEFAULT_INITIALIZING_TIMEOUT = "30m"
MIN_INITIALIZING_TIMEOUT_SECONDS = 10 * 60
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_DURATION_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}

# KubeRay accepts None, NewCluster and NewClusterWithIncrementalUpgrade. Default None: the GPU node
# group is fixed (desired = min = max), so NewCluster's blue/green upgrade would park a second
# RayCluster Pending until someone adds GPU nodes, while `pulumi up` reports success. With None,
# serveConfigV2 changes are applied in place by Ray Serve, and the InferenceService component
# replaces the RayService when the cluster spec changes (a short, visible outage instead of a
# silent stuck upgrade).
DEFAULT_UPGRADE_STRATEGY = "None"
_UPGRADE_STRATEGIES_THIS_STACK_RUNS = ("None", "NewCluster")

# --- Pods ----------------------------------------------------------------------------------------

HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
WORKER_GROUP_NAME = "gpu-workers"

GCS_PORT = 6379
DASHBOARD_PORT = 8265
SERVE_PORT = SERVE_HTTP_PORT

HF_HOME = "/home/ray/hf-cache"
SHM_MOUNT = "/dev/shm"

# Reference head sizing (REFERENCE.md §1): the head runs GCS, the Serve controller and proxy, not
# the engines, so it stays small and CPU-only.
HEAD_RESOURCES = {
    "requests": {"cpu": "2", "memory": "8Gi"},
    "limits": {"cpu": "3", "memory": "12Gi"},
}

# What a GPU node keeps for itself: kubelet and containerd (EKS kube-reserved for 32 vCPUs is
# 0.15 CPU and 255 MiB + 11 MiB per pod), the DaemonSets (aws-node, kube-proxy, both device
# plugins), and the share of RAM the kernel and firmware hold back from MemTotal (~3-4%).
NODE_RESERVED_CPUS = 2
NODE_RESERVED_MEMORY_FRACTION = 0.05
NODE_RESERVED_MEMORY_GIB = 4

# Ray Serve LLM places each engine in a placement group of {CPU: 1, GPU: 1} per GPU; model
# download tasks and the replica's helpers need CPUs outside it, or initialization hangs with no
# error (ray#59764). This many CPUs must stay free after the placement groups.
PLACEMENT_GROUP_CPUS_PER_GPU = 1
MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS = 4

# Raylet, the vLLM engine process, CUDA context and tokenizer, before any checkpoint bytes.
WORKER_RUNTIME_MEMORY_GIB = 8
# Shared memory NCCL, NIXL and vLLM keep for themselves, outside Ray's object store.
SHM_RESERVED_FOR_ENGINE_GIB = 2
MIN_SHM_GIB = 4
MAX_SHM_GIB = 32
MIN_HF_CACHE_GIB = 50

# On every Ray pod of the RayService (KubeRay copies pod template labels onto the pods it makes,
# beside its own): what the serving namespace's NetworkPolicies select. KubeRay's own labels name
# the RayCluster, whose name KubeRay generates, not the RayService.
RAY_SERVICE_POD_LABEL = "eks-pd-llm/ray-service"

HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = "token"
HF_TOKEN_SECRET_NAME = "hf-token"
HF_TOKEN_SECRET_KEY = "token"


@dataclass(frozen=True)
class SecretKeyRef:
    """A key in a Kubernetes Secret, referenced from a pod's env (the value never enters the manifest)."""

    name: str
    key: str


# --- Worker sizing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerResources:
    """What one Ray worker pod on one GPU node gets (requests = limits: Guaranteed QoS)."""

    cpus: int
    memory_gib: int
    gpus: int
    efa_interfaces: int
    shm_gib: int
    object_store_gib: int
    hf_cache_gib: int

    def container_resources(self) -> dict[str, Any]:
        # Equal requests and limits: the pod owns the node, and Guaranteed QoS keeps the kubelet
        # from evicting a serving engine under memory pressure before anything else.
        amounts = {
            "cpu": str(self.cpus),
            "memory": f"{self.memory_gib}Gi",
            GPU_RESOURCE: str(self.gpus),
        }
        if self.efa_interfaces:
            amounts[EFA_RESOURCE] = str(self.efa_interfaces)
        return {"requests": dict(amounts), "limits": dict(amounts)}


def worker_resources(instance: InstanceType, model_bytes: int | None) -> WorkerResources:
    """Size the one worker pod that runs on each GPU node of `instance`.

    CPU: the node's vCPUs less `NODE_RESERVED_CPUS`; refused if fewer than
    `MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS` stay free beside the engines' placement groups.
    Memory: the node's memory less 5% and 4 GiB (kernel share, kube-reserved, eviction threshold,
    DaemonSets), rounded down to whole GiB. The limit must hold the checkpoint twice (the page
    cache keeps the safetensors so a restart loads in seconds; the load itself stages a copy) plus
    the runtime and /dev/shm, which a memory-backed emptyDir charges to the pod.
    /dev/shm: an eighth of the pod's memory, 4–32 GiB; Ray's object store gets all but 2 GiB of it
    so Ray does not fall back to /tmp. HF cache: 1.5× the checkpoint, at least 50 GiB.
    `model_bytes` None (a model we have no facts for) skips the memory floor and sizes the cache
    at the minimum.
    """
    if not instance.has_gpu:
        raise ConfigError("gpuNodeType", instance.name, "a GPU instance type", "Ray workers run the vLLM engines")
    cpus = instance.vcpus - NODE_RESERVED_CPUS
    placement_group_cpus = instance.gpus * PLACEMENT_GROUP_CPUS_PER_GPU
    if cpus - placement_group_cpus < MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS:
        needed = placement_group_cpus + MIN_FREE_CPUS_BEYOND_PLACEMENT_GROUPS + NODE_RESERVED_CPUS
        raise ConfigError(
            "gpuNodeType", instance.name, f"a type with at least {needed} vCPUs",
            f"{instance.vcpus} vCPUs leave {cpus - placement_group_cpus} beside {instance.gpus} engine placement "
            f"group CPU(s); Ray Serve LLM initialization hangs without spare CPUs (ray#59764)")

    memory_gib = instance.memory_gib - math.ceil(instance.memory_gib * NODE_RESERVED_MEMORY_FRACTION) \
        - NODE_RESERVED_MEMORY_GIB
    shm_gib = min(MAX_SHM_GIB, max(MIN_SHM_GIB, memory_gib // 8))
    checkpoint_gib = math.ceil(model_bytes / GIB) if model_bytes else 0
    needed_gib = 2 * checkpoint_gib + WORKER_RUNTIME_MEMORY_GIB + shm_gib
    if memory_gib < needed_gib:
        raise ConfigError(
            "gpuNodeType", instance.name, f"a type whose worker pod gets at least {needed_gib} GiB",
            f"the {checkpoint_gib} GiB checkpoint needs 2 × {checkpoint_gib} GiB (page cache + load) + "
            f"{WORKER_RUNTIME_MEMORY_GIB} GiB runtime + {shm_gib} GiB /dev/shm; a {instance.memory_gib} GiB node "
            f"leaves the pod {memory_gib} GiB")
    return WorkerResources(
        cpus=cpus,
        memory_gib=memory_gib,
        gpus=instance.gpus,
        efa_interfaces=instance.efa_interfaces,
        shm_gib=shm_gib,
        object_store_gib=shm_gib - SHM_RESERVED_FOR_ENGINE_GIB,
        hf_cache_gib=max(MIN_HF_CACHE_GIB, math.ceil(checkpoint_gib * 1.5)),
    )


# --- Validation of the RayService settings ------------------------------------------------------


def validate_ray_service_name(name: str) -> str:
    if len(name) > MAX_RAY_SERVICE_NAME_LENGTH or not _DNS_1035_LABEL.match(name):
        raise ConfigError(
            "rayServiceName", name,
            f"a DNS-1035 label of at most {MAX_RAY_SERVICE_NAME_LENGTH} characters (lowercase letters, digits "
            "and '-', starting with a letter, not ending with '-')",
            "KubeRay refuses other names and derives Service and RayCluster names from it")
    return name


def duration_seconds(value: str) -> float | None:
    """Seconds in a Go duration ("30m", "1h30m") or integer seconds, as KubeRay parses the annotation."""
    if re.fullmatch(r"\d+", value):
        return float(value)
    parts = _GO_DURATION_PART.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * _GO_DURATION_UNIT_SECONDS[unit] for number, unit in parts)


def validate_initializing_timeout(value: str) -> str:
    seconds = duration_seconds(value)
    allowed = (f"a Go duration (e.g. '30m', '1h') or integer seconds, at least "
               f"{MIN_INITIALIZING_TIMEOUT_SECONDS // 60}m")
    if seconds is None:
        raise ConfigError("initializingTimeout", value, allowed)
    if seconds < MIN_INITIALIZING_TIMEOUT_SECONDS:
        raise ConfigError(
            "initializingTimeout", value, allowed,
            "the first start pulls the Ray LLM image and loads the model; past the timeout KubeRay marks "
            "the RayService failed for good and it must be recreated")
    return value


def validate_upgrade_strategy(value: str) -> str:
    if value not in _UPGRADE_STRATEGIES_THIS_STACK_RUNS:
        why = None
        if value == "NewClusterWithIncrementalUpgrade":
            why = ("it needs the Ray autoscaler, a Gateway API implementation and clusterUpgradeOptions, "
                   "none of which this stack deploys")
        raise ConfigError("upgradeStrategy", value, ", ".join(_UPGRADE_STRATEGIES_THIS_STACK_RUNS), why)
    return value


# --- RayService -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RayServiceSpec:
    """Everything the RayService manifest depends on; validated on construction."""

    name: str
    namespace: str
    image: str
    ray_version: str
    serve_config_v2: Mapping[str, Any]
    gpu_instance: InstanceType
    gpu_node_count: int
    # Checkpoint size for worker memory sizing; None when the model is not in facts/models.py.
    model_bytes: int | None
    # Hybrid (linear-attention + attention) models such as Qwen3.5 need the DS conv-state layout
    # for NIXL to transfer their recurrent state (AWS sample: "required by NIXL for hybrid models").
    hybrid_model: bool = False
    initializing_timeout: str = DEFAULT_INITIALIZING_TIMEOUT
    upgrade_strategy: str = DEFAULT_UPGRADE_STRATEGY
    hf_token: SecretKeyRef | None = None

    def __post_init__(self) -> None:
        validate_ray_service_name(self.name)
        validate_initializing_timeout(self.initializing_timeout)
        validate_upgrade_strategy(self.upgrade_strategy)
        if not self.image:
            raise ConfigError("rayImage", self.image, "a container image reference")
        if not re.fullmatch(r"\d+\.\d+\.\d+", self.ray_version):
            raise ConfigError("rayVersion", self.ray_version, "a Ray release such as 2.60.0")
        if self.gpu_node_count < 1:
            raise ConfigError("gpuNodeCount", self.gpu_node_count, "1 or more")
        worker_resources(self.gpu_instance, self.model_bytes)  # refuse a node the worker cannot fit now

    @property
    def serve_service_name(self) -> str:
        return f"{self.name}-serve-svc"

    @property
    def worker(self) -> WorkerResources:
        return worker_resources(self.gpu_instance, self.model_bytes)


def ray_service_spec(serving: ServingSettings, gpu_instance: InstanceType, gpu_node_count: int, *,
                     hf_token_configured: bool) -> RayServiceSpec:
    """The validated RayService inputs of a stack: call it before registering any resource.

    The checkpoint size and whether the model is hybrid come from facts/models.py when the model
    source is a model we ship facts for; otherwise the size is unknown (no memory floor) and the
    model is taken as dense.
    """
    validate_serving_namespace(serving.namespace)
    architecture = known_model(serving.app.model.model_source)
    return RayServiceSpec(
        name=serving.ray_service_name,
        namespace=serving.namespace,
        image=serving.ray_image,
        ray_version=serving.ray_version,
        serve_config_v2=serve_config_v2(serving.app),
        gpu_instance=gpu_instance,
        gpu_node_count=gpu_node_count,
        model_bytes=architecture.weight_bytes("auto") if architecture else None,
        hybrid_model=bool(architecture and architecture.hybrid),
        initializing_timeout=serving.initializing_timeout,
        upgrade_strategy=serving.upgrade_strategy,
        hf_token=SecretKeyRef(HF_TOKEN_SECRET_NAME, HF_TOKEN_SECRET_KEY) if hf_token_configured else None,
    )


def ray_pod_labels(ray_service_name: str) -> dict[str, str]:
    """Labels of the RayService's head and worker pods, set in their pod templates."""
    return {RAY_SERVICE_POD_LABEL: ray_service_name}


def _ray_stop_on_termination() -> dict[str, Any]:
    # Lets raylet tell GCS it is leaving, so Serve reschedules replicas instead of waiting out a
    # health-check timeout.
    return {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}


def _hf_token_env(ref: SecretKeyRef | None) -> list[dict[str, Any]]:
    # huggingface_hub reads the token from the file HF_TOKEN_PATH names. A file, unlike an HF_TOKEN
    # env var, is not inherited by every process the container starts (raylet, Ray workers, vLLM
    # engines) nor copied into their crash and debug dumps.
    if ref is None:
        return []
    return [{"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_MOUNT}/{HF_TOKEN_FILE}"}]


def _hf_token_mounts(ref: SecretKeyRef | None) -> list[dict[str, Any]]:
    return [] if ref is None else [{"name": "hf-token", "mountPath": HF_TOKEN_MOUNT, "readOnly": True}]


def _hf_token_volumes(ref: SecretKeyRef | None) -> list[dict[str, Any]]:
    if ref is None:
        return []
    return [{"name": "hf-token", "secret": {
        "secretName": ref.name,
        "items": [{"key": ref.key, "path": HF_TOKEN_FILE}],
        # Readable by the image's user whatever its uid; nothing writes it.
        "defaultMode": 0o444,
    }}]


def _pod_spec(node_selector: Mapping[str, str], container: dict[str, Any], volumes: list[dict[str, Any]],
              tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": dict(node_selector),
        # Ray talks to the Kubernetes API only for the in-tree autoscaler, which this fixed-size
        # cluster does not run: no service account token in the pods.
        "automountServiceAccountToken": False,
        # The container runtime's default seccomp filter (privileged containers run unconfined anyway).
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if tolerations:
        spec["tolerations"] = tolerations
    if volumes:
        spec["volumes"] = volumes
    return spec


def _head_group(spec: RayServiceSpec) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": HEAD_CONTAINER,
        "image": spec.image,
        "ports": [
            {"name": "gcs-server", "containerPort": GCS_PORT},
            {"name": "dashboard", "containerPort": DASHBOARD_PORT},
            {"name": "serve", "containerPort": SERVE_PORT},
        ],
        "env": [{"name": "HF_HOME", "value": HF_HOME}, *_hf_token_env(spec.hf_token)],
        "resources": {bound: dict(amounts) for bound, amounts in HEAD_RESOURCES.items()},
        # The head needs no privilege. Capabilities beyond NET_RAW stay: the default image (the Ray
        # LLM DLC) has a user not verified here (rayproject/ray images run as `ray`, uid 1000), and
        # a root user without DAC_OVERRIDE/CHOWN could not write where it expects.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}},
        "lifecycle": _ray_stop_on_termination(),
    }
    mounts = _hf_token_mounts(spec.hf_token)
    if mounts:
        container["volumeMounts"] = mounts
    return {
        # num-gpus "0": the head lands on a system node, and nothing GPU-bound may be scheduled there.
        "rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0"},
        "template": {
            "metadata": {"labels": ray_pod_labels(spec.name)},
            "spec": _pod_spec(SYSTEM_NODE_SELECTOR, container, _hf_token_volumes(spec.hf_token)),
        },
    }


def _worker_group(spec: RayServiceSpec) -> dict[str, Any]:
    sizing = spec.worker
    env: list[dict[str, Any]] = [
        # The image sets it too; stating it keeps libfabric on EFA if the image changes.
        {"name": "FI_PROVIDER", "value": "efa"},
        # vLLM/NIXL advertise this address to the peer engine; the pod IP is the one EFA can reach.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HF_HOME", "value": HF_HOME},
    ]
    if spec.hybrid_model:
        env.append({"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"})
    env.extend(_hf_token_env(spec.hf_token))
    container = {
        "name": WORKER_CONTAINER,
        "image": spec.image,
        "env": env,
        "resources": sizing.container_resources(),
        # Privileged only here: NIXL registers GPU memory with the EFA NIC (memory registration
        # through the device files the EFA plugin exposes); the reference found IPC_LOCK alone was
        # not enough. The namespace's Pod Security labels allow it in the serving namespace only.
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "dshm", "mountPath": SHM_MOUNT},
            {"name": "hf-cache", "mountPath": HF_HOME},
            *_hf_token_mounts(spec.hf_token),
        ],
        "lifecycle": _ray_stop_on_termination(),
    }
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{sizing.shm_gib}Gi"}},
        # emptyDir, not a hostPath: it is writable by the image's user, is deleted with the pod (no
        # stale or poisoned weights left on a node), and its sizeLimit makes the kubelet evict a
        # runaway download instead of filling the root disk. It lives under the kubelet's directory
        # on the node's root volume: the launch template's EBS gp3 disk (`gpuDiskGiB`), so the
        # checkpoint is read back at EBS speed. The instance's local NVMe is not used: putting the
        # kubelet's directory on it (an AL2023 nodeadm `localStorage.strategy: RAID0` in the GPU
        # launch template) would be faster and is not done. Cold-start speed after a pod is
        # recreated comes from an S3 model mirror (`modelSource: s3://...`, via the VPC's S3 gateway
        # endpoint), not from keeping files on the node.
        {"name": "hf-cache", "emptyDir": {"sizeLimit": f"{sizing.hf_cache_gib}Gi"}},
        *_hf_token_volumes(spec.hf_token),
    ]
    return {
        "groupName": WORKER_GROUP_NAME,
        # Fixed size: one worker per GPU node; the node group does not scale either.
        "replicas": spec.gpu_node_count,
        "minReplicas": spec.gpu_node_count,
        "maxReplicas": spec.gpu_node_count,
        "rayStartParams": {
            "num-gpus": str(sizing.gpus),
            "object-store-memory": str(sizing.object_store_gib * GIB),
        },
        "template": {
            "metadata": {"labels": ray_pod_labels(spec.name)},
            "spec": _pod_spec(GPU_NODE_SELECTOR, container, volumes, [dict(GPU_TOLERATION)]),
        },
    }


def ray_service_manifest(spec: RayServiceSpec) -> dict[str, Any]:
    """The whole RayService object (ray.io/v1), ready for the API server or `kubectl apply`."""
    return {
        "apiVersion": RAY_SERVICE_API_VERSION,
        "kind": RAY_SERVICE_KIND,
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "annotations": {INITIALIZING_TIMEOUT_ANNOTATION: spec.initializing_timeout},
        },
        "spec": {
            "upgradeStrategy": {"type": spec.upgrade_strategy},
            "serveConfigV2": yaml.safe_dump(dict(spec.serve_config_v2), sort_keys=False),
            "rayClusterConfig": {
                "rayVersion": spec.ray_version,
                "headGroupSpec": _head_group(spec),
                "workerGroupSpecs": [_worker_group(spec)],
            },
        },
    }


# --- Namespaces -----------------------------------------------------------------------------------

POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
# Namespaces this stack must not create or relabel: Kubernetes' own and the operator's.
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KUBERAY_NAMESPACE = "kuberay-system"
DEVICE_PLUGIN_NAMESPACE = "kube-system"


def validate_serving_namespace(name: str) -> str:
    reserved = (*RESERVED_NAMESPACES, KUBERAY_NAMESPACE)
    if len(name) > 63 or not _DNS_1123_LABEL.match(name) or name in reserved:
        raise ConfigError(
            "namespace", name,
            "a DNS-1123 label of at most 63 characters, other than " + ", ".join(reserved),
            "the stack creates this namespace and labels it to admit privileged EFA workers")
    return name


def namespace_manifest(name: str, pod_security: str) -> dict[str, Any]:
    """A Namespace with Pod Security Admission labels enforcing `pod_security`.

    `audit`/`warn` never go below `baseline`, so every privileged pod is still recorded. EKS enforces
    nothing by default: a namespace without these labels admits privileged pods.
    """
    if pod_security not in POD_SECURITY_LEVELS:
        raise ValueError(f"pod_security {pod_security!r} not in {POD_SECURITY_LEVELS}")
    observe = "baseline" if pod_security == "privileged" else pod_security
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "pod-security.kubernetes.io/enforce": pod_security,
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/audit": observe,
                "pod-security.kubernetes.io/warn": observe,
            },
        },
    }


def serving_namespace_manifest(name: str) -> dict[str, Any]:
    """The serving namespace: the only one this stack lets run privileged pods (the EFA workers)."""
    return namespace_manifest(validate_serving_namespace(name), "privileged")


def kuberay_namespace_manifest() -> dict[str, Any]:
    """The operator's namespace: its pod already meets `restricted`, and nothing privileged belongs beside it."""
    return namespace_manifest(KUBERAY_NAMESPACE, "restricted")


# --- Network policies -----------------------------------------------------------------------------

NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"
# Set by the API server on every namespace (Kubernetes >= 1.22), so a policy can name a namespace.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_DENY_INGRESS_POLICY = "default-deny-ingress"


def _network_policy(name: str, namespace: str, pod_selector: Mapping[str, str],
                    ingress: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": dict(pod_selector)} if pod_selector else {},
        "policyTypes": ["Ingress"],
    }
    if ingress:  # none: the selected pods admit nothing
        spec["ingress"] = ingress
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _tcp_ports(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def serving_network_policies(spec: RayServiceSpec) -> dict[str, dict[str, Any]]:
    """The serving namespace's ingress rules, by role. Ray's dashboard / job API (8265) and GCS
    (6379) have no authentication, and a job submitted there runs on the privileged EFA workers
    (root on the node), so only what needs a Ray port may reach it:

    - `default-deny-ingress`: every pod in the namespace; allows nothing (a pod no other policy
      selects stays closed).
    - `ray-internal`: Ray pods from Ray pods of this RayService, every port and protocol: GCS,
      raylet and object manager, worker ports, dashboard agents, the NIXL side channel.
    - `serve`: anyone to the Serve proxies on 8000, the OpenAI endpoint behind `<name>-serve-svc`.
    - `kuberay-operator`: the operator's namespace to 8265 (it reads Serve status and PUTs
      serveConfigV2 through the head Service) and 8000 (it checks the head's Serve proxy at
      `/-/healthz` to put the head in the serve Service), KubeRay 1.7.0 rayservice_controller.go.

    Needs no rule: kubelet probes (the VPC CNI's policy agent always admits the node's own IP,
    aws-network-policy-agent#65) and `kubectl port-forward` (it connects on the pod's localhost).
    KV transfer over EFA (SRD) bypasses the kernel and is not filtered. Egress stays open: workers
    download the model and pull images. Enforced only because the cluster enables the VPC CNI's
    network policy agent (components/cluster.py).
    """
    ray_pods = ray_pod_labels(spec.name)
    namespace = spec.namespace
    return {
        DEFAULT_DENY_INGRESS_POLICY: _network_policy(DEFAULT_DENY_INGRESS_POLICY, namespace, {}, []),
        "ray-internal": _network_policy(
            f"{spec.name}-ray-internal", namespace, ray_pods, [{"from": [{"podSelector": {"matchLabels": ray_pods}}]}]),
        "serve": _network_policy(f"{spec.name}-serve", namespace, ray_pods, [{"ports": _tcp_ports(SERVE_PORT)}]),
        "kuberay-operator": _network_policy(f"{spec.name}-kuberay-operator", namespace, ray_pods, [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: KUBERAY_NAMESPACE}}}],
            "ports": _tcp_ports(DASHBOARD_PORT, SERVE_PORT),
        }]),
    }


# --- Helm values ----------------------------------------------------------------------------------

def _gpu_nodes_only_affinity() -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{
                    "matchExpressions": [
                        {"key": key, "operator": "In", "values": [value]}
                        for key, value in GPU_NODE_SELECTOR.items()
                    ],
                }],
            },
        },
    }


def nvidia_device_plugin_values() -> dict[str, Any]:
    """Values for the `nvidia-device-plugin` chart (keys as in its values.yaml at 0.20.0).

    The chart's default affinity requires Node Feature Discovery labels (pci-10de.present or
    nvidia.com/gpu.present) that EKS nodes do not carry without NFD, so it is replaced by the GPU
    role; Helm merges maps, so only replacing the list inside works.
    """
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "affinity": _gpu_nodes_only_affinity(),
        "tolerations": [dict(GPU_TOLERATION)],
    }


def efa_device_plugin_values() -> dict[str, Any]:
    """Values for the `aws-efa-k8s-device-plugin` chart (keys as in its values.yaml at v0.5.30).

    The chart itself restricts the DaemonSet to EFA-capable instance types by node affinity.
    """
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "tolerations": [dict(GPU_TOLERATION)],
    }


def kuberay_operator_values() -> dict[str, Any]:
    """Values for the `kuberay-operator` chart (keys as in its values.yaml at 1.7.0)."""
    return {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)}
