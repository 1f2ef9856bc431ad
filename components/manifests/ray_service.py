"""The RayService (ray.io/v1) of a stack's validated `ServingSettings`, as plain data.

It follows the reference deployment (docs/SOURCES.md#reference-deployment): a CPU-only head on the
system nodes, and GPU worker pods that each hold one whole GPU node (all its GPUs and EFA
interfaces), sized by `components.sizing`. Departure: one worker group per phase (prefill, decode),
each advertising its own Ray custom resource that only its phase's placement groups ask for
(serve_app/render.py PHASE_RESOURCE), so the two scale apart and a replica of one phase never lands
on the other's pod. When a phase autoscales, KubeRay's in-tree Ray autoscaler (v2) sizes the groups
between their bounds. The serveConfigV2 is the one `serve_app` rendered when the app was checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import yaml

from components import compile_cache
from components.config.front_door import CODE_MOUNT, FRONT_DOOR_MODULES, KEYS_MOUNT
from components.config.nodes import GpuNodeGroupSpec
from components.config.ray_service import INITIALIZING_TIMEOUT_ANNOTATION
from components.config.serving import ServingSettings
from components.scheduling import GPU_TOLERATION, PHASE_LABEL, SYSTEM_NODE_SELECTOR
from components.sizing import GIB, WorkerResources
from facts.images import RAY_AUTOSCALER_V2_ON_KUBERAY, version_tuple
from facts.metrics import RAY_METRICS_EXPORT_PORT, RAY_METRICS_PORT_NAME
from front_door.keys import KEY_TABLE_FILE
from serve_app.config import HA_PROXY_FRONT, PHASES, Phase
from serve_app.render import HA_PROXY_ENV, HYBRID_WORKER_ENV, PHASE_RESOURCE, SERVE_HTTP_PORT

RAY_SERVICE_API_VERSION = "ray.io/v1"
RAY_SERVICE_KIND = "RayService"

HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
WORKER_GROUP_NAMES: dict[str, str] = {"prefill": "prefill-workers", "decode": "decode-workers"}
# On each worker pod: which phase it serves (for kubectl, dashboards and the lab).
PHASE_POD_LABEL = PHASE_LABEL
# The Cluster Autoscaler never removes a node that runs a pod with this annotation
# (cluster-autoscaler/FAQ.md, "What types of pods can prevent CA from removing a node?"): a GPU node
# goes only once the Ray autoscaler has removed its idle worker pod, never under a serving replica.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# The Ray autoscaler sidecar KubeRay adds to the head (KubeRay 1.7.0 common/pod.go
# BuildAutoscalerContainer). It reads its Kubernetes token from the standard path and re-reads it
# every minute (ray/autoscaler/_private/kuberay/node_provider.py IN_CLUSTER_TOKEN_PATH,
# TOKEN_REFRESH_PERIOD), so a short-lived projected token works.
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
AUTOSCALER_TOKEN_VOLUME = "autoscaler-token"
AUTOSCALER_TOKEN_SECONDS = 3600
# Seconds a worker pod must be idle (no replica, task or object) before the Ray autoscaler removes
# it: Ray's own default (idle_timeout_minutes 1). Serve's downscale delay already waited for load to fall.
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 60

GCS_PORT = 6379
DASHBOARD_PORT = 8265
SERVE_PORT = SERVE_HTTP_PORT
# Where every Ray node's metrics agent serves Prometheus text (ray_*, incl. ray_serve_* and the
# engines' ray_vllm_*). Pinned in rayStartParams and declared as the `metrics` container port on
# head and workers: KubeRay only fills in its default port when the template names none, so the
# two cannot drift apart, and the scraper's NetworkPolicy opens exactly this port.
METRICS_PORT = RAY_METRICS_EXPORT_PORT
METRICS_EXPORT_PORT_PARAM = "metrics-export-port"


def _metrics_port() -> dict[str, Any]:
    return {"name": RAY_METRICS_PORT_NAME, "containerPort": METRICS_PORT}

HF_HOME = "/home/ray/hf-cache"
SHM_MOUNT = "/dev/shm"
# The GPU node's cache directory (components/node_storage.py) inside the worker container: Hugging
# Face downloads and vLLM's torch.compile / CUDA-graph cache, kept across pod restarts on the node.
NODE_CACHE_MOUNT = "/mnt/node-cache"
NODE_HF_HOME = f"{NODE_CACHE_MOUNT}/huggingface"
NODE_VLLM_CACHE_ROOT = f"{NODE_CACHE_MOUNT}/vllm"
NODE_BYTECODE_CACHE = f"{NODE_CACHE_MOUNT}/bytecode"
NODE_CACHE_INIT_CONTAINER = "prepare-node-cache"

# The S3 mirror's identity (components/model_access.py): the pods run as this ServiceAccount and
# project its token for STS's audience.
MODEL_READER_SERVICE_ACCOUNT = "ray-model-reader"
STS_AUDIENCE = "sts.amazonaws.com"
AWS_TOKEN_MOUNT = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
AWS_TOKEN_FILE = "token"
AWS_TOKEN_SECONDS = 86_400

# Reference head sizing (docs/SOURCES.md#reference-pods): the head runs GCS, the Serve controller and proxy, not
# the engines, so it stays small and CPU-only.
HEAD_RESOURCES = {
    "requests": {"cpu": "2", "memory": "8Gi"},
    "limits": {"cpu": "3", "memory": "12Gi"},
}

# On every Ray pod of the RayService (KubeRay copies pod template labels onto the pods it makes,
# beside its own): what the serving namespace's NetworkPolicies select. KubeRay's own labels name
# the RayCluster, whose name KubeRay generates, not the RayService.
RAY_SERVICE_POD_LABEL = "eks-pd-llm/ray-service"
# On the head's pod template under NewCluster: the digest of the serveConfigV2 the cluster serves.
SERVE_CONFIG_DIGEST_ANNOTATION = "eks-pd-llm/serve-config-digest"

# Ray's GCS checks the store's TLS certificate against this bundle (Ray config REDIS_CA_CERT, read
# from RAY_REDIS_CA_CERT; src/ray/gcs/store_client/redis_context.cc). It is the Debian/Ubuntu path
# of the system CA bundle, which holds the Amazon roots that sign ElastiCache's certificates; the
# Ray LLM DLC is an Ubuntu image. A custom rayImage on another distribution needs it there too.
REDIS_CA_CERT_ENV = "RAY_REDIS_CA_CERT"
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
GCS_STORE_SECRET_KEY = "password"

HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = "token"
HF_TOKEN_SECRET_NAME = "hf-token"
HF_TOKEN_SECRET_KEY = "token"


@dataclass(frozen=True)
class SecretKeyRef:
    """A key in a Kubernetes Secret, referenced from a pod's env (the value never enters the manifest)."""

    name: str
    key: str


