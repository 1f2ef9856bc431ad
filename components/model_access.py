"""An AWS identity for the Ray pods that may read one S3 model mirror (bucket + prefix) and nothing else.

IRSA (IAM roles for service accounts, docs/SOURCES.md#irsa), not EKS Pod Identity:
- the cluster already has its OIDC provider (components/cluster.py), so IRSA adds one IAM role and
  one ServiceAccount; Pod Identity would add the eks-pod-identity-agent add-on, a DaemonSet on every
  node (the GPU nodes included, one more thing between a new node and serving);
- the loader is the Run:ai Model Streamer's own S3 client inside the image; every AWS SDK reads a web
  identity token (AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE), while Pod Identity's container
  credentials need SDK releases we cannot check inside an image we do not build.
The token is a projected ServiceAccount token with the STS audience, mounted by the pod template
itself (components/manifests/ray_service.py) rather than by EKS's mutating webhook: the pods keep
`automountServiceAccountToken: false`, and a token for audience sts.amazonaws.com cannot call the
Kubernetes API. The trust policy accepts exactly that ServiceAccount in the serving namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.cluster import attach_workload_policy, bounded_role
from components.manifests.ray_service import MODEL_READER_SERVICE_ACCOUNT
from components.storage import irsa_trust_policy

# The bootstrap's policies for a cluster's S3 mirror (bootstrap/deploy_permissions/workload_policies.py):
# read and list the model's prefix; read, list and write its compile-cache archives (components/compile_cache.py).
MODEL_READER_POLICY = "model-reader"
COMPILE_CACHE_POLICY = "compile-cache"


def model_reader_subject(namespace: str) -> str:
    """The one subject the role trusts: the model-reader ServiceAccount of the serving namespace."""
    return f"system:serviceaccount:{namespace}:{MODEL_READER_SERVICE_ACCOUNT}"


@dataclass(frozen=True)
class ModelReadAccessArgs:
    """Inputs of `ModelReadAccess`.

    bucket, prefix: the mirror (`modelSource` s3://bucket/prefix, validated).
    cluster_name: the cluster whose bootstrap-made policies (for this mirror) the role gets.
    namespace: the serving namespace whose model-reader ServiceAccount assumes the role.
    oidc_provider_arn, oidc_issuer: the cluster's IAM OIDC provider and its issuer (host/path).
    permissions_boundary: the boundary of every role the stack creates (iamPermissionsBoundaryArn),
      None for none; the role goes under the stack's role path either way.
    tags: the stack's tags (the cluster's), which every role of the stack carries.
    """

    bucket: str
    prefix: str
    cluster_name: str
    namespace: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    permissions_boundary: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    compile_cache: bool = False  # compileCacheInS3: the pods also keep compile caches in the bucket


class ModelReadAccess(pulumi.ComponentResource):
    """The IAM role the Ray pods assume to stream the model from its S3 mirror."""

    role: aws.iam.Role
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ModelReadAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:access:ModelReadAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Under the stack's role path and permissions boundary, like every role of the stack; its policies
        # are the bootstrap's for this cluster's mirror (deployModelSources), which the stack attaches.
        self.role, _ = bounded_role(
            f"{name}-role",
            description=f"Ray pods of {args.namespace}: read s3://{args.bucket}/{args.prefix}",
            assume_role_policy=pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
                lambda values: irsa_trust_policy(values[0], values[1], model_reader_subject(args.namespace))),
            managed_policies=(), permissions_boundary=args.permissions_boundary, partition="aws", tags=dict(args.tags),
            trusts_the_cluster=True, opts=child,
        )
        attach_workload_policy(f"{name}-read", self.role, args.cluster_name, MODEL_READER_POLICY, child)
        if args.compile_cache:
            attach_workload_policy(f"{name}-compile-cache", self.role, args.cluster_name, COMPILE_CACHE_POLICY, child)
        self.role_arn = self.role.arn
        self.register_outputs({"role_arn": self.role_arn})
