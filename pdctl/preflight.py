"""`pdctl preflight`: what an AWS account would refuse, found before `pulumi up` spends anything.

Read-only (IAM policy simulator, Describe/Get/List calls), one line per finding, worst first:
- the deploy principal's permissions: every statement bootstrap/deploy_permissions.py derives for the
  stack (the caller checks included, with the condition values AWS will see) through
  iam:SimulatePrincipalPolicy, one finding per refused action;
- the On-Demand vCPU quota of each instance family against every node group at its maximum (other
  instances of the account count against the same quota);
- the GPU types' offerings: the configured GPU AZ must offer each, and some AZ of the region must;
- the service-linked roles the first cluster, node group and replication group create (then the
  principal needs iam:CreateServiceLinkedRole, which the simulation checks).
Exit status by the worst finding: 0 none above info, 4 a warning, 5 an error.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEPLOY_PERMISSIONS = REPO / "bootstrap" / "deploy_permissions.py"

SEVERITIES = ("error", "warning", "info")
EXIT_STATUS = {"error": 5, "warning": 4, "info": 0}

# EC2's On-Demand vCPU quotas (Service Quotas, service code ec2) by the instance family letters.
QUOTAS = {
    "L-DB2E81BA": ("Running On-Demand G and VT instances", ("g", "vt")),
    "L-417A185B": ("Running On-Demand P instances", ("p",)),
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                   ("a", "c", "d", "h", "i", "m", "r", "t", "z")),
}
# Service-linked role names, by the service they belong to.
SERVICE_LINKED_ROLES = {
    "eks.amazonaws.com": "AWSServiceRoleForAmazonEKS",
    "eks-nodegroup.amazonaws.com": "AWSServiceRoleForAmazonEKSNodegroup",
    "elasticache.amazonaws.com": "AWSServiceRoleForElastiCache",
}
# The concrete stand-in a wildcard of a granted ARN becomes in a simulation.
SIMULATED_NAME = "preflight"


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning | info
    text: str

    @property
    def line(self) -> str:
        return f"{self.severity}: {self.text}"


@dataclass(frozen=True)
class Clients:
    """The boto3 clients preflight reads through (botocore Stubber in the tests)."""

    iam: Any
    sts: Any
    ec2: Any
    service_quotas: Any


@dataclass(frozen=True)
class NodeGroupNeed:
    """What one node group may run at its maximum."""

    name: str
    instance_type: str
    vcpus: int
    most: int


def exit_status(findings: Iterable[Finding]) -> int:
    return max((EXIT_STATUS[f.severity] for f in findings), default=0)


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


def load_deploy_permissions() -> ModuleType:
    """bootstrap/deploy_permissions.py: a module of another Pulumi project, read from this checkout."""
    spec = importlib.util.spec_from_file_location("bootstrap_deploy_permissions", DEPLOY_PERMISSIONS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------ the deploy principal

def deploy_principal(clients: Clients, principal_arn: str | None) -> str:
    """The IAM ARN to simulate: the one given, else the caller's (an assumed role's ARN with its path)."""
    if principal_arn:
        return principal_arn
    caller = clients.sts.get_caller_identity()["Arn"]
    if ":assumed-role/" not in caller:
        return caller
    role_name = caller.split(":assumed-role/", 1)[1].split("/", 1)[0]
    return clients.iam.get_role(RoleName=role_name)["Role"]["Arn"]


def _concrete(arn: str, region: str) -> str:
    """A granted ARN pattern as one resource it covers: region wildcard → the region, names → a stand-in."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[3] == "*":
        parts[3] = region
    return ":".join(parts).replace("*", SIMULATED_NAME)


