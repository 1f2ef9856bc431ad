"""The EKS control plane's settings: version, administrators, who reaches the API; and the
documentation placeholders a stack file ships with."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from components.config.names import ClusterName, ipv4_cidrs
from facts.aws import DOCUMENTATION_ACCOUNT_IDS, is_documentation_cidr
from serve_app.errors import ConfigError
from serve_app.stack_keys import StackKeyModel

# EKS Kubernetes versions in standard support (EKS version calendar, read 2026-11). The node AMIs
# (AL2023 standard and NVIDIA) are published for exactly these.
SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35")

# EKS access entries take IAM roles and users (not STS assumed-role session ARNs).
_IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}$")
_IAM_POLICY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:policy/[\w+=,.@/-]{1,512}$")

# The private address ranges (RFC 1918).
RFC_1918_NETWORKS = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


class ClusterSettings(StackKeyModel):
    """The EKS control plane: version, who administers it, who can reach its API."""

    name: ClusterName = Field(alias="clusterName", description="a DNS-1035 label, at most 40 characters")
    kubernetes_version: str = Field(
        alias="kubernetesVersion", description=", ".join(SUPPORTED_KUBERNETES_VERSIONS))
    admin_principal_arns: tuple[str, ...] = Field(
        alias="adminPrincipalArns",
        description="IAM role or user ARNs (arn:aws:iam::<12-digit account>:role/<name> or :user/<name>)")
    api_public_access_cidrs: tuple[str, ...] = Field(
        alias="apiPublicAccessCidrs",
        description="IPv4 CIDRs that may reach the API (your office or CI egress), e.g. [\"198.18.0.0/24\"]; "
                    "[] (private only) needs deployFromInsideVpc: true")
    deploy_from_inside_vpc: bool = Field(alias="deployFromInsideVpc", description="true or false")
    protect: bool = Field(alias="deletionProtection", description="true or false")
    iam_permissions_boundary_arn: str | None = Field(
        alias="iamPermissionsBoundaryArn",
        description='"" or a customer managed policy ARN (arn:aws:iam::<12-digit account>:policy/<name>)')

    @field_validator("iam_permissions_boundary_arn", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None

    @field_validator("iam_permissions_boundary_arn")
    @classmethod
    def _policy_arn(cls, value: str | None) -> str | None:
        if value is not None and not _IAM_POLICY_ARN.match(value):
            raise ValueError("not a customer managed IAM policy ARN")
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            why = "not a Kubernetes version EKS supports (a minor version like 1.35)"
            if re.fullmatch(r"\d+\.[1-9]", value):
                # YAML reads an unquoted 1.30 as the number 1.3: the trailing zero is gone before
                # the program sees the value.
                why += (f'; if the stack file says {value}0 unquoted, YAML read it as the number {value}: '
                        f'quote it ("{value}0")')
            raise ValueError(why)
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principal_arns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arn in value:
            if not _IAM_PRINCIPAL_ARN.match(arn):
                raise ValueError(f"{arn!r} is not an IAM role or user ARN")
        if len(set(value)) != len(value):
            raise ValueError("an ARN is listed twice")
        return value

    @field_validator("api_public_access_cidrs")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for cidr in ipv4_cidrs(value):
            # The public endpoint sees callers' public addresses only, and EKS refuses private ranges in
            # publicAccessCidrs (documentation ranges are placeholders, judged by a real preview).
            if any(ipaddress.IPv4Network(cidr).subnet_of(private) for private in RFC_1918_NETWORKS):
                raise ConfigError(cls.key("api_public_access_cidrs"), list(value),
                                  "public IPv4 CIDRs (your office or CI egress)",
                                  f"{cidr} is private; inside the VPC: deployFromInsideVpc")
        return value

    @model_validator(mode="after")
    def _reachable_by_pulumi_up(self) -> ClusterSettings:
        # Private-only is a valid endpoint, but the Helm releases and the RayService are applied
        # through it by `pulumi up` itself: from a laptop or a hosted CI runner that fails after
        # the VPC, the cluster and both node groups exist (about 25 minutes of GPUs billed).
        if not self.api_public_access_cidrs and not self.deploy_from_inside_vpc:
            raise ConfigError(
                self.key("api_public_access_cidrs"), [], "the CIDRs `pulumi up` and kubectl connect from, "
                f"or [] with {self.key('deploy_from_inside_vpc')}: true",
                "[] makes the API endpoint private: `pulumi up` from outside the VPC would build the VPC, cluster "
                "and GPU nodes, then fail at the first Helm release")
        return self

    @property
    def endpoint_public_access(self) -> bool:
        return bool(self.api_public_access_cidrs)

def documentation_placeholders(cluster: ClusterSettings) -> list[ConfigError]:
    """The documentation values a stack file ships with (facts/aws.py): a real preview refuses the
    first; the offline plan warns about each (and `--strict` fails)."""
    found = []
    for cidr in cluster.api_public_access_cidrs:
        if is_documentation_cidr(cidr):
            found.append(ConfigError(cluster.key("api_public_access_cidrs"), list(cluster.api_public_access_cidrs),
                                     "the CIDRs `pulumi up` and kubectl really connect from",
                                     f"{cidr} is a documentation range (RFC 5737), a placeholder to replace"))
    for arn in cluster.admin_principal_arns:
        account = arn.split(":")[4]
        if account in DOCUMENTATION_ACCOUNT_IDS:
            found.append(ConfigError(cluster.key("admin_principal_arns"), list(cluster.admin_principal_arns),
                                     "the IAM roles or users that operate the cluster",
                                     f"account {account} is AWS's documentation example, a placeholder to replace"))
    return found
