"""The EKS control plane (pulumi-eks `eks.Cluster`), its secrets key, the node IAM role, and the one
Kubernetes provider everything in the cluster goes through.

Secure by default: Kubernetes secrets are envelope-encrypted with a customer KMS key (rotation on);
authentication is EKS access entries only (no aws-auth ConfigMap); the API endpoint is always
reachable privately and publicly only from `apiPublicAccessCidrs` (or not at all); nodes get no
public IPs; every control-plane log type goes to CloudWatch; the VPC CNI enforces NetworkPolicies.
CoreDNS becomes an EKS managed add-on (`CoreDns`) once there are nodes to run it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.addons import explicit_dependencies
from components.config.cluster import ClusterSettings
from components.config.names import stack_tags
from components.network import Network

# Every EKS control-plane log type (audit is the one an incident review needs).
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")

# AWS managed policies an EKS node needs: join the cluster, run the VPC CNI, pull from ECR (the Ray
# image), and be reachable by SSM Session Manager instead of SSH.
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)

# What pulumi-eks attached to the cluster role it made itself (nodejs/eks/cluster/cluster.ts).
CLUSTER_ROLE_POLICIES = ("AmazonEKSClusterPolicy",)

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"

# Every IAM role the stack creates lives under this path: the deploy role may manage and pass
# roles under it only (bootstrap/deploy_permissions/).
IAM_ROLE_PATH = "/eks-pd-llm/"

# EKS would create its log group itself, with no expiry; created here first, it gets one.
CONTROL_PLANE_LOG_RETENTION_DAYS = 90


def _in_zones(subnet_id_by_az: dict[str, pulumi.Output[str]], zones: tuple[str, ...]) -> list[pulumi.Output[str]]:
    return [subnet for zone, subnet in subnet_id_by_az.items() if not zones or zone in zones]


def admin_entry_name(principal_arn: str) -> str:
    """Stable logical name of an admin's access entry: account + role/user path, not list order."""
    return re.sub(r"[^A-Za-z0-9-]", "-", principal_arn.split(":", 4)[4])


@dataclass(frozen=True)
class ClusterArgs:
    """Inputs of `Cluster`.

    settings: validated control-plane settings (name, version, admins, API CIDRs, protection).
    network: the VPC; nodes go to its private subnets, load balancers to its public ones.
    control_plane_zones: the AZs (names) whose subnets the control plane gets: EKS refuses some AZ
        IDs (facts/aws.py), which node groups may still use; empty = every AZ of the network.
    log_types: control-plane log types sent to CloudWatch; default all of them.
    log_retention_days: how long CloudWatch keeps them; default 90 days.
    node_policies: AWS managed policy names attached to the node role; default the EKS node set + SSM.
    earlier_iam_roles: the deployed cluster runs with the roles of a stack created before the stack made
        its roles under IAM_ROLE_PATH (DeployedStack.earlier_iam_roles): pulumi-eks's cluster role and
        a node role at IAM's root path, kept; default the current layout, for a new stack.
    """

    settings: ClusterSettings
    network: Network
    control_plane_zones: tuple[str, ...] = ()
    log_types: tuple[str, ...] = CONTROL_PLANE_LOG_TYPES
    log_retention_days: int = CONTROL_PLANE_LOG_RETENTION_DAYS
    node_policies: tuple[str, ...] = NODE_POLICIES
    earlier_iam_roles: bool = False


