"""Expected create time per Pulumi resource type, in minutes, for the deploy critical path.

Sources, read 2026-11:
- The reference deployment (AWS sample for the Ray LLM Deep Learning Container; see
  docs/SOURCES.md#reference-timings) timed its own steps: EKS cluster 15–20 min, GPU node group 3–5 min
  (its blog says 5–20), KubeRay operator 1–2 min, RayService "several minutes", plus the first
  model load of about 145 s (about 2 s on a restart once the page cache holds the checkpoint).
- Everything else is this project's estimate from the AWS control-plane behaviour of each API
  (NAT gateways become `available` in one to a few minutes; IAM, VPC pieces, security groups,
  launch templates and Kubernetes objects are accepted in seconds). They are marked `estimate`.

Each figure is the middle of its range: the plan reports expected minutes, not a worst case.
Revisit when a measured `pulumi up` disagrees: a measurement wins over these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CreateDuration:
    minutes: float
    source: str


REFERENCE = "reference timing"  # the reference deployment's own measurement (docs/SOURCES.md#reference-timings)
ESTIMATE = "estimate"  # this project's reading of the API's behaviour; not measured

FIRST_MODEL_LOAD_MINUTES = 145 / 60
# "several minutes" for the RayService to become RUNNING (head + worker pods scheduled, the
# multi-GB image pulled, Serve applications deployed), read as 5, plus the first model load.
RAY_SERVICE_MINUTES = 5 + FIRST_MODEL_LOAD_MINUTES

DURATIONS: dict[str, CreateDuration] = {
    # EKS control plane: 15–20 min in the reference (eksctl create cluster).
    "eks:index:Cluster": CreateDuration(17.5, REFERENCE),
    "aws:eks/cluster:Cluster": CreateDuration(17.5, REFERENCE),
    # Managed node group until nodes are Ready: 3–5 min in the reference.
    "eks:index:ManagedNodeGroup": CreateDuration(4.0, REFERENCE),
    "aws:eks/nodeGroup:NodeGroup": CreateDuration(4.0, REFERENCE),
    # Helm releases (KubeRay operator: 1–2 min in the reference; the device plugin charts are
    # DaemonSets of the same weight).
    "kubernetes:helm.sh/v3:Release": CreateDuration(1.5, REFERENCE),
    "kubernetes:helm.sh/v4:Chart": CreateDuration(1.5, REFERENCE),
    # RayService: "several minutes" + first model load ~145 s.
    "kubernetes:ray.io/v1:RayService": CreateDuration(RAY_SERVICE_MINUTES, REFERENCE),
    # Managed add-ons (vpc-cni, coredns, kube-proxy) take a minute or two each.
    "aws:eks/addon:Addon": CreateDuration(1.5, ESTIMATE),
    "aws:ec2/natGateway:NatGateway": CreateDuration(2.0, ESTIMATE),
    "aws:kms/key:Key": CreateDuration(0.3, ESTIMATE),
    "aws:iam/role:Role": CreateDuration(0.2, ESTIMATE),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": CreateDuration(0.2, ESTIMATE),
    "aws:ec2/vpc:Vpc": CreateDuration(0.2, ESTIMATE),
    "aws:ec2/eip:Eip": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/launchTemplate:LaunchTemplate": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/placementGroup:PlacementGroup": CreateDuration(0.1, ESTIMATE),
    "aws:ec2/securityGroup:SecurityGroup": CreateDuration(0.1, ESTIMATE),
}

# Any other custom resource (subnets, routes, rules, attachments, Namespaces, Secrets, ...):
# the API accepts it in seconds.
DEFAULT_CUSTOM = CreateDuration(0.1, ESTIMATE)
# Local component resources and providers do nothing in the cloud themselves.
NO_WORK = CreateDuration(0.0, "no cloud call")


def create_duration(resource_type: str, *, custom: bool) -> CreateDuration:
    """Expected create time of one resource of `resource_type`.

    Listed types win over `custom`: pulumi-eks `Cluster`/`ManagedNodeGroup` are remote components
    (custom=False, no children under mocks) yet they are where the cloud time goes.
    """
    listed = DURATIONS.get(resource_type)
    if listed is not None:
        return listed
    if not custom or resource_type.startswith("pulumi:providers:"):
        return NO_WORK
    return DEFAULT_CUSTOM
