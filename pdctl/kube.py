"""Read a running stack's state from Kubernetes: RayService status, pods, nodes, NIXL transport.

I/O goes through the official `kubernetes` client with the stack's kubeconfig; every API object is
read as the raw JSON the API server sends (`_preload_content=False`), so the pure functions below
work on plain dicts — the same shape as `kubectl get -o json` and the test fixtures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from components.scheduling import EFA_RESOURCE, GPU_RESOURCE, GPU_ROLE, ROLE_LABEL

RAY_GROUP, RAY_VERSION, RAY_SERVICES = "ray.io", "v1", "rayservices"
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_GROUP_LABEL = "ray.io/group"
RAY_CONTAINER = "ray-worker"  # KubeRay's default; the first container is used when absent
# Where Ray writes actor (vLLM engine) output inside a pod: `kubectl logs` only shows `ray start`.
RAY_LOG_GLOB = "/tmp/ray/session_latest/logs/*.out /tmp/ray/session_latest/logs/*.err"

# NIXL's Python agent logs "Backend <NAME> was instantiated" for each backend it creates
# (nixl/_api.py `create_backend`); vLLM's NixlConnector creates exactly the configured ones.
NIXL_BACKEND_LINE = re.compile(r"Backend (?P<backend>[A-Z_]+) was instantiated")


# ---------------------------------------------------------------- pure: status

@dataclass(frozen=True)
class ApplicationStatus:
    name: str
    status: str
    message: str
    deployments: dict[str, str]  # deployment name -> status


@dataclass(frozen=True)
class RayServiceStatus:
    name: str
    ready: str  # the Ready condition's status ("True"/"False"/"Unknown"), or the legacy serviceStatus
    reason: str
    ray_cluster: str | None
    applications: list[ApplicationStatus]

    @property
    def is_ready(self) -> bool:
        # KubeRay ≥ 1.3 reports a Ready condition; older operators only serviceStatus "Running".
        return self.ready in ("True", "Running")


@dataclass(frozen=True)
class PodRow:
    name: str
    phase: str
    ready: bool
    node: str | None
    ray_node_type: str | None
    ray_group: str | None
    restarts: int


@dataclass(frozen=True)
class NodeRow:
    name: str
    role: str | None
    instance_type: str | None
    zone: str | None
    ready: bool
    gpu_allocatable: int
    efa_allocatable: int


def ray_service_status(obj: dict) -> RayServiceStatus:
    status = obj.get("status") or {}
    ready_condition = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None
    )
    if ready_condition is not None:
        ready, reason = ready_condition.get("status", "Unknown"), ready_condition.get("reason", "")
    else:
        ready, reason = status.get("serviceStatus", "Unknown") or "Unknown", ""
    active = status.get("activeServiceStatus") or {}
    pending = status.get("pendingServiceStatus") or {}
    # While the first cluster comes up, only the pending side has applications.
    side = active if active.get("applicationStatuses") else pending
    apps = [
        ApplicationStatus(
            name=name,
            status=app.get("status", ""),
            message=app.get("message", ""),
            deployments={d: s.get("status", "") for d, s in (app.get("serveDeploymentStatuses") or {}).items()},
        )
        for name, app in sorted((side.get("applicationStatuses") or {}).items())
    ]
    return RayServiceStatus(
        name=obj["metadata"]["name"], ready=ready, reason=reason,
        ray_cluster=active.get("rayClusterName") or pending.get("rayClusterName"),
        applications=apps,
    )


def pod_rows(pod_list: dict) -> list[PodRow]:
    rows = []
    for pod in pod_list.get("items", []):
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        containers = status.get("containerStatuses") or []
        rows.append(PodRow(
            name=meta["name"],
            phase=status.get("phase", "Unknown"),
            ready=bool(containers) and all(c.get("ready") for c in containers),
            node=spec.get("nodeName"),
            ray_node_type=labels.get(RAY_NODE_TYPE_LABEL),
            ray_group=labels.get(RAY_GROUP_LABEL),
            restarts=sum(int(c.get("restartCount", 0)) for c in containers),
        ))
    return sorted(rows, key=lambda r: (r.ray_node_type != "head", r.name))


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_rows(node_list: dict) -> list[NodeRow]:
    rows = []
    for node in node_list.get("items", []):
        labels = node["metadata"].get("labels") or {}
        status = node.get("status") or {}
        allocatable = status.get("allocatable") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        rows.append(NodeRow(
            name=node["metadata"]["name"],
            role=labels.get(ROLE_LABEL),
            instance_type=labels.get("node.kubernetes.io/instance-type"),
            zone=labels.get("topology.kubernetes.io/zone"),
            ready=ready,
            gpu_allocatable=_quantity(allocatable.get(GPU_RESOURCE, 0)),
            efa_allocatable=_quantity(allocatable.get(EFA_RESOURCE, 0)),
        ))
    return sorted(rows, key=lambda r: (r.role or "", r.name))


def node_warnings(nodes: Iterable[NodeRow]) -> list[str]:
    """GPU nodes that cannot take a Ray worker: each worker needs one GPU and one EFA device,
    advertised only once the NVIDIA and EFA device plugins run on the node."""
    warnings = []
    for node in nodes:
        if node.role != GPU_ROLE:
            continue
        if not node.ready:
            warnings.append(f"{node.name}: not Ready")
        if node.gpu_allocatable < 1:
            warnings.append(f"{node.name}: no allocatable {GPU_RESOURCE} (NVIDIA device plugin not running?)")
        if node.efa_allocatable < 1:
            warnings.append(f"{node.name}: no allocatable {EFA_RESOURCE} (EFA device plugin not running, "
                            "or the node has no EFA interface?)")
    return warnings


# ---------------------------------------------------------------- pure: transport

@dataclass(frozen=True)
class PodTransport:
    pod: str
    backends: list[str]  # NIXL backends the pod's engines instantiated, in log order, unique
    evidence: list[str] = field(default_factory=list)


def nixl_backends_in(log_text: str) -> tuple[list[str], list[str]]:
    """(backends instantiated, the log lines that say so) found in one pod's logs."""
    backends: list[str] = []
    evidence: list[str] = []
    for line in log_text.splitlines():
        match = NIXL_BACKEND_LINE.search(line)
        if match:
            evidence.append(line.strip())
            if match["backend"] not in backends:
                backends.append(match["backend"])
    return backends, evidence