class Cluster(pulumi.ComponentResource):
    """EKS cluster with KMS-encrypted secrets, access-entry admins, OIDC and a Kubernetes provider.

    No default node group: node groups are their own components and use `node_role`. Only the
    EKS-created cluster security group is used (`skip_default_security_groups`): managed nodes get
    it automatically, and it already allows all traffic among nodes and the control plane.
    """

    eks_cluster: eks.Cluster
    core: pulumi.Output[eks.CoreDataArgs]
    cluster_name: pulumi.Output[str]
    kubernetes_version: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    cluster_security_group_id: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    cluster_role: aws.iam.Role | None  # None: pulumi-eks's own (an earlier stack's, ClusterArgs.earlier_iam_roles)
    node_role: aws.iam.Role
    permissions_boundary: str | None  # of every role the stack creates (iamPermissionsBoundaryArn)
    tags: dict[str, str]  # the stack tag, on the key, the log group and every role of the stack
    node_role_policies: list[aws.iam.RolePolicyAttachment]
    secrets_key: aws.kms.Key

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:cluster:Cluster", name, None, opts)
        settings = args.settings
        partition = aws.get_partition().partition
        child = pulumi.ResourceOptions(parent=self)
        protected = pulumi.ResourceOptions(parent=self, protect=settings.protect)
        tags = stack_tags(settings.name)
        # Every role of the stack carries it: the deploy role changes only its own environment's roles.
        self.tags = tags

        self.secrets_key = self._secrets_key(name, settings, tags, child, protected)
        cluster_role_policies = self._roles(name, args, partition, tags, child)
        control_plane_logs = self._control_plane_logs(name, args, tags, child)
        self.eks_cluster = self._control_plane(name, args, partition, tags, pulumi.ResourceOptions.merge(
            protected, pulumi.ResourceOptions(depends_on=[control_plane_logs, *cluster_role_policies])))
        self._connection(name, settings, child)

        self.register_outputs({
            "cluster_name": self.cluster_name,
            "kubeconfig": self.kubeconfig,
            "cluster_security_group_id": self.cluster_security_group_id,
            "oidc_provider_arn": self.oidc_provider_arn,
            "node_role_arn": self.node_role.arn,
        })

    @staticmethod
    def _secrets_key(name: str, settings: ClusterSettings, tags: dict[str, str], child: pulumi.ResourceOptions,
                     protected: pulumi.ResourceOptions) -> aws.kms.Key:
        """The KMS key that envelope-encrypts Kubernetes secrets, and its alias."""
        key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {settings.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=protected,
        )
        aws.kms.Alias(
            f"{name}-secrets", name=f"alias/{settings.name}-eks-secrets", target_key_id=key.key_id,
            opts=child)
        return key

    def _roles(self, name: str, args: ClusterArgs, partition: str, tags: dict[str, str],
               child: pulumi.ResourceOptions) -> list[aws.iam.RolePolicyAttachment]:
        """The cluster role (unless an earlier stack's is kept) and the node role; returns the cluster
        role's policy attachments, which the control plane waits for."""
        settings = args.settings
        # Both roles of the cluster are made here, under one path and the permissions boundary the
        # deploy role requires (bootstrap/deploy_permissions/): pulumi-eks's own cluster role
        # would take neither. A stack created before keeps its roles (what its deployed cluster
        # says): a new cluster role or node role replaces the cluster and every node group.
        self.permissions_boundary = settings.iam_permissions_boundary_arn
        keep_earlier = args.earlier_iam_roles
        cluster_role_policies: list[aws.iam.RolePolicyAttachment] = []
        self.cluster_role = None
        if not keep_earlier:
            self.cluster_role, cluster_role_policies = bounded_role(
                f"{name}-eks", description=f"Service role of EKS cluster {settings.name}",
                # The trust pulumi-eks gave its cluster role (TagSession: EKS tags its sessions).
                assume_role_policy=service_trust("eks.amazonaws.com", ["sts:AssumeRole", "sts:TagSession"]),
                managed_policies=CLUSTER_ROLE_POLICIES, permissions_boundary=self.permissions_boundary,
                partition=partition, tags=tags, opts=child)
        self.node_role, self.node_role_policies = bounded_role(
            f"{name}-node", description=f"EC2 role of the nodes of EKS cluster {settings.name}",
            assume_role_policy=service_trust("ec2.amazonaws.com", ["sts:AssumeRole"]),
            managed_policies=args.node_policies, permissions_boundary=self.permissions_boundary,
            # No path for an earlier stack's role: IAM's default ("/"), as it was created.
            partition=partition, tags=tags, opts=child, path=None if keep_earlier else IAM_ROLE_PATH)
        return cluster_role_policies

    @staticmethod
    def _control_plane_logs(name: str, args: ClusterArgs, tags: dict[str, str],
                            child: pulumi.ResourceOptions) -> aws.cloudwatch.LogGroup:
        """The log group EKS writes control-plane logs to; it must exist before the cluster does."""
        return aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{args.settings.name}/cluster",
            retention_in_days=args.log_retention_days,
            tags=tags,
            opts=child,
        )

    def _control_plane(self, name: str, args: ClusterArgs, partition: str, tags: dict[str, str],
                       opts: pulumi.ResourceOptions) -> eks.Cluster:
        settings = args.settings
        admin_policy_arn = f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"
        return eks.Cluster(
            f"{name}-eks",
            name=settings.name,
            version=settings.kubernetes_version,
            vpc_id=args.network.vpc_id,
            public_subnet_ids=_in_zones(args.network.public_subnet_id_by_az, args.control_plane_zones),
            private_subnet_ids=_in_zones(args.network.private_subnet_id_by_az, args.control_plane_zones),
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries={
                admin_entry_name(arn): eks.AccessEntryArgs(
                    principal_arn=arn,
                    access_policies={"cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=admin_policy_arn,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))},
                )
                for arn in settings.admin_principal_arns
            },
            create_oidc_provider=True,
            enabled_cluster_log_types=list(args.log_types),
            encryption_config_key_arn=self.secrets_key.arn,
            endpoint_private_access=True,
            endpoint_public_access=settings.endpoint_public_access,
            public_access_cidrs=list(settings.api_public_access_cidrs) or None,
            deletion_protection=settings.protect,
            # The VPC CNI add-on's network policy agent: without it the serving namespace's
            # NetworkPolicies (components/inference.py) are accepted and not enforced.
            vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
            # None: pulumi-eks makes (or, for an earlier stack, keeps) its own cluster role.
            service_role=self.cluster_role,
            tags=tags,
            opts=opts,
        )

    def _connection(self, name: str, settings: ClusterSettings, child: pulumi.ResourceOptions) -> None:
        """What the rest of the stack reaches the cluster through: its name, core data, kubeconfig,
        OIDC provider and the one Kubernetes provider."""
        # The name is ours (set above); deriving it from the cluster's URN makes every consumer wait
        # for the cluster without pulling a resource reference through the engine.
        self.cluster_name = pulumi.Output.all(self.eks_cluster.urn, settings.name).apply(lambda values: values[1])
        # What node groups take as `cluster`. Not the eks.Cluster object: it would travel as a resource
        # reference, which the mock engine re-creates on its own event loop and the run hangs ("attached
        # to a different loop") once the kubeconfig is consumed. Not `eks_cluster.core` as is either:
        # an output-type value is sent with Python key names (instance_roles), which the provider does
        # not read. As CoreDataArgs (same field names) it is sent as the provider expects (instanceRoles).
        self.core = self.eks_cluster.core.apply(lambda core: eks.CoreDataArgs(**core))
        # The node groups' Kubernetes minor: known once the control plane is at it (EKS upgrades the
        # control plane first and refuses nodes newer than it), so a new minor rolls the nodes after.
        self.kubernetes_version = self.eks_cluster.core.apply(lambda _: settings.kubernetes_version)
        self.kubeconfig = pulumi.Output.secret(self.eks_cluster.kubeconfig_json)
        self.cluster_security_group_id = self.eks_cluster.cluster_security_group_id
        self.oidc_provider_arn = self.eks_cluster.oidc_provider_arn
        # Issuer host and path without https://: the condition key prefix of IRSA trust policies.
        self.oidc_issuer = self.eks_cluster.oidc_issuer
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=child)


