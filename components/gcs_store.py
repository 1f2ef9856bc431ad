"""The Ray head's fault tolerance store: an ElastiCache (Redis OSS) replication group KubeRay points
the GCS at (RayService `gcsFaultToleranceOptions`), so a head restart reloads the cluster state
instead of KubeRay restarting every worker (docs/SOURCES.md#gcs-fault-tolerance).

- Redis OSS, cluster mode disabled: KubeRay's GCS FT guide requires a single-shard Redis (one
  primary, replicas for failover). Redis OSS rather than Valkey: Ray and KubeRay document and
  test GCS FT against Redis.
- Two nodes in different AZs of the private subnets, automatic failover: the primary's endpoint
  follows a failover, so the head's `redisAddress` stays valid.
- TLS required and encryption at rest (AWS's key). The head connects with `rediss://` (Ray's
  `services.get_address` and KubeRay 1.7.0's Redis cleanup Job, raycluster_controller.go
  buildRedisCleanupJob, both turn TLS on for that scheme) and checks the server certificate
  against the image's CA bundle (`manifests/ray_service.py`).
- An AUTH token the program generates once: `secrets.token_urlsafe`, kept by ElastiCache and, as a
  Pulumi secret, in the stack's state; `ignore_changes` keeps the first one (every run generates a
  new candidate, which is ignored). No random provider plugin, no value a person picks or copies.
  The serving namespace's Secret takes the token back from the replication group.
- Reachable only from the nodes that run the Ray head: the store's security group admits TCP 6379
  from `client_security_group` alone, which only the system node group carries. Ray's workers never
  talk to the store (their raylets talk to the GCS on the head), and KubeRay's Redis cleanup Job is
  built from the head's pod template, so it runs on the same nodes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.config.names import stack_tags
from components.network import Network

ENGINE = "redis"
ENGINE_VERSION = "7.1"
NODE_TYPE = "cache.t4g.small"
NODE_COUNT = 2  # a primary and a replica in another AZ: automatic failover needs both
PORT = 6379
# 48 random bytes, URL-safe base64: 64 characters of [A-Za-z0-9_-], inside ElastiCache's rule for
# AUTH tokens (16 to 128 printable characters, none of @ " /).
AUTH_TOKEN_BYTES = 48
TLS_SCHEME = "rediss"


@dataclass(frozen=True)
class GcsStoreArgs:
    """Inputs of `GcsStore`.

    cluster_name: names and tags what the store is for.
    network: the store's nodes go to its private subnets; its security groups to its VPC.
    """

    cluster_name: str
    network: Network


class GcsStore(pulumi.ComponentResource):
    """Security groups (the store's, and its clients' for the system nodes), subnet group, and the
    encrypted, authenticated, multi-AZ replication group."""

    client_security_group: aws.ec2.SecurityGroup
    replication_group: aws.elasticache.ReplicationGroup
    address: pulumi.Output[str]
    auth_token: pulumi.Output[str]

    def __init__(self, name: str, args: GcsStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:gcs:GcsStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = stack_tags(args.cluster_name)

        store_group = self._security_groups(name, args, tags, child)
        subnets = aws.elasticache.SubnetGroup(
            f"{name}-subnets",
            description=f"Private subnets of {args.cluster_name}",
            subnet_ids=args.network.private_subnet_ids,
            tags=tags,
            opts=child,
        )
        self.replication_group = self._replication_group(name, args, subnets, store_group, tags)
        self.address = pulumi.Output.concat(
            f"{TLS_SCHEME}://", self.replication_group.primary_endpoint_address, f":{PORT}")
        self.auth_token = pulumi.Output.secret(self.replication_group.auth_token.apply(lambda token: token or ""))
        self.register_outputs({"address": self.address})

    def _security_groups(self, name: str, args: GcsStoreArgs, tags: dict[str, str],
                         child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        """The clients' group and the store's, which admits Redis TLS from the clients' alone;
        returns the store's."""
        vpc_id = args.network.vpc_id
        # Carries no rule of its own: it marks the nodes allowed to reach the store (the system nodes).
        self.client_security_group = aws.ec2.SecurityGroup(
            f"{name}-clients",
            description=f"Ray head nodes of {args.cluster_name}: may reach the GCS store",
            vpc_id=vpc_id,
            tags={**tags, "Name": f"{args.cluster_name}-gcs-store-clients"},
            opts=child,
        )
        store_group = aws.ec2.SecurityGroup(
            f"{name}-store",
            description=f"GCS store of {args.cluster_name}: Redis TLS from the Ray head nodes only",
            vpc_id=vpc_id,
            tags={**tags, "Name": f"{args.cluster_name}-gcs-store"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-from-clients",
            security_group_id=store_group.id,
            referenced_security_group_id=self.client_security_group.id,
            ip_protocol="tcp",
            from_port=PORT,
            to_port=PORT,
            description="Redis (TLS) from the Ray head nodes",
            tags=tags,
            opts=child,
        )
        return store_group

    def _replication_group(self, name: str, args: GcsStoreArgs, subnets: aws.elasticache.SubnetGroup,
                           store_group: aws.ec2.SecurityGroup,
                           tags: dict[str, str]) -> aws.elasticache.ReplicationGroup:
        return aws.elasticache.ReplicationGroup(
            name,
            description=f"Ray GCS fault tolerance of {args.cluster_name}",
            engine=ENGINE,
            engine_version=ENGINE_VERSION,
            node_type=NODE_TYPE,
            num_cache_clusters=NODE_COUNT,
            automatic_failover_enabled=True,
            multi_az_enabled=True,
            port=PORT,
            subnet_group_name=subnets.name,
            security_group_ids=[store_group.id],
            at_rest_encryption_enabled=True,
            transit_encryption_enabled=True,
            transit_encryption_mode="required",
            auth_token=pulumi.Output.secret(secrets.token_urlsafe(AUTH_TOKEN_BYTES)),
            auto_minor_version_upgrade=True,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["authToken"],
                                        additional_secret_outputs=["authToken"]),
        )
