"""The stack workloads' own policies: customer managed policies the bootstrap makes for each environment's
cluster and the stack attaches to its IRSA roles by ARN (components/cluster.py `workload_policy_arn`).

Made here, not by the stack, so that the deploy role writes no policy: it may attach these and the AWS
managed policies of ATTACHABLE_MANAGED_POLICIES, nothing else (iam:PolicyARN,
docs/SOURCES.md#iam-workload-policies). As the cluster's creator
it can run pods under the stack's service accounts; a policy it wrote on one of their roles would reach
everything the workload boundary allows, one of these reaches what that workload has by design.

Each document is built from what the bootstrap knows before any `pulumi up`: the cluster's name
(`deployClusters`) and, for the model reader, the stack's `modelSource` (`deployModelSources`). The
Cluster Autoscaler's node groups are named by the stack (`<cluster>-gpu-<8 hex>`, a digest of what
forces a new group), so its resizing is granted by that name pattern on its own cluster's groups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .boundary import CLUSTER_AUTOSCALER_READ_ACTIONS, CLUSTER_AUTOSCALER_WRITE_ACTIONS, S3_BUCKET_NAME
from .naming import ROLE_PATH, iam_arn

# The AWS Load Balancer Controller's policy as its project publishes it for the release the chart pins
# (facts/charts.py AWS_LOAD_BALANCER_CONTROLLER; docs/SOURCES.md#front-door), kept unmodified.
LOAD_BALANCER_CONTROLLER_POLICY_FILE = Path(__file__).resolve().parents[1] / "aws_load_balancer_controller_policy.json"

# What each policy is for; its name is `<cluster>-<purpose>` (components/cluster.py workload_policy_arn).
LOAD_BALANCER_CONTROLLER = "load-balancer-controller"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
MODEL_READER = "model-reader"
COMPILE_CACHE = "compile-cache"
WORKLOAD_POLICY_PURPOSES = (LOAD_BALANCER_CONTROLLER, CLUSTER_AUTOSCALER, MODEL_READER, COMPILE_CACHE)

# Under the model mirror's bucket, beside the model's prefix (components/compile_cache.py S3_PREFIX).
COMPILE_CACHE_PREFIX = "compile-cache"


@dataclass(frozen=True)
class ModelMirror:
    """A stack's `modelSource` s3://bucket/prefix, as serve_app/config.py `s3_location` reads it."""

    bucket: str
    prefix: str


def model_mirror(source: str) -> ModelMirror:
    """`s3://bucket/prefix` (the prefix's slashes at either end dropped); ValueError naming the setting."""
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    named = source.startswith("s3://") and S3_BUCKET_NAME.fullmatch(bucket) and ".." not in bucket
    if not named or not prefix.strip("/"):
        raise ValueError(f"deployModelSources: {source!r} is not s3://<bucket>/<prefix> (the stack's modelSource)")
    return ModelMirror(bucket, prefix.strip("/"))


def deploy_model_sources(entries: Sequence[str], environments: Sequence[str]) -> dict[str, ModelMirror]:
    """`environment=s3://bucket/prefix` entries (deployModelSources) as a map, at most one per deploy environment."""
    sources = {environment: source for environment, _, source in (entry.partition("=") for entry in entries)}
    if any("=" not in entry for entry in entries) or not set(sources) <= set(environments) or len(sources) != len(
            entries):
        raise ValueError(f"deployModelSources: got {list(entries)!r}; allowed: at most one "
                         f"'environment=s3://<bucket>/<prefix>' for each of deployEnvironments {list(environments)!r} "
                         "(the stack's modelSource, where it is an S3 mirror)")
    return {environment: model_mirror(source) for environment, source in sources.items()}


def workload_policy_name(cluster_name: str, purpose: str) -> str:
    # IAM names a policy uniquely in the account whatever its path: the cluster's name makes it the
    # environment's (at most 100 + 25 characters; IAM allows 128).
    return f"{cluster_name}-{purpose}"