def bounded_role(name: str, *, description: str, assume_role_policy: pulumi.Input[str],
                 managed_policies: tuple[str, ...], permissions_boundary: str | None, partition: str,
                 tags: dict[str, str], opts: pulumi.ResourceOptions, path: str | None = IAM_ROLE_PATH,
                 trusts_the_cluster: bool = False) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """An IAM role of the stack: under `path` (IAM_ROLE_PATH), with the permissions boundary when one
    is set, and AWS managed policies (`<path/>name` under arn:aws:iam::aws:policy/) attached.
    `trusts_the_cluster`: an IRSA role, trusting the cluster's OIDC issuer; a new issuer (a new cluster)
    makes a new role, since the deploy role may not change a trust policy in place
    (bootstrap/deploy_permissions/). The cluster and node roles trust a service, which never changes."""
    role = aws.iam.Role(
        name,
        path=path,
        description=description,
        assume_role_policy=assume_role_policy,
        permissions_boundary=permissions_boundary,
        tags=tags,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["assumeRolePolicy"] if trusts_the_cluster else None)),
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy.rsplit('/', 1)[-1]}", role=role.name,
            policy_arn=f"arn:{partition}:iam::aws:policy/{policy}", opts=opts)
        for policy in managed_policies
    ]
    return role, attachments


