"""The RayService (ray.io/v1) of a stack's validated `ServingSettings`, as plain data.

It follows the reference deployment (docs/SOURCES.md#reference-deployment): a CPU-only head on the
system nodes and one worker group with one pod per GPU node, holding all that node's GPUs and EFA
interfaces, sized by `components.sizing`. The serveConfigV2 is the one `serve_app` rendered when the
app was checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from components.scheduling import GPU_NODE_SELECTOR, GPU_TOLERATION, SYSTEM_NODE_SELECTOR
from components.settings import INITIALIZING_TIMEOUT_ANNOTATION, ServingSettings
from components.sizing import GIB
from facts.metrics import RAY_METRICS_EXPORT_PORT, RAY_METRICS_PORT_NAME
from serve_app.render import SERVE_HTTP_PORT

RAY_SERVICE_API_VERSION = "ray.io/v1"
RAY_SERVICE_KIND = "RayService"

HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"
WORKER_GROUP_NAME = "gpu-workers"

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

HF_TOKEN_MOUNT = "/var/run/secrets/huggingface"
HF_TOKEN_FILE = "token"
HF_TOKEN_SECRET_NAME = "hf-token"
HF_TOKEN_SECRET_KEY = "token"


@dataclass(frozen=True)
class SecretKeyRef:
    """A key in a Kubernetes Secret, referenced from a pod's env (the value never enters the manifest)."""

    name: str
    key: str


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


def _head_group(serving: ServingSettings) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": HEAD_CONTAINER,
        "image": serving.image,
        "ports": [
            {"name": "gcs-server", "containerPort": GCS_PORT},
            {"name": "dashboard", "containerPort": DASHBOARD_PORT},
            {"name": "serve", "containerPort": SERVE_PORT},
            _metrics_port(),
        ],
        "env": [{"name": "HF_HOME", "value": HF_HOME}, *_hf_token_env(hf_token_ref(serving))],
        "resources": {bound: dict(amounts) for bound, amounts in HEAD_RESOURCES.items()},
        # The head needs no privilege. Capabilities beyond NET_RAW stay: the default image (the Ray
        # LLM DLC) has a user not verified here (rayproject/ray images run as `ray`, uid 1000), and
        # a root user without DAC_OVERRIDE/CHOWN could not write where it expects.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["NET_RAW"]}},
        "lifecycle": _ray_stop_on_termination(),
    }
    mounts = _hf_token_mounts(hf_token_ref(serving))
    if mounts:
        container["volumeMounts"] = mounts
    return {
        # num-gpus "0": the head lands on a system node, and nothing GPU-bound may be scheduled there.
        "rayStartParams": {"num-gpus": "0", "dashboard-host": "0.0.0.0",
                           METRICS_EXPORT_PORT_PARAM: str(METRICS_PORT)},
        "template": {
            "metadata": {"labels": ray_pod_labels(serving.name)},
            "spec": _pod_spec(SYSTEM_NODE_SELECTOR, container, _hf_token_volumes(hf_token_ref(serving))),
        },
    }


def _worker_group(serving: ServingSettings) -> dict[str, Any]:
    sizing = serving.worker
    env: list[dict[str, Any]] = [
        # The image sets it too; stating it keeps libfabric on EFA if the image changes.
        {"name": "FI_PROVIDER", "value": "efa"},
        # vLLM/NIXL advertise this address to the peer engine; the pod IP is the one EFA can reach.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HF_HOME", "value": HF_HOME},
    ]
    if serving.hybrid_model:
        env.append({"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"})
    env.extend(_hf_token_env(hf_token_ref(serving)))
    container = {
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
            {"name": "hf-cache", "mountPath": HF_HOME},
            *_hf_token_mounts(hf_token_ref(serving)),
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
        *_hf_token_volumes(hf_token_ref(serving)),
    ]
    return {
        "groupName": WORKER_GROUP_NAME,
        # Fixed size: one worker per GPU node; the node group does not scale either.
        "replicas": serving.gpu_node_count,
        "minReplicas": serving.gpu_node_count,
        "maxReplicas": serving.gpu_node_count,
        "rayStartParams": {
            "num-gpus": str(sizing.gpus),
            "object-store-memory": str(sizing.object_store_gib * GIB),
            METRICS_EXPORT_PORT_PARAM: str(METRICS_PORT),
        },
        "template": {
            "metadata": {"labels": ray_pod_labels(serving.name)},
            "spec": _pod_spec(GPU_NODE_SELECTOR, container, volumes, [dict(GPU_TOLERATION)]),
        },
    }



def ray_service_manifest(serving: ServingSettings) -> dict[str, Any]:
    """The whole RayService object (ray.io/v1), ready for the API server or `kubectl apply`."""
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
            "serveConfigV2": yaml.safe_dump(dict(serving.serve_config_v2), sort_keys=False),
            "rayClusterConfig": {
                "rayVersion": serving.ray_version,
                "headGroupSpec": _head_group(serving),
                "workerGroupSpecs": [_worker_group(serving)],
            },
        },
    }

