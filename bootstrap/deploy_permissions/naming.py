"""The names and ARNs the bootstrap, the deploy role and the stack agree on: the roles' path and
boundary, IAM's size limit on their policies, the managed policies the stack attaches, the stack tag,
the service-linked roles."""

from __future__ import annotations

from collections.abc import Iterable

# Every IAM role the stack creates lives here (components/cluster.py IAM_ROLE_PATH).
ROLE_PATH = "/eks-pd-llm/"
BOUNDARY_POLICY_NAME = "eks-pd-llm-workload-boundary"
DEPLOY_POLICY_NAME = "eks-pd-llm-deploy"
# IAM's limit for one managed policy document, whitespace not counted (IAM and STS quotas page): the
# deploy role's policies are split to fit it, the workload boundary must.
MANAGED_POLICY_MAX_CHARS = 6144
# The AWS managed policies the stack attaches to its roles (components/cluster.py, storage.py), by
# their name under arn:aws:iam::aws:policy/.
ATTACHABLE_MANAGED_POLICIES = (
    "AmazonEKSClusterPolicy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
    "service-role/AmazonEBSCSIDriverPolicy",
)
# The services the stack passes its roles to: EKS (the cluster role; the node role for node groups).
PASS_ROLE_TO = ("eks.amazonaws.com",)

# Every resource the stack tags carries this key with its cluster's name (components/cluster.py,
# gcs_store.py); the bootstrap's own key carries a value no cluster name can have. KMS keys and
# ElastiCache are granted by it, so one environment's role cannot change the other's.
STACK_TAG = "eks-pd-llm/cluster"
BOOTSTRAP_TAG_VALUE = "eks-pd-llm bootstrap"

# The service-linked roles the bootstrap creates where the account lacks them (so the deploy role creates
# none), by service. IAM keeps each under the path /aws-service-role/<service>/.
SERVICE_LINKED_ROLE_PATH = "/aws-service-role/"
SERVICE_LINKED_ROLES = {
    "eks.amazonaws.com": "AWSServiceRoleForAmazonEKS",
    "eks-nodegroup.amazonaws.com": "AWSServiceRoleForAmazonEKSNodegroup",
    "elasticache.amazonaws.com": "AWSServiceRoleForElastiCache",
}


def service_linked_role_services(entries: Iterable[str]) -> list[str]:
    """The bootstrap's `serviceLinkedRoles`: services of SERVICE_LINKED_ROLES, each once."""
    services = list(entries)
    if len(set(services)) != len(services) or not set(services) <= set(SERVICE_LINKED_ROLES):
        raise ValueError(f"serviceLinkedRoles: got {services!r}; allowed: any of {sorted(SERVICE_LINKED_ROLES)}, "
                         "each once (or unset it: the bootstrap then creates only the roles the account lacks)")
    return services


def missing_service_linked_role_services(account_role_names: Iterable[str]) -> list[str]:
    """The services of SERVICE_LINKED_ROLES whose role is not among the account's `account_role_names`."""
    existing = set(account_role_names)
    return [service for service, name in SERVICE_LINKED_ROLES.items() if name not in existing]


def service_linked_role_arn(partition: str, account_id: str, service: str) -> str:
    return iam_arn(partition, account_id, f"role{SERVICE_LINKED_ROLE_PATH}{service}/{SERVICE_LINKED_ROLES[service]}")


def iam_arn(partition: str, account_id: str, resource: str) -> str:
    return f"arn:{partition}:iam::{account_id}:{resource}"


def boundary_arn(partition: str, account_id: str) -> str:
    return iam_arn(partition, account_id, f"policy{ROLE_PATH}{BOUNDARY_POLICY_NAME}")