def workload_policy_arn(role_arn: str, cluster_name: str, purpose: str) -> str:
    """The policy the bootstrap made for `purpose` of `cluster_name`'s workloads, in the partition and account
    of `role_arn`: `<cluster>-<purpose>` under IAM_ROLE_PATH (bootstrap/deploy_permissions/workload_policies.py).
    The stack writes no policy of its own: its deploy role may only attach these (and AWS's)."""
    partition, account_id = role_arn.split(":")[1], role_arn.split(":")[4]
    return f"arn:{partition}:iam::{account_id}:policy{IAM_ROLE_PATH}{cluster_name}-{purpose}"


def attach_workload_policy(name: str, role: aws.iam.Role, cluster_name: str, purpose: str,
                           opts: pulumi.ResourceOptions) -> aws.iam.RolePolicyAttachment:
    """`role` given the bootstrap's `purpose` policy of its cluster."""
    return aws.iam.RolePolicyAttachment(
        name, role=role.name, policy_arn=role.arn.apply(lambda arn: workload_policy_arn(arn, cluster_name, purpose)),
        opts=opts)


def service_trust(service: str, actions: list[str]) -> str:
    """A trust policy letting one AWS service assume the role."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}]})


@dataclass(frozen=True)
class CoreDnsArgs:
    """Inputs of `CoreDns`.

    cluster: the cluster whose DNS EKS should manage.
    """

    cluster: Cluster


class CoreDns(pulumi.ComponentResource):
    """CoreDNS as an EKS managed add-on, so EKS patches and upgrades it with the cluster.

    pulumi-eks creates its own coredns add-on only with its default node group, Fargate or Auto
    Mode; with `skip_default_node_group` the cluster keeps the self-managed CoreDNS that EKS
    bootstraps, which nothing updates. The add-on adopts that Deployment (conflicts resolved by
    overwriting it). Pass the system node group in `opts.depends_on`: with no node to run on, the
    add-on stays DEGRADED and its creation waits until it times out.
    """

    addon: aws.eks.Addon

    def __init__(self, name: str, args: CoreDnsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eks-pd-llm:cluster:CoreDns", name, None, opts)
        self.addon = aws.eks.Addon(
            name,
            cluster_name=args.cluster.cluster_name,
            addon_name="coredns",
            # No addon_version: EKS installs its default version for the cluster's Kubernetes version.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions(parent=self, depends_on=explicit_dependencies(opts)),
        )
        self.register_outputs({"addon_name": self.addon.addon_name})
