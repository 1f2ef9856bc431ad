"""The front door's Kubernetes objects as plain data: the Network Load Balancer Service in front of the
Serve proxies and the AWS Load Balancer Controller's Helm values (what the Ray pods mount of it:
components/manifests/ray_service.py). docs/FRONT_DOOR.md."""

from __future__ import annotations

from typing import Any

from components.config.front_door import FrontDoor
from components.config.serving import ServingSettings
from components.manifests.ray_service import SERVE_PORT, ray_pod_labels
from components.scheduling import SYSTEM_NODE_SELECTOR

# KubeRay labels each RayService pod whose Serve proxy may take traffic (the head once its proxy is
# healthy, every worker): the selector of its own serve Service (KubeRay 1.7.0 common/service.go
# BuildServeService, common/pod.go BuildPod). docs/SOURCES.md#front-door.
SERVING_POD_LABEL = {"ray.io/serve": "true"}
# The AWS Load Balancer Controller provisions an NLB for a Service of this class, with pod IPs as
# targets (docs/SOURCES.md#front-door).
NLB_CLASS = "service.k8s.aws/nlb"
ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-"
LOAD_BALANCER_CONTROLLER_NAMESPACE = "kube-system"
LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"


def door_service_name(serving: ServingSettings) -> str:
    return f"{serving.name}-door"


def door_service_manifest(serving: ServingSettings, door: FrontDoor, vpc_cidr: str) -> dict[str, Any]:
    """The Service the controller turns into an NLB: internal or internet-facing, open to the allowed
    CIDRs only (the VPC's by default), TLS on 443 when a certificate is set, else TCP on 80."""
    settings = door.settings
    annotations = {
        f"{ANNOTATION}scheme": settings.scheme,
        f"{ANNOTATION}nlb-target-type": "ip",
        # The proxies answer health checks on Serve's own route (also while the app deploys).
        f"{ANNOTATION}healthcheck-protocol": "http",
        f"{ANNOTATION}healthcheck-path": "/-/healthz",
    }
    if door.tls:
        annotations |= {f"{ANNOTATION}ssl-cert": settings.certificate_arn, f"{ANNOTATION}ssl-ports": str(door.port),
                        f"{ANNOTATION}ssl-negotiation-policy": "ELBSecurityPolicy-TLS13-1-2-2021-06"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": door_service_name(serving), "namespace": serving.namespace, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": NLB_CLASS,
            "selector": {**ray_pod_labels(serving.name), **SERVING_POD_LABEL},
            "ports": [{"name": "https" if door.tls else "http", "port": door.port, "targetPort": SERVE_PORT,
                       "protocol": "TCP"}],
            "loadBalancerSourceRanges": list(settings.allowed_cidrs or (vpc_cidr,)),
        },
    }


def load_balancer_controller_values(cluster_name: str, region: str, vpc_id: Any, role_arn: Any) -> dict[str, Any]:
    """Helm values: the cluster it serves, where (no instance metadata lookups), its IRSA role, on the
    system nodes, without the Service mutator webhook."""
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"name": LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
                           "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        # One system node: two replicas would only wait for a second one.
        "replicaCount": 1,
        # The chart's Service webhook sees every Service of the cluster and fails closed: while its one
        # replica is not Ready, no Service can be created (KubeRay's and Prometheus' atomic releases
        # included). It only sets loadBalancerClass, which the door's Service sets itself
        # (docs/SOURCES.md#lbc-service-webhook).
        "enableServiceMutatorWebhook": False,
    }