def transport_problems(pods: Iterable[PodTransport], expected: str = "LIBFABRIC") -> list[str]:
    """Why the KV transfer is not on `expected`, one line per pod; empty when every pod is fine."""
    problems = []
    for pod in pods:
        if not pod.backends:
            problems.append(f"{pod.pod}: no NIXL backend line found in its logs")
        elif expected not in pod.backends:
            problems.append(
                f"{pod.pod}: NIXL instantiated {', '.join(pod.backends)}, not {expected}"
                + (" (UCX on EFA runs at TCP-like speed and fails silently)" if "UCX" in pod.backends else "")
            )
        elif "UCX" in pod.backends and expected != "UCX":
            problems.append(f"{pod.pod}: NIXL instantiated UCX next to {expected}; transfers may pick UCX")
    return problems


# ---------------------------------------------------------------- I/O

class KubeReader:
    """Thin wrapper over the kubernetes client: each method returns raw API JSON."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None):
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=kubeconfig, context=context)
        self.api_client = api_client  # for writers built on the same connection (pdctl.bench_job)
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)

    @staticmethod
    def _json(response) -> dict:
        return json.loads(response.data)

    def ray_service(self, namespace: str, name: str) -> dict:
        return self._json(self._custom.get_namespaced_custom_object(
            RAY_GROUP, RAY_VERSION, namespace, RAY_SERVICES, name, _preload_content=False))

    def pods(self, namespace: str, label_selector: str | None = None) -> dict:
        return self._json(self._core.list_namespaced_pod(
            namespace, label_selector=label_selector or None, _preload_content=False))

    def nodes(self) -> dict:
        return self._json(self._core.list_node(_preload_content=False))

    def pod_log(self, namespace: str, pod: str, container: str | None) -> str:
        # Not preloaded, the client returns the raw urllib3 response, whatever its annotation says.
        response: Any = self._core.read_namespaced_pod_log(
            pod, namespace, container=container or None, _preload_content=False)
        return response.data.decode("utf-8", errors="replace")

    def grep_ray_logs(self, namespace: str, pod: str, container: str | None) -> str:
        """NIXL lines from Ray's log files inside the pod (exec over the API's websocket)."""
        from kubernetes.stream import stream

        command = ["sh", "-c", f"grep -h 'NIXL' {RAY_LOG_GLOB} 2>/dev/null || true"]
        kwargs = {"container": container} if container else {}
        return stream(self._core.connect_get_namespaced_pod_exec, pod, namespace, command=command,
                      stderr=True, stdin=False, stdout=True, tty=False, **kwargs)


def worker_pods(reader: KubeReader, namespace: str, ray_cluster: str | None) -> list[dict]:
    selector = f"{RAY_NODE_TYPE_LABEL}=worker"
    if ray_cluster:
        selector += f",{RAY_CLUSTER_LABEL}={ray_cluster}"
    return reader.pods(namespace, selector).get("items", [])


def worker_container(pod: dict) -> str | None:
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers", [])]
    if RAY_CONTAINER in names:
        return RAY_CONTAINER
    return names[0] if names else None


def pod_transport(reader: KubeReader, namespace: str, pod: dict, *, exec_fallback: bool) -> PodTransport:
    name, container = pod["metadata"]["name"], worker_container(pod)
    backends, evidence = nixl_backends_in(reader.pod_log(namespace, name, container))
    if not backends and exec_fallback:
        backends, evidence = nixl_backends_in(reader.grep_ray_logs(namespace, name, container))
    return PodTransport(pod=name, backends=backends, evidence=evidence)