@dataclass(frozen=True)
class GcsStoreRef:
    """Where the GCS keeps its state (RayService gcsFaultToleranceOptions): the store's address
    (`rediss://host:port`, a Pulumi output when the stack creates the store) and the Secret key
    holding its AUTH token."""

    address: Any
    password: SecretKeyRef


def gcs_store_secret_name(serving: ServingSettings) -> str:
    return f"{serving.name}-gcs-store"


def hf_token_ref(serving: ServingSettings) -> SecretKeyRef | None:
    """The Secret key holding the Hugging Face token, when the stack has one."""
    return SecretKeyRef(HF_TOKEN_SECRET_NAME, HF_TOKEN_SECRET_KEY) if serving.hf_token_configured else None


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


def _model_reader_env(role_arn: pulumi.Input[str] | None, region: str) -> list[dict[str, Any]]:
    # What EKS's IRSA webhook would inject, written out: every AWS SDK (the Run:ai streamer's S3
    # client included) assumes AWS_ROLE_ARN with the token file's web identity.
    if role_arn is None:
        return []
    return [{"name": "AWS_ROLE_ARN", "value": role_arn},
            {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": f"{AWS_TOKEN_MOUNT}/{AWS_TOKEN_FILE}"},
            {"name": "AWS_REGION", "value": region},
            {"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"}]


def _model_reader_mounts(role_arn: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    return [] if role_arn is None else [{"name": "aws-token", "mountPath": AWS_TOKEN_MOUNT, "readOnly": True}]


def _model_reader_volumes(role_arn: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    if role_arn is None:
        return []
    return [{"name": "aws-token", "projected": {"defaultMode": 0o444, "sources": [{"serviceAccountToken": {
        "audience": STS_AUDIENCE, "expirationSeconds": AWS_TOKEN_SECONDS, "path": AWS_TOKEN_FILE}}]}}]


# ── the front door's key table and code (components/config/front_door.py), when the ingress checks keys
FRONT_DOOR_KEYS_VOLUME = "api-keys"
FRONT_DOOR_CODE_VOLUME = "front-door-code"


def api_keys_secret_name(serving: ServingSettings) -> str:
    return f"{serving.name}-api-keys"


def front_door_code_name(serving: ServingSettings) -> str:
    return f"{serving.name}-front-door"


def ships_front_door_code(serving: ServingSettings) -> bool:
    """Whether the Ray pods import front_door/: the keyed ingress, or the single-process engine."""
    return serving.app.config.ingress.api_keys is not None or serving.app.config.single_process_engine


def _front_door_mounts(serving: ServingSettings) -> list[dict[str, Any]]:
    """The key table (when the ingress checks keys) and the front door's code (when the pods import it), in
    every Ray container (the ingress and engine replicas may run on any of them)."""
    keys = [] if serving.app.config.ingress.api_keys is None else [
        {"name": FRONT_DOOR_KEYS_VOLUME, "mountPath": KEYS_MOUNT, "readOnly": True}]
    code = [{"name": FRONT_DOOR_CODE_VOLUME, "mountPath": CODE_MOUNT, "readOnly": True}]
    return keys + (code if ships_front_door_code(serving) else [])


def _front_door_volumes(serving: ServingSettings) -> list[dict[str, Any]]:
    # Not subPath mounts: the kubelet updates a mounted Secret in place only when the whole volume is
    # mounted, which is how a new or revoked key reaches the ingress without a restart.
    keys = [] if serving.app.config.ingress.api_keys is None else [
        {"name": FRONT_DOOR_KEYS_VOLUME, "secret": {"secretName": api_keys_secret_name(serving),
                                         "items": [{"key": KEY_TABLE_FILE, "path": KEY_TABLE_FILE}]}}]
    code = [{"name": FRONT_DOOR_CODE_VOLUME, "configMap": {"name": front_door_code_name(serving), "items": [
        {"key": module, "path": f"front_door/{module}"} for module in FRONT_DOOR_MODULES]}}]
    return keys + (code if ships_front_door_code(serving) else [])


def _front_door_env(serving: ServingSettings) -> list[dict[str, Any]]:
    """Ray's workers inherit the container's environment: the ingress and the engine import front_door from here."""
    if not ships_front_door_code(serving):
        return []
    return [{"name": "PYTHONPATH", "value": CODE_MOUNT}]


def _http_front_env(serving: ServingSettings) -> list[dict[str, Any]]:
    # Serve reads it at import in every Ray process (the controller, which starts HAProxy, lives on the
    # head; the replicas HAProxy reaches on the workers), so head and workers alike carry it.
    return [{"name": HA_PROXY_ENV, "value": "1"}] if serving.http_front == HA_PROXY_FRONT else []


def _pod_spec(node_selector: Mapping[str, str], container: dict[str, Any], volumes: list[dict[str, Any]],
              tolerations: list[dict[str, Any]] | None = None, *, service_account: str | None = None,
              init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": dict(node_selector),
        # No container gets a service account token by default: only the head's autoscaler sidecar
        # talks to the Kubernetes API, and it gets its own projected token (_autoscaler_token_volume).
        "automountServiceAccountToken": False,
        # The container runtime's default seccomp filter (privileged containers run unconfined anyway).
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if service_account:
        spec["serviceAccountName"] = service_account
    if init_containers:
        spec["initContainers"] = init_containers
    if tolerations:
        spec["tolerations"] = tolerations
    if volumes:
        spec["volumes"] = volumes
    return spec


def _head_group(serving: ServingSettings, role_arn: pulumi.Input[str] | None,
                gcs_store: GcsStoreRef | None) -> dict[str, Any]:
    redis_ca = [{"name": REDIS_CA_CERT_ENV, "value": SYSTEM_CA_BUNDLE}] if gcs_store else []
    container: dict[str, Any] = {
        "name": HEAD_CONTAINER,
        "image": serving.image,
        "ports": [
            {"name": "gcs-server", "containerPort": GCS_PORT},
            {"name": "dashboard", "containerPort": DASHBOARD_PORT},
            {"name": "serve", "containerPort": SERVE_PORT},
            _metrics_port(),
        ],
        "env": [{"name": "HF_HOME", "value": HF_HOME}, *_hf_token_env(hf_token_ref(serving)),
                *_model_reader_env(role_arn, serving.region), *redis_ca, *_http_front_env(serving),
                *_front_door_env(serving)],
        "resources": {bound: dict(amounts) for bound, amounts in HEAD_RESOURCES.items()},
        # The head needs no privilege. Capabilities beyond NET_RAW stay: the default image (the Ray
        # LLM DLC) has a user not verified here (rayproject/ray images run as `ray`, uid 1000), and
        # a root user without DAC_OVERRIDE/CHOWN could not write where it expects.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}},
        "lifecycle": _ray_stop_on_termination(),
    }
    mounts = [*_hf_token_mounts(hf_token_ref(serving)), *_model_reader_mounts(role_arn), *_front_door_mounts(serving)]
    if mounts:
        container["volumeMounts"] = mounts
    volumes = [*_hf_token_volumes(hf_token_ref(serving)), *_front_door_volumes(serving)]
    if serving.autoscaling:
        volumes.append(_autoscaler_token_volume())
    return {
        # num-gpus "0": the head lands on a system node, and nothing GPU-bound may be scheduled there.
        # num-cpus "0": no Serve replica either (the OpenAI ingress would otherwise fit there): a
        # replica on the head dies with it, and while the head restarts nothing can replace it. The
        # controller and the proxy need no CPU reservation. KubeRay's RayService HA example does
        # the same (ray-service.high-availability.yaml).
        "rayStartParams": {"num-gpus": "0", "num-cpus": "0", "dashboard-host": "0.0.0.0",
                           METRICS_EXPORT_PORT_PARAM: str(METRICS_PORT)},
        "template": {
            "metadata": _head_metadata(serving),
            "spec": _pod_spec(SYSTEM_NODE_SELECTOR, container, [*volumes, *_model_reader_volumes(role_arn)],
                              service_account=MODEL_READER_SERVICE_ACCOUNT if role_arn is not None else None),
        },
    }


def serve_config_digest(serving: ServingSettings) -> str:
    """A short digest of the rendered serveConfigV2."""
    text = yaml.safe_dump(dict(serving.serve_config_v2), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _head_metadata(serving: ServingSettings) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": ray_pod_labels(serving.name)}
    if serving.updates.blue_green:
        # Part of the cluster spec KubeRay hashes: a serve-config change then starts a new cluster
        # beside the serving one instead of restarting its only replicas in place
        # (components/config/updates.py).
        metadata["annotations"] = {SERVE_CONFIG_DIGEST_ANNOTATION: serve_config_digest(serving)}
    return metadata


def _compile_cache_env(serving: ServingSettings, worker: WorkerResources) -> list[dict[str, Any]]:
    # One engine per node (one GPU): vLLM's compile cache on the node, so a restarted engine skips
    # torch.compile. Several engines on one node start, and compile, at once in this one pod, and
    # engines compiling at once must not share vLLM's cache directory (the H200 lab,
    # docs/PROVEN.md#serving-defaults): there the cache is off. With compileCacheInS3, Inductor's,
    # Triton's and FlashInfer's caches join vLLM's on the node, where the sidecar restores and saves them.
    if worker.gpus != 1:
        return [{"name": "VLLM_DISABLE_COMPILE_CACHE", "value": "1"}]
    if serving.ray_service.compile_cache_in_s3:
        return [*({"name": name, "value": f"{NODE_CACHE_MOUNT}/{directory}"}
                  for name, directory in compile_cache.CACHE_DIRECTORIES.items()),
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(compile_cache.NIXL_SIDE_CHANNEL_PORT)}]
    return [{"name": "VLLM_CACHE_ROOT", "value": NODE_VLLM_CACHE_ROOT}]


def phase_compile_cache_key(serving: ServingSettings, phase: Phase) -> str:
    """The key of `phase`'s compile caches: its GPU, the image's vLLM, the model and its rendered engine arguments."""
    return compile_cache.cache_key(
        gpu_model=serving.node_group(phase).instance.gpu_model or "none", vllm_version=serving.vllm_version,
        model_source=serving.app.config.model.model_source,
        engine_kwargs=serving.app.pd_serving_args[f"{phase}_config"]["engine_kwargs"])


def _compile_cache_sidecars(serving: ServingSettings, phase: Phase,
                            role_arn: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    mirror = serving.app.config.model.s3_mirror
    if not serving.ray_service.compile_cache_in_s3 or mirror is None:
        return []
    return [compile_cache.sidecar(
        image=serving.image, mount=NODE_CACHE_MOUNT, uri=compile_cache.cache_uri(*mirror),
        key=phase_compile_cache_key(serving, phase), env=_model_reader_env(role_arn, serving.region),
        volume_mounts=[{"name": "node-cache", "mountPath": NODE_CACHE_MOUNT}, *_model_reader_mounts(role_arn)])]


def bytecode_cache_dir(image: str) -> str:
    """The worker's Python bytecode cache on the node, one per image: a new image never reads bytecode
    compiled from another's sources, even where both sources carry the same size and time."""
    return f"{NODE_BYTECODE_CACHE}/{hashlib.sha256(image.encode()).hexdigest()[:16]}"


def _bytecode_cache_env(serving: ServingSettings) -> list[dict[str, Any]]:
    # The Ray LLM image ships no bytecode and sets PYTHONDONTWRITEBYTECODE (docs/SOURCES.md#ray-llm-dlc-image),
    # so each of a replica's processes compiles the serving stack from source again, 3-9 s each
    # (docs/PROVEN.md#serve-replica-start). Written once per node and image into the node cache instead
    # (an empty value lets Python write), every later process and restart on the node reads it.
    return [{"name": "PYTHONDONTWRITEBYTECODE", "value": ""},
            {"name": "PYTHONPYCACHEPREFIX", "value": bytecode_cache_dir(serving.image)}]


def _node_cache_init_container(serving: ServingSettings) -> dict[str, Any]:
    # The kubelet creates the host directory root-owned 0755; the image's user (not verified for the
    # default image) must write there. Sticky and world-writable, like /tmp: only root on the node
    # and pods of the serving namespace (the only one Pod Security lets mount a host path) reach it.
    # The Ray image itself, already on the node, so nothing more is pulled.
    directories = [NODE_HF_HOME, NODE_VLLM_CACHE_ROOT, bytecode_cache_dir(serving.image)]
    if serving.ray_service.compile_cache_in_s3:
        directories += [f"{NODE_CACHE_MOUNT}/{d}" for d in compile_cache.CACHE_DIRECTORIES.values()
                        if f"{NODE_CACHE_MOUNT}/{d}" not in directories]
    return {
        "name": NODE_CACHE_INIT_CONTAINER,
        "image": serving.image,
        "command": ["mkdir", "-p", "-m", "1777", *directories],
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "node-cache", "mountPath": NODE_CACHE_MOUNT}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
    }


def _autoscaler_token_volume() -> dict[str, Any]:
    """What automountServiceAccountToken would give every container, as a volume only the autoscaler
    sidecar mounts: a bound, hour-long token of the head pod's service account (KubeRay creates it
    with a Role limited to this namespace's pods and this RayCluster, common/rbac.go BuildRole),
    the cluster CA, and the namespace."""
    return {"name": AUTOSCALER_TOKEN_VOLUME, "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": AUTOSCALER_TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}}


def autoscaler_version(ray_version: str) -> str:
    """KubeRay's autoscalerOptions.version: v2 from the Ray release that runs it on KubeRay."""
    return "v2" if version_tuple(ray_version) >= version_tuple(RAY_AUTOSCALER_V2_ON_KUBERAY) else "v1"


def _autoscaler_options(serving: ServingSettings) -> dict[str, Any]:
    return {
        "version": autoscaler_version(serving.ray_version),
        "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
        # Add every pod Serve asks for at once: a GPU pod takes minutes to become a node.
        "upscalingMode": "Default",
        "volumeMounts": [{"name": AUTOSCALER_TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_MOUNT, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def _worker_container(serving: ServingSettings, sizing: WorkerResources,
                      role_arn: pulumi.Input[str] | None) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        # The image sets it too; stating it keeps libfabric on EFA if the image changes.
        {"name": "FI_PROVIDER", "value": "efa"},
        # vLLM/NIXL advertise this address to the peer engine; the pod IP is the one EFA can reach.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HF_HOME", "value": NODE_HF_HOME},
        *_bytecode_cache_env(serving),
        *_compile_cache_env(serving, sizing),
    ]
    if serving.hybrid_model:
        env.extend({"name": name, "value": value} for name, value in HYBRID_WORKER_ENV.items())
    env.extend(_hf_token_env(hf_token_ref(serving)))
    env.extend(_model_reader_env(role_arn, serving.region))
    env.extend(_http_front_env(serving))
    env.extend(_front_door_env(serving))
    return {
        "name": WORKER_CONTAINER,
        "image": serving.image,
        "ports": [_metrics_port()],
        "env": env,
        "resources": sizing.container_resources(),
        # Privileged only here: NIXL registers GPU memory with the EFA NIC (memory registration
        # through the device files the EFA plugin exposes); the reference found IPC_LOCK alone was
        # not enough. The namespace's Pod Security labels allow it in the serving namespace only.
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "dshm", "mountPath": SHM_MOUNT},
            {"name": "node-cache", "mountPath": NODE_CACHE_MOUNT},
            *_hf_token_mounts(hf_token_ref(serving)),
            *_model_reader_mounts(role_arn),
            *_front_door_mounts(serving),
        ],
        "lifecycle": _ray_stop_on_termination(),
    }


def _worker_volumes(serving: ServingSettings, node_group: GpuNodeGroupSpec,
                    role_arn: pulumi.Input[str] | None) -> list[dict[str, Any]]:
    return [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{node_group.worker.shm_gib}Gi"}},
        # A hostPath, not an emptyDir, so the cache outlives the pod: a recreated worker on the same
        # node downloads nothing and finds its compiled graphs. Acceptable here because the worker
        # is already privileged for EFA (a privileged container can reach every host path anyway)
        # and the serving namespace is the only one Pod Security lets mount host paths. What it
        # costs: nothing deletes or bounds it (no sizeLimit; the kubelet will not evict for it), so
        # a stale or corrupt file stays until the node goes, and a runaway download fills the
        # instance-store array that containerd and the kubelet share (disk pressure, evictions).
        # Hugging Face's cache is keyed by revision and resumes partial files, which keeps the first
        # risk small; the array is sized from the instance facts (components/node_storage.py).
        {"name": "node-cache", "hostPath": {"path": node_group.storage.cache_root, "type": "DirectoryOrCreate"}},
        *_hf_token_volumes(hf_token_ref(serving)),
        *_model_reader_volumes(role_arn),
        *_front_door_volumes(serving),
    ]


def _worker_group(serving: ServingSettings, phase: Phase, role_arn: pulumi.Input[str] | None) -> dict[str, Any]:
    # The phase's pods are sized for, and pinned to, the node group they run on (its own, if it has one).
    node_group = serving.node_group(phase)
    sizing = node_group.worker
    nodes = serving.app.nodes[phase]
    return {
        "groupName": WORKER_GROUP_NAMES[phase],
        # One pod per GPU node, as many as the phase's replicas need (serve_app.targets.phase_nodes):
        # fixed when Serve does not scale the phase, else the Ray autoscaler moves it between the bounds.
        "replicas": nodes.min_nodes,
        "minReplicas": nodes.min_nodes,
        "maxReplicas": nodes.max_nodes,
        "rayStartParams": {
            "num-gpus": str(sizing.gpus),
            "object-store-memory": str(sizing.object_store_gib * GIB),
            METRICS_EXPORT_PORT_PARAM: str(METRICS_PORT),
            # One unit per GPU: only this phase's engine bundles ask for it. Quoted for the shell
            # exactly as KubeRay 1.7.0 quotes its own `resources` (common/pod.go
            # updateRayStartParamsResources); KubeRay refuses the group's top-level `resources`
            # beside num-gpus (utils/validation.go validateRayGroupResources).
            "resources": "'" + json.dumps({PHASE_RESOURCE[phase]: sizing.gpus}, separators=(",", ":")) + "'",
        },
        "template": {
            "metadata": {
                "labels": {**ray_pod_labels(serving.name), PHASE_POD_LABEL: phase},
                "annotations": {SAFE_TO_EVICT_ANNOTATION: "false"},
            },
            "spec": _pod_spec(node_group.labels, _worker_container(serving, sizing, role_arn),
                              _worker_volumes(serving, node_group, role_arn), [dict(GPU_TOLERATION)],
                              service_account=MODEL_READER_SERVICE_ACCOUNT if role_arn is not None else None,
                              init_containers=[_node_cache_init_container(serving),
                                               *_compile_cache_sidecars(serving, phase, role_arn)]),
        },
    }


def _gcs_fault_tolerance(gcs_store: GcsStoreRef) -> dict[str, Any]:
    """KubeRay >= 1.3 gcsFaultToleranceOptions: it sets the head's RAY_REDIS_ADDRESS and
    --redis-password from these, and injects RAY_gcs_rpc_server_reconnect_timeout_s=600 into the
    workers so they outlive a head restart (KubeRay 1.7.0 controllers/ray/common/pod.go)."""
    return {
        "redisAddress": gcs_store.address,
        "redisPassword": {"valueFrom": {"secretKeyRef": {
            "name": gcs_store.password.name, "key": gcs_store.password.key}}},
    }


def ray_service_manifest(serving: ServingSettings, model_reader_role_arn: pulumi.Input[str] | None = None,
                         gcs_store: GcsStoreRef | None = None) -> dict[str, Any]:
    """The whole RayService object (ray.io/v1), ready for the API server or `kubectl apply`.
    `model_reader_role_arn`: the S3 mirror's role (components/model_access.py), given exactly when
    the model comes from one. `gcs_store`: where the GCS keeps its state when fault tolerance is on
    (None: in the head's memory)."""
    if (model_reader_role_arn is not None) != (serving.app.config.model.s3_mirror is not None):
        raise ValueError("a model reader role is given exactly when the model comes from an S3 mirror")
    return {
        "apiVersion": RAY_SERVICE_API_VERSION,
        "kind": RAY_SERVICE_KIND,
        "metadata": {
            "name": serving.name,
            "namespace": serving.namespace,
            "annotations": {INITIALIZING_TIMEOUT_ANNOTATION: serving.initializing_timeout},
        },
        "spec": {
            "upgradeStrategy": {"type": serving.upgrade_strategy},
            **_deletion_delay(serving),
            "serveConfigV2": yaml.safe_dump(dict(serving.serve_config_v2), sort_keys=False),
            "rayClusterConfig": _ray_cluster_config(serving, model_reader_role_arn, gcs_store),
        },
    }


def _deletion_delay(serving: ServingSettings) -> dict[str, Any]:
    """After a blue/green switch the old cluster keeps serving the streams it holds (the serve Service
    sends new connections to the new cluster only): keep it as long as the longest stream."""
    if not serving.updates.blue_green:
        return {}
    return {"rayClusterDeletionDelaySeconds": serving.updates.drain_seconds}


def _ray_cluster_config(serving: ServingSettings, role_arn: pulumi.Input[str] | None,
                        gcs_store: GcsStoreRef | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "rayVersion": serving.ray_version,
        # Off while both phases are fixed: no autoscaler sidecar, no token anywhere in the pods.
        "enableInTreeAutoscaling": serving.autoscaling,
    }
    if serving.autoscaling:
        config["autoscalerOptions"] = _autoscaler_options(serving)
    if gcs_store is not None:
        config["gcsFaultToleranceOptions"] = _gcs_fault_tolerance(gcs_store)
    config["headGroupSpec"] = _head_group(serving, role_arn, gcs_store)
    config["workerGroupSpecs"] = [_worker_group(serving, phase, role_arn) for phase in PHASES]
    return config