def _context(condition: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The condition's keys with a value it allows: what AWS puts in the request it checks."""
    entries = []
    for operator, keys in condition.items():
        for key, value in keys.items():
            first = value[0] if isinstance(value, list) else value
            kind = "boolean" if operator == "Bool" else "string"
            entries.append({"ContextKeyName": key, "ContextKeyValues": [str(first)], "ContextKeyType": kind})
    return entries


def simulations(statements: Iterable[dict[str, Any]], region: str) -> Iterator[tuple[list[str], list[str], list]]:
    """(actions, resource ARNs, context entries) of each statement, as the simulator takes them."""
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        arns = [] if resources == ["*"] else [_concrete(resources[0], region)]
        yield actions, arns, _context(statement.get("Condition") or {})


def permission_findings(clients: Clients, principal: str, statements: list[dict[str, Any]],
                        region: str) -> list[Finding]:
    refused: list[Finding] = []
    paginator = clients.iam.get_paginator("simulate_principal_policy")
    for actions, arns, context in simulations(statements, region):
        request: dict[str, Any] = {"PolicySourceArn": principal, "ActionNames": actions}
        if arns:
            request["ResourceArns"] = arns
        if context:
            request["ContextEntries"] = context
        for page in paginator.paginate(**request):
            refused += [Finding("error", f"the deploy principal {principal} may not {r['EvalActionName']}"
                                         f"{' on ' + arns[0] if arns else ''} ({r['EvalDecision']}): "
                                         "run the bootstrap (bootstrap/) or grant it")
                        for r in page["EvaluationResults"] if r["EvalDecision"] != "allowed"]
    if not refused:
        return [Finding("info", f"the deploy principal {principal} may make every call the stack needs "
                                f"({sum(len(a) for a, _, _ in simulations(statements, region))} actions simulated)")]
    return refused


# ------------------------------------------------------------------------ capacity

def instance_family(instance_type: str) -> str:
    """The letters a quota groups a type by: g6.8xlarge → g, vt1.3xlarge → vt, m7i.xlarge → m."""
    match = re.match(r"[a-z]+", instance_type.lower())
    return match.group() if match else ""


def quota_findings(clients: Clients, needs: list[NodeGroupNeed]) -> list[Finding]:
    findings = []
    for code, (title, families) in QUOTAS.items():
        groups = [n for n in needs if instance_family(n.instance_type) in families]
        if not groups:
            continue
        needed = sum(n.vcpus * n.most for n in groups)
        quota = clients.service_quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        sizing = ", ".join(f"{n.name} {n.most} × {n.instance_type} ({n.vcpus} vCPUs)" for n in groups)
        if quota < needed:
            findings.append(Finding("error", f"quota {code} ({title}) is {quota:g} vCPUs; {sizing} need {needed}: "
                                             "request an increase in Service Quotas before pulumi up"))
        else:
            findings.append(Finding("info", f"quota {code} ({title}) is {quota:g} vCPUs; {sizing} need {needed} "
                                            "(instances outside the stack count against it too)"))
    return findings


def offering_findings(clients: Clients, instance_types: Iterable[str], gpu_zone: str | None) -> list[Finding]:
    """`gpu_zone` as gpuAvailabilityZone takes it: a zone name (us-west-2a) or ID (usw2-az1)."""
    by_id = bool(gpu_zone and re.fullmatch(r"[a-z0-9]+-az\d+", gpu_zone))
    findings = []
    for instance_type in sorted(set(instance_types)):
        offers = clients.ec2.describe_instance_type_offerings(
            LocationType="availability-zone-id" if by_id else "availability-zone",
            Filters=[{"Name": "instance-type", "Values": [instance_type]}])
        zones = sorted(o["Location"] for o in offers["InstanceTypeOfferings"])
        if not zones:
            findings.append(Finding("error", f"gpuNodeType: no availability zone of the region offers {instance_type}"))
        elif gpu_zone and gpu_zone not in zones:
            findings.append(Finding("error", f"gpuAvailabilityZone: {gpu_zone} does not offer {instance_type}; "
                                             f"these do: {', '.join(zones)}"))
        else:
            findings.append(Finding("info", f"{instance_type} is offered in {', '.join(zones)}"))
    return findings


def service_linked_role_findings(clients: Clients, services: Iterable[str]) -> list[Finding]:
    findings = []
    for service in services:
        name = SERVICE_LINKED_ROLES[service]
        try:
            clients.iam.get_role(RoleName=name)
        except clients.iam.exceptions.NoSuchEntityException:
            findings.append(Finding("warning", f"{name} does not exist yet: the first pulumi up creates it, so the "
                                               "deploy principal needs iam:CreateServiceLinkedRole for "
                                               f"{service} (simulated above)"))
        else:
            findings.append(Finding("info", f"{name} exists"))
    return findings


# ------------------------------------------------------------------------ the stack

def node_group_needs(settings: Any, system_vcpus: int) -> list[NodeGroupNeed]:
    """Every node group of the stack's settings at its maximum (`system_vcpus`: systemNodeType's, as
    EC2 describes it)."""
    system = settings.system_nodes
    gpu = [NodeGroupNeed(f"{group.own_phase or 'gpu'} nodes", group.instance.name, group.instance.vcpus, group.most)
           for group in settings.serving.node_groups]
    return [NodeGroupNeed("system nodes", system.instance_type, system_vcpus, system.count), *gpu]


def vcpus_of(clients: Clients, instance_type: str) -> int:
    [described] = clients.ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
    return int(described["VCpuInfo"]["DefaultVCpus"])


def preflight(settings: Any, clients: Clients, *, principal_arn: str | None = None,
              permissions: ModuleType | None = None) -> list[Finding]:
    """Every finding for the stack `settings` describe, worst first."""
    permissions = permissions or load_deploy_permissions()
    principal = deploy_principal(clients, principal_arn)
    account, partition = principal.split(":")[4], principal.split(":")[1]
    statements = permissions.deploy_policy_statements(
        partition=partition, account_id=account, cluster_name=settings.cluster.name)
    services = ["eks.amazonaws.com", "eks-nodegroup.amazonaws.com"] + (
        ["elasticache.amazonaws.com"] if settings.serving.gcs_fault_tolerance else [])
    return sorted_findings([
        *permission_findings(clients, principal, statements, settings.region),
        *quota_findings(clients, node_group_needs(settings, vcpus_of(clients, settings.system_nodes.instance_type))),
        *offering_findings(clients, (g.instance.name for g in settings.serving.node_groups),
                           settings.gpu_nodes.availability_zone),
        *service_linked_role_findings(clients, services),
    ])


def run_preflight(settings: Any, principal_arn: str | None) -> tuple[list[str], int]:
    """Preflight against the account of the usual AWS credentials, in the stack's region: the lines
    to print and the exit status."""
    import boto3

    session = boto3.Session(region_name=settings.region)
    clients = Clients(*(session.client(name) for name in ("iam", "sts", "ec2", "service-quotas")))
    findings = preflight(settings, clients, principal_arn=principal_arn)
    return [f.line for f in findings], exit_status(findings)
