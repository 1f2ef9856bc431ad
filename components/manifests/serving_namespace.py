"""The serving namespace (the only one that admits the privileged EFA workers), the operator's
namespace, and the NetworkPolicies that close the Ray ports, as plain data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.config.serving import ServingSettings
from components.manifests.ray_service import DASHBOARD_PORT, METRICS_PORT, SERVE_PORT, ray_pod_labels
from components.scheduling import KUBERAY_NAMESPACE, MONITORING_NAMESPACE, SCRAPER_POD_LABELS

POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")


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
    return namespace_manifest(name, "privileged")


def kuberay_namespace_manifest() -> dict[str, Any]:
    """The operator's namespace: its pod already meets `restricted`, and nothing privileged belongs beside it."""
    return namespace_manifest(KUBERAY_NAMESPACE, "restricted")



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


def serving_network_policies(serving: ServingSettings) -> dict[str, dict[str, Any]]:
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
    - `metrics-scraper`: the stack's Prometheus pods (their label, in the monitoring namespace) to
      the Ray metrics export port on head and workers, nothing else.

    Needs no rule: kubelet probes (the VPC CNI's policy agent always admits the node's own IP,
    aws-network-policy-agent#65) and `kubectl port-forward` (it connects on the pod's localhost).
    KV transfer over EFA (SRD) bypasses the kernel and is not filtered. Egress stays open: workers
    download the model and pull images. Enforced only because the cluster enables the VPC CNI's
    network policy agent (components/cluster.py).
    """
    ray_pods = ray_pod_labels(serving.name)
    namespace = serving.namespace
    return {
        DEFAULT_DENY_INGRESS_POLICY: _network_policy(DEFAULT_DENY_INGRESS_POLICY, namespace, {}, []),
        "ray-internal": _network_policy(
            f"{serving.name}-ray-internal", namespace, ray_pods,
            [{"from": [{"podSelector": {"matchLabels": ray_pods}}]}]),
        "serve": _network_policy(f"{serving.name}-serve", namespace, ray_pods, [{"ports": _tcp_ports(SERVE_PORT)}]),
        "kuberay-operator": _network_policy(f"{serving.name}-kuberay-operator", namespace, ray_pods, [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: KUBERAY_NAMESPACE}}}],
            "ports": _tcp_ports(DASHBOARD_PORT, SERVE_PORT),
        }]),
        "metrics-scraper": _network_policy(f"{serving.name}-metrics-scraper", namespace, ray_pods, [{
            # One peer with both selectors: pods with the scraper label *in* the monitoring namespace.
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}},
                      "podSelector": {"matchLabels": dict(SCRAPER_POD_LABELS)}}],
            "ports": _tcp_ports(METRICS_PORT),
        }]),
    }