def workload_policy_arn(partition: str, account_id: str, cluster_name: str, purpose: str) -> str:
    return iam_arn(partition, account_id, f"policy{ROLE_PATH}{workload_policy_name(cluster_name, purpose)}")


def load_balancer_controller_policy() -> dict:
    return json.loads(LOAD_BALANCER_CONTROLLER_POLICY_FILE.read_text(encoding="utf-8"))


def cluster_autoscaler_policy(cluster_name: str) -> dict:
    """Describe anywhere; resize only the Auto Scaling groups EKS made for this cluster's GPU node groups
    that may grow: the stack names exactly those `<cluster>-gpu-…` (components/node_groups.py
    `gpu_node_group_name_prefix`), every other group gets a name Pulumi makes from its resource name."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "Describe", "Effect": "Allow", "Action": list(CLUSTER_AUTOSCALER_READ_ACTIONS), "Resource": "*"},
            {"Sid": "ResizeTheGpuNodeGroupsOnly", "Effect": "Allow", "Action": list(CLUSTER_AUTOSCALER_WRITE_ACTIONS),
             "Resource": "*",
             "Condition": {"StringEquals": {"aws:ResourceTag/eks:cluster-name": cluster_name},
                           "StringLike": {"aws:ResourceTag/eks:nodegroup-name": f"{cluster_name}-gpu-*"}}},
        ],
    }


def model_reader_policy(partition: str, mirror: ModelMirror) -> dict:
    """Get the objects under the mirror's prefix and list that prefix only (the streamer lists the shards)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadModelObjects", "Effect": "Allow", "Action": "s3:GetObject",
             "Resource": f"arn:{partition}:s3:::{mirror.bucket}/{mirror.prefix}/*"},
            {"Sid": "ListModelPrefix", "Effect": "Allow", "Action": "s3:ListBucket",
             "Resource": f"arn:{partition}:s3:::{mirror.bucket}",
             "Condition": {"StringLike": {"s3:prefix": [mirror.prefix, f"{mirror.prefix}/*"]}}},
        ],
    }


def compile_cache_archives(partition: str, mirror: ModelMirror) -> str:
    """The objects holding the mirror's compile-cache archives, one per cache key: what the compile cache's
    policy reads and writes, and the workload boundary lets be written."""
    return f"arn:{partition}:s3:::{mirror.bucket}/{COMPILE_CACHE_PREFIX}/{mirror.prefix}/*"


def compile_cache_policy(partition: str, mirror: ModelMirror) -> dict:
    """Read, list and write the mirror's compile-cache archives (components/compile_cache.py), for a stack
    with compileCacheInS3."""
    cache = f"{COMPILE_CACHE_PREFIX}/{mirror.prefix}"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "CompileCacheObjects", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
             "Resource": compile_cache_archives(partition, mirror)},
            {"Sid": "ListCompileCache", "Effect": "Allow", "Action": "s3:ListBucket",
             "Resource": f"arn:{partition}:s3:::{mirror.bucket}",
             "Condition": {"StringLike": {"s3:prefix": [f"{cache}/*"]}}},
        ],
    }


def workload_policies(*, partition: str, cluster_name: str, mirror: ModelMirror | None = None) -> dict[str, dict]:
    """One environment's workload policies by purpose: the Load Balancer Controller's and the Cluster
    Autoscaler's always (a stack attaches each only where it runs it), the model reader's and the compile
    cache's where the environment reads its model from an S3 mirror."""
    mirrored: Mapping[str, dict] = {} if mirror is None else {
        MODEL_READER: model_reader_policy(partition, mirror), COMPILE_CACHE: compile_cache_policy(partition, mirror)}
    return {LOAD_BALANCER_CONTROLLER: load_balancer_controller_policy(),
            CLUSTER_AUTOSCALER: cluster_autoscaler_policy(cluster_name), **mirrored}
