"""The front door's network part: the AWS Load Balancer Controller (pinned Helm chart, its own IRSA
role with AWS's published policy, which the bootstrap makes) and the Service it turns into a Network
Load Balancer in front of the Serve proxies. Keys, limits and accounting live in the ingress (front_door/,
components/inference.py mounts them); this component only makes the endpoint reachable. docs/FRONT_DOOR.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies, helm_release
from components.cluster import Cluster, attach_workload_policy, bounded_role
from components.config.front_door import FrontDoor
from components.config.serving import ServingSettings
from components.manifests.front_door import (
    LOAD_BALANCER_CONTROLLER_NAMESPACE,
    LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
    door_service_manifest,
    load_balancer_controller_values,
)
from components.storage import irsa_trust_policy
from facts.charts import AWS_LOAD_BALANCER_CONTROLLER

# The controller's IAM policy as its project publishes it for this release (docs/SOURCES.md#front-door),
# made by the bootstrap for each cluster (bootstrap/deploy_permissions/workload_policies.py).
LOAD_BALANCER_CONTROLLER_POLICY = "load-balancer-controller"


@dataclass(frozen=True)
class FrontDoorArgs:
    """Inputs of `FrontDoorNetwork`.

    cluster: the cluster (its provider, OIDC provider, name, permissions boundary).
    door: the validated front door settings (enabled).
    serving: the serving settings (namespace, RayService name).
    ray_service: the RayService whose Serve proxies the Service selects; `pulumi up` waits for it to be
        Ready (components/inference.py) before creating the Service.
    region, vpc_id, vpc_cidr: where the load balancer goes and whom an internal door admits by default.
    """

    cluster: Cluster
    door: FrontDoor
    serving: ServingSettings
    ray_service: pulumi.Resource
    cluster_name: str
    region: str
    vpc_id: pulumi.Input[str]
    vpc_cidr: str


class FrontDoorNetwork(pulumi.ComponentResource):
    """Load Balancer Controller (IRSA role + Helm release on the system nodes), then the NLB Service.
    Pass the system nodes and the serving namespace in `opts.depends_on`."""

    hostname: pulumi.Output[str]

    def __init__(self, name: str, args: FrontDoorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:network:FrontDoor", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster = args.cluster
        self.role, _ = bounded_role(
            f"{name}-controller-role",
            description=f"AWS Load Balancer Controller of EKS cluster {args.cluster_name}: the front door's NLB",
            assume_role_policy=pulumi.Output.all(cluster.oidc_provider_arn, cluster.oidc_issuer).apply(
                lambda values: irsa_trust_policy(values[0], values[1], (
                    f"system:serviceaccount:{LOAD_BALANCER_CONTROLLER_NAMESPACE}:"
                    f"{LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT}"))),
            managed_policies=(), permissions_boundary=cluster.permissions_boundary, partition="aws", tags=cluster.tags,
            trusts_the_cluster=True, opts=child)
        self.policy = attach_workload_policy(f"{name}-controller-policy", self.role, args.cluster_name,
                                             LOAD_BALANCER_CONTROLLER_POLICY, child)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        self.controller = helm_release(
            f"{name}-controller", AWS_LOAD_BALANCER_CONTROLLER, AWS_LOAD_BALANCER_CONTROLLER.default_version,
            LOAD_BALANCER_CONTROLLER_NAMESPACE,
            load_balancer_controller_values(args.cluster_name, args.region, args.vpc_id, self.role.arn),
            pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                depends_on=[self.policy, *explicit_dependencies(opts)])))
        body = door_service_manifest(args.serving, args.door, args.vpc_cidr)
        # After the controller, which alone provisions Services of the NLB class, and after the RayService
        # is Ready: Pulumi waits at most 10 minutes for a Service's endpoints, which before the Serve
        # proxies run (a first model load takes longer) would fail the update.
        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=body["metadata"], spec=body["spec"],
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(
                depends_on=[self.controller, args.ray_service, *explicit_dependencies(opts)])))
        for note in args.door.notes:  # `pulumi preview` lists them under Diagnostics, as info
            pulumi.log.info(note, resource=self)
        self.hostname = self.service.status.apply(_hostname)
        self.register_outputs({"hostname": self.hostname})


def _hostname(status: object) -> str:
    ingress = getattr(getattr(status, "load_balancer", None), "ingress", None) or []
    return (getattr(ingress[0], "hostname", None) or "") if ingress else ""
